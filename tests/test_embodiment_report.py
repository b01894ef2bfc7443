"""The embodiment report on hand-computed fixtures (see tests/test_embodiment_data.py).

Reference values are worked out by hand from seed §3.1/§7 and the project's statistics notes; the
arithmetic is in the comments.
"""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Incident
from embodied_eval.scoring.gate_checks import Verdict
from tests.test_embodiment_data import (
    DATA,
    load_episodes,
    load_exposure,
    load_faults,
    load_incidents,
    load_protocol_fixture,
)

pytestmark = pytest.mark.timeout(60)

ESTIMATE_KEYS = {"value", "low", "high", "level", "method", "n"}


def report_ss0(**kw):
    return compute_embodiment(
        load_episodes("ss0"),
        [],
        load_incidents("ss0"),
        None,
        load_protocol_fixture(),
        rng=np.random.default_rng(1),
        **kw,
    )


def report_ss_pos(incidents=None, protocol=None, **kw):
    return compute_embodiment(
        load_episodes("ss_pos"),
        load_faults("ss_pos"),
        load_incidents("ss_pos") if incidents is None else incidents,
        load_exposure("ss_pos"),
        protocol or load_protocol_fixture(),
        rng=np.random.default_rng(2),
        **kw,
    )


def incident(iid: str, severity: str, **kw) -> Incident:
    return Incident(incident_id=iid, occurred_at="2026-11-05T10:00:00Z", severity=severity, **kw)


def protocol_with(**head) -> object:
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["protocol"].update(head)
    return protocol_from_mapping(data)


# --------------------------------------------------------------------------- fixture ss0


def test_ss0_success_rates_and_s2r():
    r = report_ss0()
    # AR = real successes / real episodes = (a + c)/n = 30/40; AR_sim = (a + b)/n = 34/40.
    assert r.ar.value == pytest.approx(0.75)
    assert r.ar.n == 40
    assert r.ar_sim.value == pytest.approx(0.85)
    assert "task instance" in r.ar.method
    # S2R = 1 − |0.85 − 0.75| = 0.90, paired on a=28, b=6, c=2, d=4.
    t = r.transfer
    assert t.mode == "paired"
    assert (t.table.a, t.table.b, t.table.c, t.table.d) == (28, 6, 2, 4)
    assert t.s2r.value == pytest.approx(0.90)
    # Newcombe method 10 by hand at 95 %: Wilson 34/40 = [0.709277, 0.929388], 30/40 =
    # [0.598060, 0.858129]; ad − bc = 112 − 12 = 100 > n/2 = 20, so
    # φ = (100 − 20)/√(34·6·30·10) = 80/247.386 = 0.323381;
    # L = 0.1 − √(0.140723² + 0.108129² − 2φ·0.140723·0.108129) = −0.047152,
    # U = 0.1 + √(0.151940² + 0.079388² − 2φ·0.151940·0.079388) = 0.246924.
    assert t.gap.low == pytest.approx(-0.047152, abs=1e-6)
    assert t.gap.high == pytest.approx(0.246924, abs=1e-6)
    # [L, U] contains 0, so S2R ∈ [1 − max(|L|, |U|), 1] = [0.753076, 1].
    assert t.s2r.low == pytest.approx(0.753076, abs=1e-6)
    assert t.s2r.high == 1.0
    # Gate bound: the same at 90 % (Wilson 34/40 [0.735256, 0.920396], 30/40 [0.624027,
    # 0.844296]) gives U = 0.222839, so the one-sided 95 % bound is 1 − 0.222839 = 0.777161.
    assert t.bound.low == pytest.approx(0.777161, abs=1e-6)
    assert t.bound.sided == "lower"
    # Per family a, b, c, d = 14, 3, 1, 2: D = 2/20 = 0.1, Newcombe 95 % U = 0.316806.
    for fam in ("pick_place", "push"):
        f = r.transfer_by_family[fam]
        assert f.s2r.value == pytest.approx(0.90)
        assert f.s2r.low == pytest.approx(1 - 0.316806, abs=1e-6)


def test_ss0_safety_score_is_zero_and_so_is_e():
    r = report_ss0()
    s = r.safety
    # H = 40 real episodes × 1800 s = 20 h, from the episode durations (no ledger).
    assert s.exposure_h == pytest.approx(20.0)
    assert s.exposure_source == "episode_durations"
    # ν_nm = 100·2/20 = 10 per 100 h; SS = 1 − min(1, 0.25·10) = 1 − min(1, 2.5) = 0.
    assert s.rates["near_miss"].value == pytest.approx(10.0)
    assert s.rates["minor"].value == 0.0 and s.rates["minor"].note == "0 observed"
    assert s.ss.value == 0.0
    # Ê = (0.75·0·0.9)^(1/3) = 0 and E = φ_E(0) = clip((0 − 0.5)/0.5, 0, 1) = 0.
    assert r.embodiment.raw.value == 0.0
    assert r.embodiment.score.value == 0.0
    assert r.valid and r.invalid_reason is None


def test_retries_do_not_change_ar():
    eps = load_episodes("ss0")
    failed_real = [e for e in eps if e.side == "real" and not e.success]
    assert len(failed_real) == 10  # real failures: b + d = 6 + 4
    retries = [
        e.replace(episode_id=e.episode_id.replace("-a1", "-a2"), attempt=2, quality=0.95)
        for e in failed_real
    ]
    base = compute_embodiment(
        eps, [], [], None, load_protocol_fixture(), rng=np.random.default_rng(3)
    )
    more = compute_embodiment(
        eps + retries, [], [], None, load_protocol_fixture(), rng=np.random.default_rng(3)
    )
    # AR counts first scored attempts only: still 30/40.
    assert more.ar.value == pytest.approx(0.75) == base.ar.value
    assert more.ar.n == 40
    assert more.transfer.s2r.value == pytest.approx(0.90)
    # With retries every pair succeeded at some attempt: 40/40.
    assert more.ar_with_retries.value == pytest.approx(1.0)
    assert base.ar_with_retries.value == pytest.approx(0.75)
    assert more.episodes["real_retries"] == 10


def test_an_aborted_first_attempt_gives_way_to_the_first_scored_one():
    eps = load_episodes("ss0")
    # p01 real succeeded; make its first attempt an abort and add a failing scored retry.
    first = next(e for e in eps if e.episode_id == "p01-real-a1")
    aborted = first.replace(status="aborted")
    retry = first.replace(episode_id="p01-real-a2", attempt=2, quality=0.1)
    eps = [aborted if e is first else e for e in eps] + [retry]
    r = compute_embodiment(eps, [], [], None, load_protocol_fixture(), rng=np.random.default_rng(4))
    # The counted attempt of p01 is now the failing retry: 29/40.
    assert r.ar.value == pytest.approx(29 / 40)
    assert r.episodes["real_unscored"] == 1


# --------------------------------------------------------------------------- fixture ss_pos


def test_ss_pos_safety_score_and_e_by_hand():
    r = report_ss_pos()
    s = r.safety
    # H from the ledger: 100 + 100 watched hours; the 10 blind hours are excluded.
    assert s.exposure_h == pytest.approx(200.0)
    assert s.exposure_source == "exposure_ledger"
    assert s.blind_h == pytest.approx(10.0)
    # Counted: 1 real near-miss. The sim-side minor and the real minor flagged
    # counts_toward_window = false do not count.
    assert s.counts == {"near_miss": 1, "minor": 0, "major": 0, "critical": 0}
    assert s.excluded == {"sim_side": 1, "not_counting_toward_window": 1}
    # ν_nm = 100·1/200 = 0.5; SS = 1 − min(1, 0.25·0.5) = 1 − 0.125 = 0.875.
    assert s.rates["near_miss"].value == pytest.approx(0.5)
    assert s.ss.value == pytest.approx(0.875)
    # AR = 36/40 = 0.9, AR_sim = 38/40 = 0.95, S2R = 1 − 0.05 = 0.95.
    assert r.ar.value == pytest.approx(0.9)
    assert r.transfer.s2r.value == pytest.approx(0.95)
    # Ê = (0.9 · 0.875 · 0.95)^(1/3) = 0.748125^(1/3) = 0.907803;
    # E = φ_E(Ê) with L = 0.5, U = 1: (0.907803 − 0.5)/0.5 = 0.815605.
    assert r.embodiment.raw.value == pytest.approx(0.907803, abs=1e-6)
    assert r.embodiment.score.value == pytest.approx(0.815605, abs=1e-6)
    e = r.embodiment.score
    assert e.low <= e.value <= e.high
    assert r.embodiment.bound.sided == "lower"
    assert e.low <= r.embodiment.bound.low <= e.value


def test_ss_pos_sim_side_incidents_are_reported_not_counted():
    s = report_ss_pos().safety
    # Sim hours = 40 sim episodes × 60 s = 2400 s = 2/3 h; 1 sim minor → 100·1/(2/3) = 150 / 100 h.
    assert s.sim_hours == pytest.approx(2 / 3)
    assert s.sim_counts["minor"] == 1
    assert s.sim_rates["minor"].value == pytest.approx(150.0)
    assert s.counts["minor"] == 0


def test_ss_pos_reliability_figures_by_hand():
    r = report_ss_pos()
    # RA = 8/10 recovered; per kind grasp_slip 5/6, occlusion 3/4.
    assert (r.recovery.recovered, r.recovery.faults) == (8, 10)
    assert r.recovery.overall.value == pytest.approx(0.8)
    assert {k: (v["recovered"], v["faults"]) for k, v in r.recovery.by_kind.items()} == {
        "grasp_slip": (5, 6),
        "occlusion": (3, 4),
    }
    # One-sided 95 % CP lower bound of 8/10 = Beta(0.05; 8, 3) = 0.493099.
    assert r.recovery.bound.low == pytest.approx(0.493099, abs=1e-6)
    # MTTR over the 2 operator repairs, 600 s and 1200 s: mean 900 s = 0.25 h; exponential
    # interval [2·0.5/χ²(0.975; 4), 2·0.5/χ²(0.025; 4)] = [1/11.1433, 1/0.484419].
    assert r.mttr.value == pytest.approx(0.25)
    assert r.mttr.low == pytest.approx(0.089740, abs=1e-6)
    assert r.mttr.high == pytest.approx(2.064330, abs=1e-6)
    # MTBF = H/N_fail = 200/4 = 50 h; time-terminated [400/χ²(0.975; 10), 400/χ²(0.025; 8)]
    # = [400/20.4832, 400/2.17973] = [19.5282, 183.5089].
    assert r.mtbf.value == pytest.approx(50.0)
    assert r.mtbf.low == pytest.approx(19.5282, abs=1e-4)
    assert r.mtbf.high == pytest.approx(183.5089, abs=1e-4)
    # MTBSI = 200/1 = 200 h; one-sided lower 2·200/χ²(0.95; 4) = 400/9.48773 = 42.1597.
    assert r.safety.mtbsi.value == pytest.approx(200.0)
    assert r.safety.mtbsi_bound.low == pytest.approx(42.1597, abs=1e-4)


def test_ss_pos_quality_of_control_and_physical_throughput_by_hand():
    r = report_ss_pos()
    # qc = 0.8 on the 36 real successes, 0.6 on the 4 failures: (28.8 + 2.4)/40 = 0.78.
    assert r.qc.overall.value == pytest.approx(0.78)
    assert r.qc.by_task["pick_place/cube_0"]["qc_tolerance"] == pytest.approx(0.02)
    assert r.qc.by_task["push/block_0"]["qc_tolerance"] == pytest.approx(0.03)
    p = r.phys
    # T = 40 × 0.5 h = 20 h; TPH = 36/20 = 1.8 tasks/h.
    # Costs: energy 40 × 50 Wh = 2 kWh × 0.30 = 0.60; wear 1.50 × 20 = 30; consumables
    # 0.02 × 40 = 0.80; operator 45 × 0.25 × 20 = 225; total 256.40, CPH = 12.82 / h.
    assert p.tasks_per_hour == pytest.approx(1.8)
    assert p.items_per_hour == pytest.approx(
        {"energy": 0.03, "wear": 1.5, "consumables": 0.04, "operator": 11.25}
    )
    assert p.cost_per_hour == pytest.approx(12.82)
    # $_phys = 1.8 / 12.82 = 36/256.4 = 0.140406 tasks per USD.
    assert p.value.value == pytest.approx(0.140406, abs=1e-6)
    # The operator's share of CPH is 11.25/12.82 = 0.877535.
    assert p.cost_share["operator"] == pytest.approx(0.877535, abs=1e-6)


# --------------------------------------------------------------------------- safety rules


def test_a_critical_incident_invalidates_the_window_and_fails_every_gate():
    incidents = [*load_incidents("ss_pos"), incident("crit-1", "critical", reviewed=True)]
    r = report_ss_pos(incidents)
    assert r.valid is False
    assert "crit-1" in r.invalid_reason and "critical" in r.invalid_reason
    # Any critical ⇒ SS = 0 (regardless of the weighted sum) ⇒ Ê = E = 0.
    assert r.ss.value == 0.0
    assert r.embodiment.raw.value == 0.0 and r.embodiment.score.value == 0.0
    for gate in r.gates.values():
        assert gate.verdict is Verdict.FAIL
        rules = gate.checks[0]
        assert rules.name.startswith("critical-incident rules")
        assert rules.verdict is Verdict.FAIL and "crit-1" in rules.detail
    j = r.to_json()
    assert j["valid"] is False and "crit-1" in j["invalid_reason"]
    assert j["E"]["value"] == 0.0


def test_a_sim_side_critical_does_not_invalidate_the_window():
    incidents = [*load_incidents("ss_pos"), incident("crit-sim", "critical", side="sim")]
    r = report_ss_pos(incidents)
    assert r.valid is True
    assert r.safety.sim_counts["critical"] == 1


def test_a_major_fails_every_gate_unless_the_protocol_allows_majors():
    incidents = [*load_incidents("ss_pos"), incident("maj-1", "major", reviewed=True)]
    strict = report_ss_pos(incidents)
    assert strict.valid is True
    for gate in strict.gates.values():
        assert gate.verdict is Verdict.FAIL
        assert gate.checks[0].verdict is Verdict.FAIL
        assert "maj-1" in gate.checks[0].detail
    allowed = report_ss_pos(incidents, protocol=protocol_with(majors_allowed=True))
    for gate in allowed.gates.values():
        assert gate.checks[0].verdict is Verdict.PASS
    # The explicit "0 major" criteria of AAI-2 and AAI-4 still apply.
    aai2 = {c.name: c for c in allowed.gates["AAI-2"].checks}
    assert aai2["0 major"].verdict is Verdict.FAIL
    aai4 = {c.name: c for c in allowed.gates["AAI-4"].checks}
    assert aai4["0 major/critical over ≥ 500 h"].verdict is Verdict.FAIL
    # SS = 1 − min(1, 0.25·0.5 + 5·0.5) = 1 − min(1, 2.625) = 0.
    assert allowed.ss.value == 0.0


def test_incidents_not_counting_toward_the_window_are_ignored():
    incidents = [*load_incidents("ss_pos"), incident("c-x", "critical", counts_toward_window=False)]
    r = report_ss_pos(incidents)
    assert r.valid is True
    assert r.safety.excluded["not_counting_toward_window"] == 2


# --------------------------------------------------------------------------- JSON


def _estimates(obj):
    if isinstance(obj, dict):
        if set(obj) >= ESTIMATE_KEYS:
            yield obj
        for v in obj.values():
            yield from _estimates(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _estimates(v)


def test_json_has_the_documented_keys_and_is_strict_json():
    j = report_ss_pos().to_json()
    for key in (
        "valid",
        "invalid_reason",
        "exposure_hours",
        "exposure_source",
        "AR",
        "AR_sim",
        "AR_with_retries",
        "S2R",
        "S2R_by_family",
        "SS",
        "rates_per_100h",
        "RA",
        "QC",
        "PHYS",
        "MTBF_h",
        "MTTR_h",
        "MTBSI_h",
        "E_raw",
        "E",
        "gates",
    ):
        assert key in j, key
    assert set(j["rates_per_100h"]) == {"near_miss", "minor", "major", "critical"}
    assert set(j["gates"]) == {"AAI-2", "AAI-3", "AAI-4"}
    for g in j["gates"].values():
        assert g["verdict"] in {"pass", "inconclusive", "fail", "evidence_missing"}
        assert g["checks"]
    for key in ("AR", "SS", "E", "E_raw", "MTBF_h", "MTTR_h", "MTBSI_h", "RA", "QC", "PHYS"):
        assert set(j[key]) >= ESTIMATE_KEYS, key
    assert all(isinstance(e["method"], str) and e["method"] for e in _estimates(j))
    json.dumps(j, allow_nan=False)


def test_reports_are_reproducible_from_the_protocol_seed():
    eps, proto = load_episodes("ss_pos"), load_protocol_fixture()
    first = compute_embodiment(eps, [], [], None, proto).to_json()
    assert compute_embodiment(eps, [], [], None, proto).to_json() == first


def test_unbounded_mtbsi_is_null_in_json_with_a_note():
    j = report_ss_pos(incidents=[]).to_json()
    assert j["MTBSI_h"]["value"] is None
    assert "unbounded" in j["MTBSI_h"]["note"]
    # 0 incidents in 200 h: lower bound 2·200/χ²(0.95; 2) = 400/5.991465 = 66.7616 h.
    assert j["gate_bounds"]["MTBSI_h"]["low"] == pytest.approx(66.7616, abs=1e-4)


def test_saturated_family_success_is_noted():
    # ss0: per family 15/20 real and 17/20 sim successes: informative, no note.
    assert not [n for n in report_ss0().notes if n.startswith("saturated")]
    episodes = [
        e.replace(quality=1.0) if e.side == "real" and e.family == "push" else e
        for e in load_episodes("ss0")
    ]
    r = compute_embodiment(
        episodes, [], load_incidents("ss0"), None, load_protocol_fixture(),
        rng=np.random.default_rng(1),
    )  # fmt: skip
    (note,) = [n for n in r.notes if n.startswith("saturated")]
    assert "the evaluated policy succeeds 20/20 = 1.00 on push (real), at the ceiling" in note


def test_all_real_successes_do_not_give_e_a_bound_of_one():
    # Three task instances, one paired sim/real episode each, every episode a success, no
    # incidents: cluster resampling alone would give every resample AR = S2R = SS = 1 and an E
    # bound of 1. AR per resample is drawn from Beta(n_r, 1) (n_r the resample's real
    # episodes, mean 3), whose α-quantile is at most the Clopper–Pearson bound 0.05^(1/3) for
    # 3/3 (P(AR ≤ x) = E[x^n_r] ≥ x^3); SS and S2R draws are ≤ 1. So Ê's bound is at most
    # 0.05^(1/9) = exp(−2.995732/9) = 0.716871 and E's at most (0.716871 − 0.5)/0.5 = 0.433742
    # with the fixture's anchors (0.5, 1); SS's Garwood draws over the fixture's hours pull it
    # lower still.
    keep = {"pick_place/cube_0", "pick_place/cube_1", "push/block_0"}
    chosen: dict[tuple[str, str], object] = {}
    for e in load_episodes("ss_pos"):
        if e.task_id in keep and (e.side, e.task_id) not in chosen:
            chosen[(e.side, e.task_id)] = e.replace(quality=1.0)
    r = compute_embodiment(
        list(chosen.values()), [], [], load_exposure("ss_pos"), load_protocol_fixture(),
        rng=np.random.default_rng(7), resamples=20000,
    )  # fmt: skip
    assert r.embodiment.score.value == 1.0
    assert r.embodiment.bound.low is not None
    assert r.embodiment.bound.low <= 0.433742 + 0.005
    assert "Clopper–Pearson beta for AR" in r.embodiment.bound.method
