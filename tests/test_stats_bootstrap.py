"""Cluster, stratified, generic and block bootstraps, and MTTR intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from embodied_eval.errors import EvalError
from embodied_eval.stats import (
    block_bootstrap_mean,
    bootstrap_statistic,
    cluster_bootstrap_mean,
    cluster_weights,
    mttr_interval,
    resample_cluster_rates,
    stratified_bootstrap_mean,
)


def test_single_cluster_two_level_is_binomial():
    # One cluster, 50 episodes, 30 successes: each resample is Binomial(50, 0.6)/50,
    # mean 0.6 and variance 0.6·0.4/50 = 0.0048.
    reps = resample_cluster_rates([30], [50], np.random.default_rng(0), 20_000)
    assert reps.mean() == pytest.approx(0.6, abs=0.002)
    assert reps.var() == pytest.approx(0.0048, rel=0.05)


def test_cluster_variance_matches_theory():
    # 40 clusters of 10 episodes, rates alternating 0.2 / 0.8: plug-in between-cluster variance
    # 0.3² = 0.09. One-level: Var = 0.09/40 = 0.00225. Two-level adds the within-cluster
    # binomial variance E[p(1 − p)]/10 = 0.016: (0.09 + 0.016)/40 = 0.00265.
    s = np.tile([2, 8], 20)
    n = np.full(40, 10)
    one = resample_cluster_rates(s, n, np.random.default_rng(1), 20_000, two_level=False)
    two = resample_cluster_rates(s, n, np.random.default_rng(2), 20_000, two_level=True)
    assert one.mean() == pytest.approx(0.5, abs=0.002)
    assert one.var() == pytest.approx(0.00225, rel=0.05)
    assert two.var() == pytest.approx(0.00265, rel=0.05)


def test_unequal_cluster_sizes_use_the_pooled_rate():
    s, n = np.array([1, 9, 3]), np.array([2, 10, 8])
    est = cluster_bootstrap_mean(s, n, np.random.default_rng(0), 500)
    assert est.value == pytest.approx(13 / 20)
    assert est.n == 3 and est.extra["episodes"] == 20
    # Grouping identical clusters must not change the law: many identical clusters, one-level,
    # every resample is the same pooled rate.
    same = cluster_bootstrap_mean(
        [3] * 50, [4] * 50, np.random.default_rng(0), 500, two_level=False
    )
    assert same.low == same.high == 0.75


def test_shared_weights_resample_jointly():
    rng = np.random.default_rng(5)
    s = np.arange(30) % 7
    n = np.full(30, 8)
    weights = cluster_weights(30, rng, 300)
    assert weights.shape == (300, 30) and np.all(weights.sum(axis=1) == 30)
    a = resample_cluster_rates(s, n, rng, weights=weights, two_level=False)
    b = resample_cluster_rates(s, n, rng, weights=weights, two_level=False)
    np.testing.assert_array_equal(a, b)
    # Same weights, one-level: replicate r is Σ w s / Σ w n by hand.
    np.testing.assert_allclose(a, (weights @ s) / (weights @ n))


def test_bca_matches_scipy_on_small_sample():
    rng = np.random.default_rng(7)
    x = rng.exponential(10.0, size=25)
    ours = bootstrap_statistic(x, np.mean, np.random.default_rng(8), 20_000, method="bca")
    ref = stats.bootstrap(
        (x,), np.mean, n_resamples=20_000, method="BCa", rng=np.random.default_rng(9)
    ).confidence_interval
    assert ours.low == pytest.approx(ref.low, rel=0.03)
    assert ours.high == pytest.approx(ref.high, rel=0.03)
    pct = bootstrap_statistic(x, np.mean, np.random.default_rng(8), 20_000)
    ref = stats.bootstrap(
        (x,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(9)
    ).confidence_interval
    assert pct.low == pytest.approx(ref.low, rel=0.03)
    assert pct.high == pytest.approx(ref.high, rel=0.03)


def test_bootstrap_statistic_several_samples_and_vectorized():
    rng = np.random.default_rng(11)
    ar = (rng.random(80) < 0.8).astype(float)
    ss = (rng.random(60) < 0.9).astype(float)
    s2r = rng.uniform(0.8, 1.0, 40)

    def geo(a, b, c):
        return (a.mean() * b.mean() * c.mean()) ** (1 / 3)

    def geo_v(a, b, c):
        return (a.mean(axis=1) * b.mean(axis=1) * c.mean(axis=1)) ** (1 / 3)

    loop = bootstrap_statistic((ar, ss, s2r), geo, np.random.default_rng(1), 2000)
    vect = bootstrap_statistic(
        (ar, ss, s2r), geo_v, np.random.default_rng(1), 2000, vectorized=True
    )
    # Same generator stream, same index draws: identical intervals.
    assert (loop.low, loop.high) == pytest.approx((vect.low, vect.high))
    assert loop.value == pytest.approx(geo(ar, ss, s2r))
    assert loop.low < loop.value < loop.high and loop.n == 180


def test_bootstrap_statistic_errors_and_nan_note():
    rng = np.random.default_rng(0)
    with pytest.raises(EvalError):
        bootstrap_statistic((np.ones(3), np.ones(4)), lambda a, b: 0.0, rng, 10, paired=True)
    with pytest.raises(EvalError, match="percentile"):
        bootstrap_statistic(np.ones(6000), np.mean, rng, 10, method="bca")
    with pytest.raises(EvalError):
        bootstrap_statistic(np.ones(5), np.mean, None, 10)  # type: ignore[arg-type]
    x = np.array([0.0, 1.0])
    est = bootstrap_statistic(x, lambda a: 1.0 / a.sum() if a.sum() else np.nan, rng, 400)
    assert "undefined" in est.note


def test_stratified_keeps_each_stratum():
    # Two tasks, one all success and one all failure, 10 clusters each: resampling within strata
    # keeps each at 10 clusters, so every one-level replicate is exactly 0.5.
    s = np.array([5] * 10 + [0] * 10)
    n = np.full(20, 5)
    strata = ["a"] * 10 + ["b"] * 10
    est = stratified_bootstrap_mean(s, n, strata, np.random.default_rng(0), 500, two_level=False)
    assert (est.value, est.low, est.high) == (0.5, 0.5, 0.5)
    # Unstratified, the mix of tasks varies between resamples.
    loose = cluster_bootstrap_mean(s, n, np.random.default_rng(0), 500, two_level=False)
    assert loose.high - loose.low > 0.2
    eq = stratified_bootstrap_mean(
        [4, 4, 1],
        [5, 5, 10],
        ["a", "a", "b"],
        np.random.default_rng(0),
        200,
        two_level=False,
        stratum_weighting="equal",
    )
    assert eq.value == pytest.approx((0.8 + 0.1) / 2)


def test_block_bootstrap_wider_on_autocorrelated_series():
    rng = np.random.default_rng(3)
    # A persistent two-state chain (stay with probability 0.95) vs an i.i.d. series.
    state = np.empty(2000)
    state[0] = 1.0
    flips = rng.random(2000) < 0.05
    for t in range(1, 2000):
        state[t] = 1.0 - state[t - 1] if flips[t] else state[t - 1]
    iid = (rng.random(2000) < state.mean()).astype(float)
    blk = block_bootstrap_mean(state, 1, 1000)
    naive = bootstrap_statistic(
        state, lambda a: a.mean(axis=1), np.random.default_rng(1), 1000, vectorized=True
    )
    assert blk.extra["block_length"] > 5
    assert (blk.high - blk.low) > 2 * (naive.high - naive.low)
    flat = block_bootstrap_mean(iid, np.random.default_rng(2), 1000, kind="circular")
    # I.i.d.: close to the normal-approximation width 2·1.96·√(p(1−p)/n).
    width = 2 * 1.96 * np.sqrt(iid.mean() * (1 - iid.mean()) / 2000)
    assert (flat.high - flat.low) == pytest.approx(width, rel=0.25)
    with pytest.raises(EvalError):
        block_bootstrap_mean(state, 1, 100, kind="moving")


def test_mttr_exponential_vector():
    # 8 repairs, mean 11.75 min (sum 94 min): [188/χ²(0.975; 16), 188/χ²(0.025; 16)]
    # = [188/28.845, 188/6.908] = [6.52, 27.22] min.
    minutes = np.array([5, 7, 9, 10, 12, 14, 17, 20], dtype=float)
    est = mttr_interval(minutes / 60.0)
    assert est.value * 60 == pytest.approx(11.75)
    assert est.low * 60 == pytest.approx(6.52, abs=5e-3)
    assert est.high * 60 == pytest.approx(27.22, abs=5e-3)
    assert est.method == "MTTR exponential chi-square"


def test_mttr_bca_and_errors():
    minutes = np.array([5, 7, 9, 10, 12, 14, 17, 20], dtype=float)
    est = mttr_interval(minutes, method="bca", rng=np.random.default_rng(0), resamples=4000)
    assert minutes.min() < est.low < 11.75 < est.high < minutes.max()
    with pytest.raises(EvalError):
        mttr_interval(minutes, method="bca")
    with pytest.raises(EvalError):
        mttr_interval([-1.0])
    assert mttr_interval([]).value is None
