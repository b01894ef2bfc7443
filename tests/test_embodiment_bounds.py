"""Bounds that never overclaim: AR, S2R, SS, E and PPI intervals on small or one-sided data.

Hand values (statistics notes, "Success rates" and "Event rates"):

* two-sided 95 % Clopper–Pearson of 20/20: lower (0.025)^(1/20) = exp(ln 0.025 / 20)
  = exp(−3.688879/20) = 0.831566; of 0/20: upper 1 − 0.831566 = 0.168434;
* one-sided 95 % Clopper–Pearson lower bound of 5/5: 0.05^(1/5) = exp(−2.995732/5) = 0.549280;
* one-sided 95 % Garwood upper rate for 3 events in 250 h: 3.1015 per 100 h; for 0 events in
  0.12 h: −ln 0.05 / 0.12 h = 24.964 per h = 2496.4 per 100 h.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.embodiment.reliability import clustered_success_rate
from embodied_eval.embodiment.resampling import event_rate_draws, success_rate_draws
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Episode, Incident
from embodied_eval.scoring.closures import MaintenanceAudit, maintenance_closure
from embodied_eval.scoring.gate_checks import Verdict
from embodied_eval.stats import Estimate
from tests.conftest import make_episode
from tests.test_embodiment_data import DATA

pytestmark = pytest.mark.timeout(300)

CP_LOW_20_OF_20 = 0.831566
CP_HIGH_0_OF_20 = 0.168434
CP_ONE_SIDED_5_OF_5 = 0.549280
WINDOW = "fixture-2026-11"
INSTANCES = [f"pick_place/cube_{i}" for i in range(5)] + [f"push/block_{i}" for i in range(5)]


def fixture_protocol(**embodiment: object):
    data = tomllib.loads((DATA / "embodiment_protocol.toml").read_text())
    data["embodiment"].update(embodiment)
    return protocol_from_mapping(data)


def pair(k: int, task: str, real_ok: bool, sim_ok: bool, seconds: float = 60.0) -> list[Episode]:
    """One sim/real pair on `task` (success: quality 0.9 ≥ target 0.8; failure: 0.5)."""
    common = dict(
        pair_id=f"p{k:03d}", task_id=task, family=task.split("/")[0], seed=100 + k,
        window=WINDOW, duration_s=seconds,
    )  # fmt: skip
    return [
        make_episode(
            episode_id=f"p{k:03d}-sim-a1",
            side="sim",
            engine="mujoco",
            quality=0.9 if sim_ok else 0.5,
            **common,
        ),
        make_episode(
            episode_id=f"p{k:03d}-real-a1",
            side="real",
            engine="ros2",
            quality=0.9 if real_ok else 0.5,
            **common,
        ),
    ]


def layout_episodes(
    sizes: list[int], successes: list[int], *, sim_mirrors: bool = True, seconds: float = 60.0
) -> list[Episode]:
    """Pairs on the first len(sizes) task instances: cluster c has sizes[c] pairs, the first
    successes[c] of them real successes; the sim half succeeds with its real half (mirrors) or
    always."""
    out: list[Episode] = []
    k = 0
    for c, (n_c, s_c) in enumerate(zip(sizes, successes, strict=True)):
        for j in range(n_c):
            k += 1
            ok = j < s_c
            out += pair(k, INSTANCES[c], ok, ok if sim_mirrors else True, seconds)
    return out


def report(episodes, exposure, protocol=None, incidents=(), seed=5, resamples=2000):
    return compute_embodiment(
        episodes, [], list(incidents), exposure, protocol or fixture_protocol(),
        rng=np.random.default_rng(seed), resamples=resamples,
    )  # fmt: skip


# ------------------------------------------------------------------------- exact draws


def test_success_rate_draws_are_the_clopper_pearson_distributions():
    one = np.ones((1, 1))
    low, _ = success_rate_draws(one, np.array([20.0]), np.array([20.0]), np.array([0.025]))
    assert low[0] == pytest.approx(CP_LOW_20_OF_20, abs=1e-6)
    _, high = success_rate_draws(one, np.array([0.0]), np.array([20.0]), np.array([0.975]))
    assert high[0] == pytest.approx(CP_HIGH_0_OF_20, abs=1e-6)
    low, _ = success_rate_draws(one, np.array([5.0]), np.array([5.0]), np.array([0.05]))
    assert low[0] == pytest.approx(CP_ONE_SIDED_5_OF_5, abs=1e-6)
    # 45/60 at u = 0.025 / 0.975: the notes' two-sided Clopper–Pearson [0.6214, 0.8528].
    low, high = success_rate_draws(
        np.ones((2, 1)), np.array([45.0]), np.array([60.0]), np.array([0.025, 0.975])
    )
    assert low[0] == pytest.approx(0.6214, abs=1e-4)
    assert high[1] == pytest.approx(0.8528, abs=1e-4)


def test_event_rate_draws_are_the_garwood_distributions():
    low, high = event_rate_draws(3, 250.0, np.array([0.025, 0.95, 0.975]))
    assert high[1] == pytest.approx(3.1015, abs=1e-4)  # one-sided upper, notes
    assert high[2] == pytest.approx(3.5069, abs=1e-4)  # two-sided upper, notes
    assert low[0] == pytest.approx(0.2475, abs=1e-4)  # two-sided lower, notes
    low, high = event_rate_draws(0, 0.12, np.array([0.95]))
    assert low[0] == 0.0
    assert high[0] == pytest.approx(2496.4, abs=0.1)


# ------------------------------------------------------------------------- AR


def test_all_successes_on_unequal_instances_do_not_collapse_ar():
    # 20/20 real successes on three task instances of sizes [1, 1, 18].
    rep = report(layout_episodes([1, 1, 18], [1, 1, 18]), 200.0)
    ar = rep.ar
    assert ar.value == 1.0 and ar.n == 20
    assert ar.low is not None and ar.low <= CP_LOW_20_OF_20
    assert ar.high == 1.0 and ar.low < ar.high
    assert ar.extra["exact"][0] == pytest.approx(CP_LOW_20_OF_20, abs=1e-6)
    # The gate bound stays the exact one-sided Clopper–Pearson bound 0.05^(1/20) = 0.860891.
    assert rep.ar_bound.low == pytest.approx(0.860891, abs=1e-6)


def test_all_failures_reach_the_clopper_pearson_upper_end():
    rep = report(layout_episodes([1, 1, 18], [0, 0, 0]), 200.0)
    assert rep.ar.value == 0.0
    assert rep.ar.low == 0.0 and rep.ar.high is not None
    assert rep.ar.high >= CP_HIGH_0_OF_20 - 1e-12


def test_one_instance_gives_the_exact_interval():
    # One cluster: the bootstrap is the exact construction, so the interval is Clopper–Pearson
    # 45/60 [0.6214, 0.8528] (bootstrap ends within Monte Carlo error, exact ends contained).
    est = clustered_success_rate(
        np.array([45]), np.array([60]), np.random.default_rng(1), 4000, 0.95
    )
    assert est.low is not None and est.high is not None
    assert est.low <= 0.6214 + 1e-4 and est.low == pytest.approx(0.6214, abs=0.01)
    assert est.high >= 0.8528 - 1e-4 and est.high == pytest.approx(0.8528, abs=0.01)


# ------------------------------------------------------------------------- SS and E


def test_four_trials_in_minutes_of_exposure_cannot_pass_e():
    # 4 real trials (every one a success, sim agreeing), no incident, 0.12 h of exposure.
    rep = report(layout_episodes([4], [4]), 0.12)
    ss = rep.ss
    # SS low = 1 − min(1, Σ w_x · upper_x) with the near-miss upper alone 3074 / 100 h: 0.
    assert ss.value == 1.0 and ss.low == 0.0 and ss.high == 1.0
    e_checks = {c.id: c for g in rep.gates.values() for c in g.checks}
    for key in ("aai2.e_min", "aai3.e_min", "aai4.e_min"):
        assert e_checks[key].verdict is not Verdict.PASS, key
    # Every severity's Garwood draw is a rate in the hundreds per 100 h: SS and E near 0.
    assert rep.embodiment.bound.low is not None and rep.embodiment.bound.low < 0.05
    assert rep.embodiment.score.low is not None and rep.embodiment.score.low < 0.05


def test_e_bound_never_above_the_bound_of_any_one_part():
    # One task instance, 20 agreeing pairs, no incident in 10^6 h: E_low per resample is at most
    # the AR lower-side draw, so Ê's bound ≤ (0.05^(1/20))^(1/3) = 0.860891^(1/3) = 0.951341 and
    # E = (Ê − 0.5)/0.5 ≤ 0.902682 (the fixture's anchors L = 0.5, U = 1).
    rep = report(layout_episodes([20], [20]), 1e6, resamples=4000)
    assert rep.embodiment.score.value == 1.0
    bound = rep.embodiment.bound.low
    assert bound is not None and bound <= 0.902682 + 0.01
    assert rep.embodiment.score.low is not None and rep.embodiment.score.low < 1.0


def test_concordant_pairs_leave_s2r_uncertain_in_e():
    # Same window, but AR's and SS's uncertainty removed by huge samples would leave S2R's:
    # with 20 concordant pairs the S2R draws are not all 1 (its own 95 % interval is not a point
    # either: Newcombe with Wilson bounds of 20/20, 1 − 0.1611 = 0.8389 at the low end).
    rep = report(layout_episodes([20], [20]), 1e6)
    s2r = rep.transfer.s2r
    assert s2r.value == 1.0 and s2r.low == pytest.approx(0.8389, abs=1e-4)
    assert "discordant pairs" in rep.embodiment.bound.method


# ------------------------------------------------------------------------- PPI floor


def test_ppi_below_its_floor_falls_back_to_classical_ar():
    # 5 labelled pairs, all successes: λ = 0 and zero variance would give AR_ppi [1, 1].
    rep = report(layout_episodes([5], [5]), 200.0, protocol=fixture_protocol(ar_estimator="ppi"))
    out = rep.to_json()
    ppi = out["AR_ppi"]
    assert ppi["valid"] is False and ppi["in_use"] is False
    assert ppi["pairs"] == 5 and ppi["lambda"] == 0.0
    assert any("fewer than 100" in r for r in ppi["below_floor"])
    assert any("degenerate variance" in r for r in ppi["below_floor"])
    assert (ppi["low"], ppi["high"]) != (1.0, 1.0) and ppi["low"] < 1.0
    assert "classical AR" in ppi["method"] and "validity floor" in ppi["note"]
    # The gate uses the classical one-sided Clopper–Pearson bound of 5/5.
    assert out["gate_bounds"]["AR"]["low"] == pytest.approx(CP_ONE_SIDED_5_OF_5, abs=1e-6)
    assert "Clopper" in out["gate_bounds"]["AR"]["method"]
    assert any("below its validity floor" in n for n in out["notes"])
    assert "AR_ppi" not in out["E"]["method"]


# ------------------------------------------------------------------------- closures


def _audit(baseline: Estimate, patches: int = 0) -> MaintenanceAudit:
    checkpoint = Estimate(0.5, 0.4, None, 0.95, "index", 40, "lower")
    return MaintenanceAudit(
        baseline=baseline, days=[7.0, 14.0], indices=[checkpoint, checkpoint],
        human_patches=patches, drifts=("payload",),
    )  # fmt: skip


def test_a_zero_baseline_closure_is_inconclusive_not_pass():
    # Day-0 E = 0: "index ≥ α·C₀ = 0 at every checkpoint" would hold for any index.
    result = maintenance_closure(_audit(Estimate(0.0, 0.0, 0.1, 0.95, "E")), alpha=0.8, days=14)
    assert result.verdict is Verdict.INCONCLUSIVE
    index = result.checks[0]
    assert index.verdict is Verdict.INCONCLUSIVE and "C₀ = 0" in index.detail
    # The other checks still decide: a human patch fails the closure whatever the baseline.
    patched = maintenance_closure(
        _audit(Estimate(0.0, 0.0, 0.1, 0.95, "E"), patches=1), alpha=0.8, days=14
    )
    assert patched.verdict is Verdict.FAIL


def test_an_undefined_baseline_closure_is_inconclusive():
    result = maintenance_closure(_audit(Estimate(None, None, None, 0.95, "E")), days=14)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "undefined" in result.checks[0].detail


def test_a_positive_baseline_still_decides():
    # C₀ = 0.5, α = 0.8: α·C₀ = 0.4 and both checkpoints' bounds are 0.4 → pass.
    result = maintenance_closure(_audit(Estimate(0.5, 0.45, 0.55, 0.95, "E")), alpha=0.8, days=14)
    assert result.verdict is Verdict.PASS


# ------------------------------------------------------------------------- monotonicity


def _flip_or_add(sizes: list[int], successes: list[int], where: int, add: bool):
    sizes, successes = list(sizes), list(successes)
    if add:
        sizes[where] += 1  # one more episode, a failure
    else:
        successes[where] -= 1  # a success becomes a failure
    return sizes, successes


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[int], list[int], int, bool]:
    sizes = draw(st.lists(st.integers(1, 20), min_size=1, max_size=5))
    successes = [draw(st.integers(0, n)) for n in sizes]
    add = draw(st.booleans())
    candidates = [i for i, s in enumerate(successes) if add or s > 0]
    if not candidates:
        add, candidates = True, list(range(len(sizes)))
    where = draw(st.sampled_from(candidates))
    return sizes, successes, where, add


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(), st.integers(0, 2**32 - 1))
@example(([1, 1, 18], [1, 1, 18], 2, False), 0)
@example(([1, 1, 18], [1, 1, 18], 0, False), 0)
@example(([1, 1, 18], [1, 1, 18], 2, True), 0)
@example(([18, 1, 1], [18, 1, 1], 0, False), 3)
def test_one_more_failure_never_raises_ar_bounds(layout, seed):
    sizes, successes, where, add = layout
    more_sizes, more_successes = _flip_or_add(sizes, successes, where, add)

    def ar(s: list[int], n: list[int]) -> Estimate:
        return clustered_success_rate(
            np.array(s), np.array(n), np.random.default_rng(seed), 300, 0.95
        )

    before, after = ar(successes, sizes), ar(more_successes, more_sizes)
    assert before.low is not None and after.low is not None
    assert after.low <= before.low
    assert after.high is not None and before.high is not None and after.high <= before.high
    assert before.low < before.high and after.low < after.high  # never a point


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(), st.integers(0, 2**16))
@example(([1, 1, 18], [1, 1, 18], 2, False), 0)
@example(([1, 1, 18], [1, 1, 18], 0, False), 0)
def test_one_more_failure_never_raises_e_bound(layout, seed):
    # A real failure whose sim partner failed too (the gap's discordant pairs are unchanged):
    # AR's draws can only fall, S2R's and SS's are the same, so E's bound cannot rise.
    sizes, successes, where, add = layout
    more_sizes, more_successes = _flip_or_add(sizes, successes, where, add)
    if add:
        # A new pair in an existing instance changes the pair count of the gap's draws; the
        # flip keeps it: only flips are monotone for E by construction.
        more_sizes, more_successes = (
            sizes,
            [s - 1 if i == where and s > 0 else s for i, s in enumerate(successes)],
        )
        if more_successes == successes:
            return

    def bound(n: list[int], s: list[int]) -> float:
        rep = report(layout_episodes(n, s), 5e5, seed=seed, resamples=300)
        low = rep.embodiment.bound.low
        return -1.0 if low is None else low

    assert bound(more_sizes, more_successes) <= bound(sizes, successes)


def test_one_more_incident_never_raises_e_bound():
    eps = layout_episodes([3, 3, 14], [3, 2, 14])
    real_ids = [e.episode_id for e in eps if e.side == "real"]
    minor = Incident(
        incident_id="i1", episode_id=real_ids[0], side="real", severity="minor",
        counts_toward_window=True, window=WINDOW, occurred_at="2026-11-02T10:00:00Z",
    )  # fmt: skip
    base = report(eps, 5e4).embodiment.bound.low
    more = report(eps, 5e4, incidents=[minor]).embodiment.bound.low
    two = report(eps, 5e4, incidents=[minor, replace(minor, incident_id="i2")]).embodiment.bound
    assert base is not None and more is not None and two.low is not None
    assert two.low <= more <= base
