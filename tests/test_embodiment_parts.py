"""Embodiment parts on tiny hand-computed inputs: E's formula, S2R reweighting, faults, MTBF,
$_phys, episode selection and the checks beyond the seed."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from embodied_eval.embodiment import compute_embodiment, embodiment_raw, embodiment_score
from embodied_eval.embodiment.beyond import (
    baseline_calibration,
    detector_correction,
    policy_agreement,
    rogan_gladen,
)
from embodied_eval.embodiment.reliability import actuation_failures, real_faults
from embodied_eval.embodiment.selection import (
    first_scored_by_policy,
    group_by_policy,
    select_episodes,
)
from embodied_eval.embodiment.transfer import reweighted_transfer, sim_to_real
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Episode, Fault
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA, load_episodes, load_protocol_fixture

pytestmark = pytest.mark.timeout(30)

PROTOCOL = load_protocol_fixture()


def ep(i: int, side: str, task: str, ok: bool, **kw) -> Episode:
    fields = {
        "episode_id": f"e{i}-{side}",
        "pair_id": f"q{i}",
        "side": side,
        "family": task.split("/")[0],
        "task_id": task,
        "seed": i,
        "quality": 0.9 if ok else 0.1,
        "engine": "mujoco" if side == "sim" else "ros2",
    }
    fields.update(kw)
    return make_episode(**fields)


def scored(episodes: list[Episode]) -> dict[str, list[Episode]]:
    return first_scored_by_policy(group_by_policy(episodes))


# --------------------------------------------------------------------------- E


def test_embodiment_raw_is_the_geometric_mean():
    # (0.9 · 0.875 · 0.95)^(1/3) = 0.748125^(1/3) = 0.907803.
    assert embodiment_raw(0.9, 0.875, 0.95) == pytest.approx(0.907803, abs=1e-6)
    # Non-compensatory: a zero part gives zero.
    assert embodiment_raw(1.0, 0.0, 1.0) == 0.0
    # Vectorized over resamples.
    out = embodiment_raw(np.array([1.0, 0.125]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert out == pytest.approx([1.0, 0.5])


def test_embodiment_score_is_phi_of_eq_1():
    # φ(r) = clip((r − L)/(U − L), 0, 1): (0.907803 − 0.5)/0.5 = 0.815606; clipped at both ends.
    assert embodiment_score(0.907803, 0.5, 1.0) == pytest.approx(0.815606, abs=1e-6)
    assert embodiment_score(0.4, 0.5, 1.0) == 0.0
    assert embodiment_score(0.95, 0.2, 0.9) == 1.0


# --------------------------------------------------------------------------- S2R


def unpaired_case() -> tuple[list[Episode], list[Episode]]:
    # Real: task A 1/4, task B 2/2 (AR_real = 3/6 = 0.5). Sim, no pairs: A 1/2, B 4/4.
    real = [ep(i, "real", "t/A", i == 0) for i in range(4)] + [
        ep(i, "real", "t/B", True) for i in (4, 5)
    ]
    sim = [ep(10 + i, "sim", "t/A", i == 0) for i in range(2)] + [
        ep(20 + i, "sim", "t/B", True) for i in range(4)
    ]
    return sim, real


def test_s2r_reweights_sim_to_the_real_contexts_when_pairs_are_missing():
    sim, real = unpaired_case()
    t = sim_to_real([], sim, real, 0.95)
    assert t.mode == "reweighted" and "reweighted" in t.note
    # Real shares: A 4/6, B 2/6. AR_sim = 4/6·1/2 + 2/6·4/4 = 0.666667 (the raw sim rate is 5/6).
    assert t.ar_sim.value == pytest.approx(2 / 3)
    # S2R = 1 − |0.666667 − 0.5| = 0.833333.
    assert t.s2r.value == pytest.approx(5 / 6)
    # Var(AR_sim) = (4/6)²·p̃_A(1 − p̃_A)/2 + (2/6)²·p̃_B(1 − p̃_B)/4 with p̃_A = 1.5/3 = 0.5,
    # p̃_B = 4.5/5 = 0.9: 0.055556 + 0.0025 = 0.058056. Var(AR_real) = p̃(1 − p̃)/6 with
    # p̃ = 3.5/7 = 0.5: 0.041667. SE = √0.099722 = 0.315789. D = 0.166667:
    # 95 %: D ± 1.959964·0.315789 → U = 0.785603 → S2R low = 0.214397 (and high 1: 0 in [L, U]);
    # 90 %: D ± 1.644854·0.315789 → U = 0.686094 → one-sided bound 0.313906.
    assert t.s2r.low == pytest.approx(0.214397, abs=1e-5)
    assert t.s2r.high == 1.0
    assert t.bound.low == pytest.approx(0.313906, abs=1e-5)


def test_s2r_reports_a_real_context_without_sim_episodes():
    sim, real = unpaired_case()
    t = reweighted_transfer([e for e in sim if e.task_id == "t/A"], real, 0.95)
    assert t.mode == "none" and t.s2r.value is None
    assert "no sim episodes" in t.note


def test_report_says_when_sim_was_reweighted():
    eps = load_episodes("ss0")
    eps = [e for e in eps if e.episode_id != "p01-sim-a1"]  # one pair loses its sim half
    r = compute_embodiment(eps, [], [], None, PROTOCOL, rng=np.random.default_rng(5))
    assert r.transfer.mode == "reweighted"
    assert r.episodes["real_unpaired"] == 1
    assert any("reweighted" in n for n in r.notes)
    assert r.to_json()["S2R"]["mode"] == "reweighted"
    assert r.embodiment.score.low is not None


def test_pairs_must_share_task_and_seed():
    bad = [ep(1, "real", "t/A", True), ep(1, "sim", "t/B", True)]
    with pytest.raises(EvalError, match="must share task instance and seed"):
        select_episodes(bad, PROTOCOL)


# --------------------------------------------------------------------------- selection


def test_baselines_are_not_the_evaluated_policy():
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["baselines"] = {"null": "pol:null"}
    proto = protocol_from_mapping(data)
    eps = [
        ep(1, "real", "t/A", True, policy="pol:mine"),
        ep(2, "real", "t/A", False, policy="pol:null"),
    ]
    assert select_episodes(eps, proto).policy == "pol:mine"
    eps.append(ep(3, "real", "t/A", False, policy="pol:other"))
    with pytest.raises(EvalError, match="--policy"):
        select_episodes(eps, proto)
    assert select_episodes(eps, proto, "pol:other").policy == "pol:other"
    with pytest.raises(EvalError, match="no real episodes"):
        select_episodes(eps, proto, "pol:absent")


# --------------------------------------------------------------------------- faults, MTBF


def test_faults_in_episodes_and_in_the_faults_file_count_once():
    slip = Fault(kind="slip", recovered_autonomously=True, episode_id="e1-real")
    drop = Fault(kind="drop", recovered_autonomously=False, repair_s=60.0, episode_id="e1-real")
    real = ep(1, "real", "t/A", True, faults=(slip, drop))
    sets = select_episodes([real], PROTOCOL)
    stray = Fault(kind="slip", recovered_autonomously=True, episode_id="nope")
    faults, ignored = real_faults(sets, [slip, slip, stray])
    # Embedded {slip, drop} ∪ file {slip, slip} = {slip ×2, drop}; the stray names no episode.
    assert sorted(f.kind for f in faults) == ["drop", "slip", "slip"]
    assert ignored == 1


def test_mtbf_counts_only_actuation_failures_when_causes_are_recorded():
    eps = [
        ep(1, "real", "t/A", False),
        ep(2, "real", "t/A", False, control={"failure_cause": "perception"}),
        ep(3, "real", "t/A", False, control={"failure_cause": "actuation"}),
        ep(4, "real", "t/A", True),
        ep(5, "real", "t/A", False, status="aborted"),
    ]
    # Failed scored episodes: 1 (no cause: counts), 2 (perception: not), 3 (actuation: counts).
    assert actuation_failures(eps) == (2, True)
    assert actuation_failures(eps[:1]) == (1, False)


def test_mtbf_uses_the_evaluated_policys_hours_when_others_ran_on_the_robot():
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["baselines"] = {"null": "pol:null"}
    proto = protocol_from_mapping(data)
    mine = [ep(i, "real", "t/A", i < 3, policy="pol:mine", duration_s=3600.0) for i in range(4)]
    null = [
        ep(10 + i, "real", "t/A", False, policy="pol:null", duration_s=3600.0) for i in range(6)
    ]
    r = compute_embodiment(mine + null, [], [], None, proto, rng=np.random.default_rng(6))
    # H (safety) = 10 h of robot time; MTBF of the evaluated policy = 4 h / 1 failure = 4 h.
    assert r.safety.exposure_h == pytest.approx(10.0)
    assert r.mtbf.value == pytest.approx(4.0)
    assert "evaluated policy" in r.mtbf.method


def test_phys_is_undefined_with_a_free_price_card():
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["price_card"] = {"energy_per_kwh": 0.0}
    proto = protocol_from_mapping(data)
    r = compute_embodiment(load_episodes("ss0"), [], [], None, proto, rng=np.random.default_rng(7))
    assert r.phys.value.value is None and "unbounded" in r.phys.value.note
    assert r.phys.tasks_per_hour == pytest.approx(30 / 20)  # 30 successes in 20 h


# --------------------------------------------------------------------------- beyond


def test_rogan_gladen_by_hand():
    # (0.7 + 2/3 − 1)/(0.8 + 2/3 − 1) = 0.366667/0.466667 = 0.785714.
    assert rogan_gladen(0.7, 0.8, 2 / 3) == pytest.approx(0.785714, abs=1e-6)
    assert rogan_gladen(0.1, 0.9, 0.9) == 0.0  # clipped
    assert np.isnan(rogan_gladen(0.5, 0.5, 0.5))  # Se + Sp = 1: no information


def test_detector_correction_from_an_audit():
    # 10 real episodes, detector z: 7 successes. Audit: e0–e3 z=1 true (TP 4), e4 z=0 true (FN),
    # e5 z=1 false (FP), e8, e9 z=0 false (TN 2); e6, e7 unaudited.
    z = [1, 1, 1, 1, 0, 1, 1, 1, 0, 0]
    truth = [True, True, True, True, True, False, None, None, False, False]
    real = [ep(i, "real", "t/A", bool(z[i]), audited_success=truth[i]) for i in range(10)]
    d = detector_correction(real, np.random.default_rng(8), 2000, 0.95)
    assert d is not None and d.audited == 8
    # Se = 4/5 = 0.8, Sp = 2/3; AR = 0.7 → corrected 0.785714.
    assert d.sensitivity.value == pytest.approx(0.8)
    assert d.specificity.value == pytest.approx(2 / 3)
    assert d.corrected.value == pytest.approx(0.785714, abs=1e-6)
    c = d.corrected
    assert c.low is not None and c.value is not None and c.high is not None
    assert c.low <= c.value <= c.high
    assert detector_correction(real[6:8], np.random.default_rng(8), 200, 0.95) is None


def test_baseline_calibration_warns_where_null_and_expert_do_not_separate():
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["baselines"] = {"null": "pol:null", "expert": "pol:expert"}
    proto = protocol_from_mapping(data)
    eps = []
    # Family "wide": null 0/30, expert 30/30 on sim → Wilson [0, 0.1135] vs [0.8865, 1]: separate.
    for i in range(30):
        eps.append(ep(i, "sim", "wide/x", False, policy="pol:null"))
        eps.append(ep(100 + i, "sim", "wide/x", True, policy="pol:expert"))
    # Family "narrow": null 1/2, expert 2/2 on sim → intervals overlap: a warning.
    eps += [ep(200, "sim", "narrow/x", True, policy="pol:null")]
    eps += [ep(201, "sim", "narrow/x", False, policy="pol:null")]
    eps += [ep(202 + i, "sim", "narrow/x", True, policy="pol:expert") for i in range(2)]
    cal = baseline_calibration(scored(eps), proto, None, 0.95)
    assert cal is not None
    assert cal.rates["null"]["wide"]["sim"].value == 0.0
    assert cal.rates["expert"]["wide"]["sim"].value == 1.0
    assert len(cal.warnings) == 1 and "narrow" in cal.warnings[0]
    assert baseline_calibration(scored(eps), PROTOCOL, None, 0.95) is None  # no baselines declared


def test_policy_agreement_across_three_policies():
    # Sim rates 0.2, 0.5, 0.9 and real 0.1, 0.6, 0.8 (10 episodes each side): same ranking,
    # so MMRV = 0 and Spearman = 1; Pearson = 0.24/√(0.246667·0.26) = 0.947697.
    eps = []
    for p, (s, r) in enumerate([(2, 1), (5, 6), (9, 8)]):
        for i in range(10):
            eps.append(ep(1000 * p + i, "sim", "t/A", i < s, policy=f"pol:{p}"))
            eps.append(ep(1000 * p + i, "real", "t/A", i < r, policy=f"pol:{p}"))
    a = policy_agreement(scored(eps), np.random.default_rng(9), 2000, 0.95)
    assert a is not None and len(a.policies) == 3
    assert a.mmrv.value == 0.0
    assert a.spearman.value == pytest.approx(1.0)
    assert a.pearson.value == pytest.approx(0.947697, abs=1e-6)
    assert a.pearson.low is None  # Fisher-z needs ≥ 4 policies
    assert a.pearson_bootstrap.low is not None
    assert policy_agreement(scored(eps[:40]), np.random.default_rng(9), 200, 0.95) is None


def test_a_window_without_real_episodes_reports_undefined_metrics():
    sim_only = [e for e in load_episodes("ss0") if e.side == "sim"]
    r = compute_embodiment(sim_only, [], [], None, PROTOCOL, rng=np.random.default_rng(10))
    assert r.policy is None and r.ar.value is None
    assert r.transfer.mode == "none" and r.embodiment.score.value is None
    assert r.safety.exposure_h == 0.0 and r.ss.value is None
    assert any("no real episode" in n for n in r.notes)
    assert {g.verdict.value for g in r.gates.values()} <= {"evidence_missing", "fail"}
    r.to_json()
