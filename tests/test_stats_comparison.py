"""Sequential A/B comparison: the bets by hand, error rates under continuous monitoring, power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.stats.comparison import (
    A_BETTER,
    B_BETTER,
    CONTINUE,
    NO_DIFFERENCE,
    UNDECIDED,
    SequentialComparison,
    bernoulli_relative_entropy,
    effect_confidence_sequence,
    fewest_expected_pairs,
    fixed_n_pairs,
    paired_kl_inf,
)
from embodied_eval.stats.coverage_sim import paired_outcomes, sequential_comparison_oc


def test_first_trial_wealth_by_hand():
    # Before any trial: 4 pseudo-trials at D = 0 with variance 0.5 → μ̂ = 0, v̂ = 0.5.
    # Every bet is δ/(v̂ + δ²) = 0.2/0.54 = 0.370370 (A and B bet on g = max(±μ̂, δ) = δ).
    # Trial D = 1 − 0 = 1:
    #   A:  ln(1 + 0.370370)               = 0.315081
    #   B:  ln(1 − 0.370370)               = −0.462624
    #   E+: ln(1 − 0.370370 · (1 − 0.2))   = ln(0.703704) = −0.351398
    #   E−: ln(1 + 0.370370 · (1 + 0.2))   = ln(1.444444) = 0.367725
    c = SequentialComparison(delta=0.2, alpha=0.05, power=0.8)
    assert c.update(1, 0) == CONTINUE
    w = c.log_wealth
    assert w["A"] == pytest.approx(0.315081, abs=1e-6)
    assert w["B"] == pytest.approx(-0.462624, abs=1e-6)
    assert w["E+"] == pytest.approx(-0.351398, abs=1e-6)
    assert w["E-"] == pytest.approx(0.367725, abs=1e-6)


def test_fixed_n_by_hand():
    # (z_.975 + z_.8)² = (1.959964 + 0.841621)² = 7.848876; · 0.46 / 0.04 = 90.26 → 91.
    assert fixed_n_pairs(0.2, math.sqrt(0.46), 0.05, 0.8) == 91
    # σ_D = 0.5, δ = 0.1, α = 0.1, power 0.9: (1.644854 + 1.281552)² = 8.563847 · 25 = 214.1 → 215.
    assert fixed_n_pairs(0.1, 0.5, 0.1, 0.9) == 215


def test_a_clearly_better_stops_early_with_a_decision():
    c = SequentialComparison(delta=0.2, max_trials=200)
    rng = np.random.default_rng(3)
    while c.decision == CONTINUE:
        c.update(bool(rng.random() < 0.95), bool(rng.random() < 0.2))
    assert c.decision == A_BETTER and c.trials < 40
    out = c.to_json()
    assert out["effect"]["low"] > 0.0 and out["trials"] == c.trials
    with pytest.raises(EvalError, match="already stopped"):
        c.update(1, 1)


def test_cap_gives_undecided():
    c = SequentialComparison(delta=0.05, max_trials=3)
    for _ in range(3):
        c.update(1, 0)
    assert c.decision == UNDECIDED


def test_graded_and_binary_inputs_are_checked():
    with pytest.raises(EvalError, match="0 or 1"):
        SequentialComparison().update(0.5, 1)
    with pytest.raises(EvalError, match=r"\[0, 1\]"):
        SequentialComparison(graded=True).update(1.2, 1)
    with pytest.raises(EvalError, match="delta"):
        SequentialComparison(delta=0.0)
    assert SequentialComparison(graded=True).update(0.7, 0.4) == CONTINUE


def test_simulation_matches_the_class():
    rng = np.random.default_rng(11)
    xa, xb = paired_outcomes(0.7, 0.5, 30, 150, rng)
    oc = sequential_comparison_oc(xa, xb)
    decisions, used = [], []
    for r in range(30):
        c = SequentialComparison(max_trials=150)
        for t in range(150):
            if c.update(xa[r, t], xb[r, t]) != CONTINUE:
                break
        decisions.append(c.decision)
        used.append(c.trials)
    assert oc.a_better == pytest.approx(decisions.count(A_BETTER) / 30)
    assert oc.no_difference == pytest.approx(decisions.count(NO_DIFFERENCE) / 30)
    assert oc.mean_trials == pytest.approx(np.mean(used))


def test_type_one_error_with_a_peek_after_every_trial():
    # 2,000 comparisons of equal policies (p = 0.6 each), decision checked after every trial.
    rng = np.random.default_rng(2024)
    xa, xb = paired_outcomes(0.6, 0.6, 2000, 400, rng)
    oc = sequential_comparison_oc(xa, xb, delta=0.2, alpha=0.05, power=0.8)
    wrong = oc.a_better + oc.b_better
    assert wrong <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)
    assert oc.no_difference > 0.9


def test_graded_type_one_error():
    rng = np.random.default_rng(5)
    q = rng.beta(3, 2, size=(2, 2000, 300))  # equal graded-quality laws for A and B
    oc = sequential_comparison_oc(q[0], q[1], delta=0.2)
    assert oc.a_better + oc.b_better <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


def test_power_scenario_uses_fewer_trials_than_fixed_n():
    # A: 0.7, B: 0.5 (Δ = δ = 0.2), independent within pairs: σ²_D = 0.21 + 0.25 = 0.46.
    # "No difference" needs the 95 % sequence inside ±δ, which at Δ = δ happens with probability
    # ≤ α/2, so runs that the ±δ tests alone would have stopped as "no difference" go on to
    # "A better": power ≥ 0.95. The fixed-n design with that power: (z_.975 + z_.95)² · 0.46 /
    # 0.04 = (1.959964 + 1.644854)² · 11.5 = 12.994713 · 11.5 = 149.4 → 150 pairs; the
    # sequential test must use fewer.
    assert fixed_n_pairs(0.2, math.sqrt(0.46), 0.05, 0.95) == 150
    rng = np.random.default_rng(77)
    xa, xb = paired_outcomes(0.7, 0.5, 2000, 400, rng)
    oc = sequential_comparison_oc(xa, xb, delta=0.2, alpha=0.05, power=0.8)
    ratio = oc.mean_trials / 150
    print(f"power {oc.a_better:.3f}, mean trials {oc.mean_trials:.1f}, ratio {ratio:.2f}")
    assert oc.a_better >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / 2000)
    assert oc.b_better == 0.0
    assert ratio < 1.0
    # No test with these error rates can average fewer than Wald's floor, 59.69 pairs (below).
    assert oc.mean_trials >= 59.69


def test_effect_confidence_sequence_covers_at_every_look():
    rng = np.random.default_rng(12)
    misses = 0
    for _ in range(200):
        d = (rng.random(150) < 0.6).astype(float) - (rng.random(150) < 0.5).astype(float)
        est = effect_confidence_sequence(d, 0.1)  # running intersection: covers at every look
        misses += not (est.low <= 0.1 <= est.high)
    assert misses / 200 <= 0.1 + 2 * math.sqrt(0.09 / 200)
    assert effect_confidence_sequence([], 0.05).n == 0


def test_b_better_symmetric():
    c = SequentialComparison(delta=0.2)
    rng = np.random.default_rng(4)
    while c.decision == CONTINUE:
        c.update(bool(rng.random() < 0.2), bool(rng.random() < 0.95))
    assert c.decision == B_BETTER


def test_straight_wins_decide_at_the_hand_computed_trial():
    # D = 1 every trial. Bets λ_A = g/(v̂ + g²) with g = max(μ̂, 0.2), capped at 0.8:
    #   t1: μ̂ 0, v̂ 0.5            → 0.2/0.54 = 0.370370, ln 1.370370 = 0.315081
    #   t2: μ̂ 1/5, v̂ 2/5          → 0.2/0.44 = 0.454545, ln 1.454545 = 0.374693
    #   t3: μ̂ 1/3, v̂ 1/3          → (1/3)/(4/9) = 0.75,  ln 1.75     = 0.559616
    #   t4+: μ̂ 3/7, v̂ 2/7 → 0.913 → cap 0.8,             ln 1.8      = 0.587787 each
    # Cumulative: 0.315, 0.690, 1.249, 1.837, 2.425, 3.013, 3.601, 4.188: the first to reach
    # ln(2/0.05) = 3.688879 is trial 8.
    c = SequentialComparison(delta=0.2, alpha=0.05)
    decisions = [c.update(1, 0) for _ in range(8)]
    assert decisions[:7] == [CONTINUE] * 7 and decisions[7] == A_BETTER
    assert c.log_wealth["A"] == pytest.approx(4.188325, abs=1e-5)


def test_scalar_and_array_bets_agree():
    from embodied_eval.stats.comparison import _bets_scalar, betting_fractions

    for n, s1, s2 in ((0, 0.0, 0.0), (3, 2.0, 2.0), (10, -4.0, 6.0), (50, 0.3, 9.5)):
        arr = betting_fractions(np.array([n]), np.array([s1]), np.array([s2]), 0.2)
        assert [float(x[0]) for x in arr] == pytest.approx(list(_bets_scalar(n, s1, s2, 0.2)))


def test_fewest_expected_pairs_by_hand():
    # A 0.7, B 0.5 independent: P(A wins the pair) = 0.7·0.5 = 0.35, P(B wins) = 0.5·0.3 = 0.15.
    # Closest law with Δ ≤ 0: the Kelly bet λ = (0.35 − 0.15)/(0.35 + 0.15) = 0.4 and
    #   KL_inf = 0.35 ln 1.4 + 0.15 ln 0.6 = 0.117765 − 0.076624 = 0.041141.
    # d(0.8 ‖ 0.025) = 0.8 ln 32 + 0.2 ln(0.2/0.975) = 2.772589 − 0.316824 = 2.455765.
    # Floor: 2.455765 / 0.041141 = 59.69 pairs (vs 91 for the fixed-n design: 0.656×).
    assert bernoulli_relative_entropy(0.8, 0.025) == pytest.approx(2.455765, abs=1e-6)
    assert paired_kl_inf(0.35, 0.15, 0.0, False) == pytest.approx(0.041141, abs=1e-6)
    assert fewest_expected_pairs(0.35, 0.15) == pytest.approx(59.69, abs=0.01)
    assert fewest_expected_pairs(0.15, 0.35) == pytest.approx(59.69, abs=0.01)
    # Gaussian D: floor / fixed n = 2 d(0.8 ‖ 0.025) / (z_.975 + z_.8)² = 4.91153 / 7.848876 = 0.6258.
    z = 1.959964 + 0.841621
    assert 2 * bernoulli_relative_entropy(0.8, 0.025) / z**2 == pytest.approx(0.6258, abs=1e-4)


def test_no_difference_floor_matches_a_brute_force_projection():
    # Equal policies 0.6/0.6: P(A wins) = P(B wins) = 0.24. The closest law with Δ ≥ δ = 0.2 sits
    # on Δ = δ: Q = (q, q − 0.2, 1 − 2q + 0.2); search q on a fine grid for the smallest KL.
    q = np.linspace(0.2 + 1e-6, 0.6 - 1e-6, 400001)
    p = np.array([0.24, 0.24, 0.52])
    kl = (
        p[0] * np.log(p[0] / q)
        + p[1] * np.log(p[1] / (q - 0.2))
        + p[2] * np.log(p[2] / (1.2 - 2 * q))
    )
    assert paired_kl_inf(0.24, 0.24, 0.2, True) == pytest.approx(kl.min(), rel=1e-6)
    # d(0.95 ‖ 0.2) = 0.95 ln 4.75 + 0.05 ln 0.0625 = 1.480247 − 0.138629 = 1.341618.
    assert fewest_expected_pairs(0.24, 0.24, no_difference=0.95) == pytest.approx(
        1.341618 / kl.min(), rel=1e-5
    )
