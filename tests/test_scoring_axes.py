"""Axis functionals of the AAI scoring core (eqs. (1)–(11), S, E, W), pinned by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import (
    autonomy,
    autonomy_statistic,
    economic_throughput,
    embodiment,
    generality,
    generality_statistic,
    planning,
    planning_statistic,
)
from embodied_eval.scoring.calibration import Anchors, axis_from_raw, calibrate, calibrate_estimate
from embodied_eval.scoring.memory import (
    RetentionFamily,
    empirical_half_life,
    exponential_forgetting_rate,
    memory,
    memory_statistic,
    recall_at_k,
    retention_score,
)
from embodied_eval.scoring.revision import (
    RevisionEvent,
    difference_in_differences,
    self_revision,
    stage_autonomy,
)
from embodied_eval.scoring.sociality import (
    Turn,
    coordination_lift,
    deadlock_penalty,
    episode_indicators,
    mean_coordination_lift,
    sociality,
)
from embodied_eval.scoring.tool_economy import (
    drifted_success,
    tool_coverage,
    tool_economy,
    tool_size_prior,
)
from embodied_eval.scoring.world_model import (
    brier_score,
    stated_probability,
    world_model,
    world_model_statistic,
)
from embodied_eval.stats.estimate import Estimate

pytestmark = pytest.mark.timeout(60)


# --- eq. (1) calibration ----------------------------------------------------------------------


def test_calibration_maps_anchors_and_clips():
    # φ(0.5; L=0.2, U=0.9) = (0.5 − 0.2)/(0.9 − 0.2) = 0.3/0.7 = 0.428571
    assert calibrate(0.5, 0.2, 0.9) == pytest.approx(0.3 / 0.7)
    assert calibrate(0.1, 0.2, 0.9) == 0.0  # below L clips to 0
    assert calibrate(1.5, 0.2, 0.9) == 1.0  # above U clips to 1
    np.testing.assert_allclose(calibrate([0.2, 0.55, 0.9], 0.2, 0.9), [0.0, 0.5, 1.0])
    with pytest.raises(EvalError):
        calibrate(0.5, 0.9, 0.2)


def test_calibrated_estimate_keeps_raw_and_maps_bounds():
    raw = Estimate(0.5, 0.4, 0.6, 0.95, "bootstrap", 50)
    score = axis_from_raw("G", raw, Anchors(0.2, 0.9))
    assert score.raw is raw  # x̂ kept before φ
    # bounds: (0.4 − 0.2)/0.7 = 0.285714, (0.6 − 0.2)/0.7 = 0.571429
    assert score.value.low == pytest.approx(0.2 / 0.7)
    assert score.value.high == pytest.approx(0.4 / 0.7)
    assert (
        calibrate_estimate(
            Estimate(0.5, 0.1, math.inf, 0.95, "x", sided="lower"), Anchors(0.2, 0.9)
        ).high
        == 1.0
    )
    js = score.to_json()
    assert js["raw"] == 0.5 and js["value"] == pytest.approx(0.3 / 0.7)
    assert js["anchors"]["L"] == 0.2 and js["raw_interval"]["low"] == 0.4


# --- A, G, P ----------------------------------------------------------------------------------


def test_autonomy_caps_at_horizon():
    # min(a/H, 1) with H = 50: 10 → 0.2, 25 → 0.5, 60 → 1 (capped), 0 → 0; mean = 1.7/4 = 0.425
    assert autonomy_statistic([10, 25, 60, 0], 50) == pytest.approx(0.425)
    s = autonomy([10, 25, 60, 0], horizon=50, anchors=Anchors(0.1, 0.6), interventions=[0, 1, 0, 0])
    # φ = (0.425 − 0.1)/(0.6 − 0.1) = 0.65
    assert s.x == pytest.approx(0.65)
    assert s.raw is not None and s.raw.value == pytest.approx(0.425)
    assert s.breakdown["fraction_at_horizon"] == 0.25
    assert s.breakdown["fraction_without_intervention"] == 0.75


def test_autonomy_bootstrap_is_seeded_and_brackets_the_point():
    a = [10, 25, 60, 0, 40, 50, 5, 33]
    s1 = autonomy(a, horizon=50, rng=np.random.default_rng(7), n_resamples=500)
    s2 = autonomy(a, horizon=50, rng=np.random.default_rng(7), n_resamples=500)
    assert s1.value == s2.value
    assert s1.value.low <= s1.x <= s1.value.high
    assert s1.replicates is not None and s1.replicates.shape == (500,)


def test_autonomy_accepts_a_precomputed_raw_statistic():
    s = autonomy(raw=Estimate(0.7, 0.6, 0.8, 0.95, "reported"), anchors=Anchors(0.5, 1.0))
    # (0.7 − 0.5)/0.5 = 0.4, bounds (0.6 − 0.5)/0.5 = 0.2 and (0.8 − 0.5)/0.5 = 0.6
    assert (s.x, s.value.low, s.value.high) == pytest.approx((0.4, 0.2, 0.6))


def test_generality_counts_covered_families_with_breakdown():
    q = [0.8, 0.6, 0.3, 0.5, 0.9]
    fam = ["f1", "f1", "f2", "f2", "f3"]
    # means: f1 0.7 ≥ 0.6 yes, f2 0.4 < 0.6 no, f3 0.9 ≥ 0.6 yes → Ĝ = 2/3
    assert generality_statistic(q, fam, 0.6) == pytest.approx(2 / 3)
    # per-family τ: f2 at τ = 0.4 is covered (0.4 ≥ 0.4) → Ĝ = 1
    assert generality_statistic(q, fam, {"f1": 0.6, "f2": 0.4, "f3": 0.95}) == pytest.approx(2 / 3)
    assert generality_statistic(q, fam, {"f1": 0.6, "f2": 0.4, "f3": 0.6}) == 1.0
    s = generality(q, fam, thresholds=0.6, rng=np.random.default_rng(1), n_resamples=300)
    assert s.breakdown["families"]["f2"] == {
        "n": 2,
        "mean_quality": pytest.approx(0.4),
        "threshold": 0.6,
        "covered": False,
        "admissible": False,
    }
    assert "m_min" in s.breakdown["note"]
    assert 0.0 <= s.value.low <= s.x <= s.value.high <= 1.0
    with pytest.raises(EvalError, match="f3"):
        generality_statistic(q, fam, {"f1": 0.6, "f2": 0.4})


def test_planning_depth_anchor():
    # min(d/D, 1) with D = 4: 1 → 0.25, 3 → 0.75, 6 → 1; mean = 2/3
    assert planning_statistic([1, 3, 6], 4) == pytest.approx(2 / 3)
    s = planning([1, 3, 6], depth_anchor=4)
    assert s.breakdown["depth_distribution"] == {"1": 1, "3": 1, "6": 1}


# --- M ----------------------------------------------------------------------------------------


def test_retention_score_at_seed_reference_points():
    t_min = 7.0
    # t½ = t_min: λ = ln2/7 = λ_max → M̂₁ = e^(−1) ≈ 0.37 (§3.1 M)
    assert retention_score(math.log(2) / t_min, t_min) == pytest.approx(math.exp(-1))
    assert round(retention_score(math.log(2) / t_min, t_min), 2) == 0.37
    # t½ = 2 t_min: λ = λ_max/2 → e^(−1/2) ≈ 0.61
    assert round(retention_score(math.log(2) / (2 * t_min), t_min), 2) == 0.61
    assert retention_score(0.0, t_min) == 1.0  # no forgetting


def test_exponential_fit_and_half_life():
    # q = 0.8·2^(−Δ/7): λ = ln2/7 exactly, q₀ = 0.8
    q0, lam = exponential_forgetting_rate([0, 7, 14], [0.8, 0.4, 0.2])
    assert q0 == pytest.approx(0.8) and lam == pytest.approx(math.log(2) / 7)
    # q₀/2 = 0.4: first lag with q ≤ 0.4 is 14
    assert empirical_half_life([0, 7, 14], [0.8, 0.5, 0.4]) == (14.0, False)
    # never halves: censored at the longest lag
    assert empirical_half_life([0, 7, 14], [0.8, 0.7, 0.6]) == (14.0, True)


def test_memory_axis_median_across_families():
    # recall@2: query 1 {a, b} ∩ {a, c} = 1 of 2 → 0.5; query 2 {x, y} ∩ {z} = 0 → mean 0.25
    assert recall_at_k([["a", "b", "c"], ["x", "y"]], [["a", "c"], ["z"]], k=2) == 0.25
    # family "fit": λ = ln2/7 with t_min = 7 → M̂₁ = e^(−1); M̂ = (0.367879 + 0.9)/2 = 0.633940
    fams = {
        "docs": RetentionFamily([0, 7, 14], [0.8, 0.4, 0.2], recall=0.9),
        "api": RetentionFamily([0, 14, 28], [0.8, 0.4, 0.2], recall=0.5),  # t½ 14 → e^(−1/2)
        "ops": RetentionFamily([0, 3.5, 7], [0.8, 0.4, 0.2], recall=0.1),  # t½ 3.5 → e^(−2)
    }
    s = memory(fams, min_half_life=7)
    per = s.breakdown["families"]
    assert per["docs"]["memory"] == pytest.approx(0.633940, abs=1e-6)
    # api: (0.606531 + 0.5)/2 = 0.553265; ops: (0.135335 + 0.1)/2 = 0.117668 → median 0.553265
    assert s.x == pytest.approx((math.exp(-0.5) + 0.5) / 2)
    assert s.breakdown["persistence_days"] == 28.0
    assert memory_statistic(1.0, 0.0) == 0.5


# --- T ----------------------------------------------------------------------------------------


def test_tool_economy_eqs_7_to_9():
    required = ["api", "db", "browser", "ide"]
    used = ["api", "db", "browser", "shell"]
    assert tool_coverage(used, required) == 0.75  # 3 of 4 required categories used
    # z = 1{q ≥ 0.6}: [1, 1, 0, 1, 0] → succ = 3/5 pooled; δ = 0.1: 2/3, δ = 0.3: 1/2
    q, d = [0.9, 0.7, 0.4, 0.8, 0.2], [0.1, 0.1, 0.1, 0.3, 0.3]
    assert drifted_success(q, 0.6) == 0.6
    # S = ln(1 + 4)/ln(1 + 15) = 1.609438/2.772589 = 0.580482
    assert tool_size_prior(4, 15) == pytest.approx(0.580482, abs=1e-6)
    assert tool_size_prior(40, 15) == 1.0
    s = tool_economy(used=used, required=required, qualities=q, targets=0.6, drifts=d, s_max=15)
    # T̂ = (0.75 · 0.6 · 0.580482)^(1/3) = 0.261217^(1/3) = 0.639245
    assert s.x == pytest.approx(0.639245, abs=1e-6)
    curve = s.breakdown["success_by_drift"]
    assert curve["0.1"] == {"success": pytest.approx(2 / 3), "n": 3}
    assert curve["0.3"] == {"success": 0.5, "n": 2}
    at = tool_economy(
        used=used, required=required, qualities=q, targets=0.6, drifts=d, s_max=15, at_drift=0.3
    )
    # (0.75 · 0.5 · 0.580482)^(1/3) = 0.217681^(1/3) = 0.601551
    assert at.x == pytest.approx((0.75 * 0.5 * 0.580482) ** (1 / 3), abs=1e-6)


# --- R ----------------------------------------------------------------------------------------


def test_revision_event_from_the_seed_example():
    # VRP@K 0.78 → 0.84, frozen control 0.78 → 0.80: ΔC = (0.84 − 0.78) − (0.80 − 0.78) = 0.04
    assert difference_in_differences(0.84, 0.78, 0.80, 0.78) == pytest.approx(0.04)
    ok = dict(matched_holdout=True, resource_parity=True, artifacts_logged=True)
    ev = RevisionEvent("indexer", 0.78, 0.84, 0.78, 0.80, autonomy=0.9, **ok)
    s = self_revision([ev], scale=0.10)
    row = s.breakdown["events"][0]
    assert row["delta"] == pytest.approx(0.04)
    assert row["contribution"] == pytest.approx(0.036)  # 0.9 × 0.04
    assert s.x == pytest.approx(0.36)  # 0.036 / Z with Z = 0.10


def test_revision_filters_and_stage_autonomy():
    # ρ = (1 + 0.8 + 0.9)/3 = 0.9
    assert stage_autonomy(1.0, 0.8, 0.9) == pytest.approx(0.9)
    ok = dict(matched_holdout=True, resource_parity=True, artifacts_logged=True)
    good = RevisionEvent("a", 0.5, 0.6, 0.5, 0.5, stages=(1.0, 0.8, 0.9), **ok)  # ΔC 0.1
    labelled = RevisionEvent("b", 0.5, 0.9, 0.5, 0.5, autonomy=1.0, human_labels=True, **ok)
    unlogged = RevisionEvent("c", 0.5, 0.9, 0.5, 0.5, autonomy=1.0)
    negative = RevisionEvent("d", 0.6, 0.5, 0.5, 0.5, autonomy=1.0, **ok)  # ΔC −0.1 → 0
    s = self_revision([good, labelled, unlogged, negative], scale=0.5)
    # only a and d count: (0.9 · 0.1 + 1 · 0) / 0.5 = 0.18
    assert s.x == pytest.approx(0.18)
    rows = {r["name"]: r for r in s.breakdown["events"]}
    assert rows["b"]["excluded_because"] == ["disqualifying human labels"]
    assert not rows["c"]["included"]
    # clip at 1: 0.9 · 0.1 / 0.05 = 1.8 → 1
    assert self_revision([good], scale=0.05).x == 1.0


# --- S ----------------------------------------------------------------------------------------


def test_sociality_lift_and_penalty_defaults():
    # t1: (0.7 − 0.5)/(1 − 0.5) = 0.4; t2: (0.7 − 0.8)/(0.2) < 0 → 0; s̄ = 0.2
    assert coordination_lift(0.5, 0.7) == pytest.approx(0.4)
    caps = {"t1": {1: 0.5, 2: 0.7, 3: 0.6}, "t2": {1: 0.8, 2: 0.7}}
    lift, per = mean_coordination_lift(caps)
    assert lift == pytest.approx(0.2) and per["t2"] == 0.0
    d, lp, c, m = [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 1]
    # π_conflict = mean 1{D ∨ L} = 0.25; π = 0.25 + 0.25·0.5 + 0.25·0.25 = 0.4375
    assert deadlock_penalty(d, lp, c, m) == pytest.approx(0.4375)
    eps = [dict(D=a, L=b, C=x, M=y) for a, b, x, y in zip(d, lp, c, m, strict=True)]
    s = sociality(caps, eps)
    assert s.x == pytest.approx(0.2 * (1 - 0.4375))  # 0.1125


def test_episode_indicators_from_turns():
    stalled = [
        Turn(True, "call:a", 10),
        Turn(False, "msg:x", 30),
        Turn(False, "msg:x", 30),
        Turn(False, "msg:x", 30),
    ]
    # three turns without a new verified action (L = 3) and three identical stalled turns (K = 3);
    # 100 tokens over 1 verified action > τ_comm = 50
    assert episode_indicators(stalled, conflict=False, chatter_threshold=50) == {
        "D": False,
        "L": True,
        "C": True,
        "M": True,
    }
    # a repeated tool-call cycle is no progress: a, b, a, b → only the first two are new
    cycle = [Turn(True, "a"), Turn(True, "b"), Turn(True, "a"), Turn(True, "b"), Turn(True, "a")]
    flags = episode_indicators(cycle, conflict=True, chatter_threshold=50)
    assert flags["L"] and not flags["M"] and flags["D"] and not flags["C"]
    fine = [Turn(True, "a", 5), Turn(False, "m", 5), Turn(True, "b", 5)]
    assert episode_indicators(fine, conflict=False, chatter_threshold=50) == {
        "D": False,
        "L": False,
        "C": False,
        "M": False,
    }


# --- W, $, E ----------------------------------------------------------------------------------


def test_world_model_brier_against_reference():
    p, y = [0.9, 0.2, 0.7, 0.4], [1, 0, 1, 0]
    # Brier = (0.01 + 0.04 + 0.09 + 0.16)/4 = 0.075; reference 0.5 → 0.25; Ŵ = 1 − 0.3 = 0.7
    assert brier_score(p, y) == pytest.approx(0.075)
    s = world_model(p, y, 0.5)
    assert s.x == pytest.approx(0.7)
    assert world_model_statistic(0.3, 0.25) == 0.0  # worse than the reference clips to 0
    assert world_model_statistic(0.0, 0.0) == 1.0  # ε guard: 0/ε = 0
    assert stated_probability(odds=3.0) == 0.75
    assert stated_probability(interval=(0.6, 0.8)) == pytest.approx(0.7)
    assert stated_probability(1.2) == 1.0
    boot = world_model(p * 3, y * 3, 0.5, rng=np.random.default_rng(3), n_resamples=400)
    assert boot.value.low <= boot.x <= boot.value.high


def test_economic_throughput_eq_11():
    # 3 of 4 runs reach Q* = 0.7 in 2 h at 8 USD: TPH 1.5/h, CPH 4 USD/h → $̂ = 0.375 tasks/USD
    s = economic_throughput(
        qualities=[0.9, 0.5, 0.8, 0.95],
        targets=0.7,
        durations_h=[0.5] * 4,
        costs=[2.0] * 4,
        anchors=Anchors(0.1, 0.6),
    )
    assert s.raw.value == pytest.approx(0.375)
    assert s.x == pytest.approx(0.55)  # (0.375 − 0.1)/0.5
    assert s.breakdown["tasks_per_hour"] == 1.5 and s.breakdown["cost_per_hour"] == 4.0


def test_embodiment_from_report():
    # Ê = 0.81 with anchors (0.5, 1.0): (0.81 − 0.5)/0.5 = 0.62
    e = embodiment(
        raw=Estimate(0.81, 0.75, 0.86, 0.95, "cluster bootstrap"), anchors=Anchors(0.5, 1.0)
    )
    assert e.x == pytest.approx(0.62) and e.value.low == pytest.approx(0.5)
    assert embodiment(value=0.7).raw is None
    with pytest.raises(EvalError):
        embodiment(raw=0.8, value=0.7)
