"""MMRV, Pearson/Spearman agreement with Fisher-z CIs, and the episode-level bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    mmrv,
    pearson_agreement,
    policy_agreement_bootstrap,
    spearman_agreement,
)

Z975 = 1.959964


def test_mmrv_hand_example_and_argument_order():
    sim = [0.9, 0.5, 0.4]
    real = [0.6, 0.7, 0.1]
    # Pairs (0,1) and (1,0) are ranked differently (sim 0.9 > 0.5, real 0.6 < 0.7); the others
    # agree. Weighted by real gaps: RV = [0.1, 0.1, 0] → MMRV = 0.2/3.
    assert mmrv(sim, real) == pytest.approx(0.2 / 3)
    # Swapped, the same violation is weighted by the sim gap |0.9 − 0.5| = 0.4 → 0.8/3.
    assert mmrv(real, sim) == pytest.approx(0.8 / 3)


def test_mmrv_perfect_ranking_is_zero():
    assert mmrv([0.1, 0.5, 0.9], [0.2, 0.3, 0.8]) == 0.0
    assert mmrv([0.5], [0.7]) == 0.0
    with pytest.raises(EvalError):
        mmrv([0.1, 0.2], [0.1])


def test_pearson_fisher_z_hand():
    sim = [0.1, 0.4, 0.5, 0.8, 0.9]
    real = [0.2, 0.3, 0.6, 0.7, 0.95]
    # Deviations from means 0.54 and 0.55: Sxy = 0.370, Sxx = 0.412, Syy = 0.370,
    # r = 0.370/√(0.412·0.370) = 0.947658; CI tanh(atanh r ± 1.959964/√2).
    est = pearson_agreement(sim, real)
    r = 0.370 / math.sqrt(0.412 * 0.370)
    assert est.value == pytest.approx(r, abs=1e-6)
    half = Z975 / math.sqrt(2)
    assert est.low == pytest.approx(math.tanh(math.atanh(r) - half), abs=1e-5)
    assert est.high == pytest.approx(math.tanh(math.atanh(r) + half), abs=1e-5)
    assert est.n == 5


def test_spearman_fisher_z_hand():
    # Real ranks [2, 1, 3, 4, 5] vs sim [1..5]: Σd² = 2, ρ = 1 − 6·2/(5·24) = 0.9.
    # Fieller SE √(1.06/2): CI tanh(atanh 0.9 ± 1.959964·0.728011) = [0.0453, 0.9940].
    est = spearman_agreement([0.1, 0.4, 0.5, 0.8, 0.9], [0.3, 0.2, 0.6, 0.7, 0.95])
    assert est.value == pytest.approx(0.9)
    assert (est.low, est.high) == pytest.approx((0.0453, 0.9940), abs=5e-5)


def test_correlations_degenerate_cases():
    small = pearson_agreement([0.1, 0.5, 0.9], [0.2, 0.4, 0.7])
    assert small.value is not None and small.low is None and "4 policies" in small.note
    assert pearson_agreement([0.5, 0.5, 0.5, 0.5], [0.1, 0.2, 0.3, 0.4]).value is None
    perfect = spearman_agreement([0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.5, 0.9])
    assert (perfect.value, perfect.low, perfect.high) == (1.0, 1.0, 1.0)


def test_policy_bootstrap_shrinks_with_episodes():
    rng = np.random.default_rng(3)
    sim_p = np.array([0.2, 0.45, 0.6, 0.8])
    real_p = np.array([0.15, 0.5, 0.55, 0.85])
    small = np.full(4, 20)
    large = np.full(4, 200_000)
    est_small = policy_agreement_bootstrap(
        np.round(sim_p * small), small, np.round(real_p * small), small, rng, "pearson", 2000
    )
    est_large = policy_agreement_bootstrap(
        np.round(sim_p * large), large, np.round(real_p * large), large, rng, "pearson", 2000
    )
    assert est_large.value == pytest.approx(pearson_agreement(sim_p, real_p).value)
    assert est_large.low <= est_large.value <= est_large.high
    assert est_large.high - est_large.low < 0.01
    assert est_small.high - est_small.low > 10 * (est_large.high - est_large.low)


def test_policy_bootstrap_mmrv_and_spearman():
    rng = np.random.default_rng(4)
    n = np.full(3, 100_000)
    # Ranks agree by wide margins: every resample keeps MMRV = 0 and ρ = 1.
    est = policy_agreement_bootstrap([10_000, 50_000, 90_000], n, [20_000, 40_000, 80_000], n, rng)
    assert (est.value, est.low, est.high) == (0.0, 0.0, 0.0)
    est = policy_agreement_bootstrap(
        [10_000, 50_000, 90_000], n, [20_000, 40_000, 80_000], n, rng, "spearman", 500
    )
    assert (est.low, est.high) == (1.0, 1.0)


def test_policy_bootstrap_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(EvalError):
        policy_agreement_bootstrap([1], [0], [1], [2], rng)
    with pytest.raises(EvalError):
        policy_agreement_bootstrap([1], [2], [1], [2], rng, "kendall")
