"""Prediction-powered success rate (PPI / PPI++): hand-worked vectors and limiting cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.stats.ppi import (
    ppi_lambda,
    ppi_mean,
    ppi_mean_clustered,
    ppi_trials_needed,
)

Z975 = 1.959963984540054  # standard normal 0.975 quantile

# Tiny example used below: 4 pairs and 6 unlabeled sim predictions.
Y = [1, 0, 1, 1]
F = [1, 0, 0, 1]
G = [1, 1, 0, 1, 0, 1]


def test_classical_ppi_by_hand():
    # mean(G) = 4/6; rectifier Y − F = [0, 0, 1, 0], mean 1/4; θ̂ = 2/3 + 1/4 = 0.916667.
    # Var(G) (ddof 1): deviations 1/3 (×4) and −2/3 (×2): (4/9 + 8/9)/5 = 0.266667; /N = 0.044444.
    # Var(Y − F) (ddof 1): mean 1/4, squares 3·(1/16) + 9/16 = 0.75; /3 = 0.25; /n = 0.0625.
    # V = 0.106944; half-width z·√V = 1.959964 · 0.327024 = 0.640955.
    # Classical: Var(Y)/n = 0.25/4 = 0.0625 → n_eff = 4 · 0.0625 / 0.106944 = 2.337662.
    r = ppi_mean(Y, F, G, 0.95, lam="classical")
    assert r.lam == 1.0
    assert r.estimate.value == pytest.approx(0.916667, abs=1e-6)
    assert r.variance == pytest.approx(0.106944, abs=1e-6)
    assert r.estimate.low == pytest.approx(0.916667 - 0.640955, abs=1e-5)
    assert r.estimate.high == pytest.approx(0.916667 + 0.640955, abs=1e-5)
    assert r.effective_n == pytest.approx(2.337662, abs=1e-5)
    assert "CLT" in r.estimate.method and "iid" in r.estimate.method


def test_power_tuned_ppi_by_hand():
    # Cov(Y, F) (ddof 1) = [(.25)(.5) + (−.75)(−.5) + (.25)(−.5) + (.25)(.5)]/3 = 1/6;
    # Var(F) = 1/3; λ = (1/6) / ((1 + 4/6) · 1/3) = 0.3.
    # θ̂ = 0.3 · 4/6 + mean(Y − 0.3 F) = 0.2 + (0.75 − 0.15) = 0.8.
    # Y − 0.3F = [.7, 0, 1, .7], mean .6, Var = (.01 + .36 + .16 + .01)/3 = 0.18; /4 = 0.045.
    # λ² Var(G)/N = 0.09 · 0.266667 / 6 = 0.004; V = 0.049; n_eff = 4 · 0.0625/0.049 = 5.102041.
    assert ppi_lambda(Y, F, 6) == pytest.approx(0.3)
    r = ppi_mean(Y, F, G, 0.95)
    assert r.lam == pytest.approx(0.3)
    assert r.estimate.value == pytest.approx(0.8)
    assert r.variance == pytest.approx(0.049)
    half = Z975 * math.sqrt(0.049)
    assert (r.estimate.low, r.estimate.high) == pytest.approx((0.8 - half, 0.8 + half))
    assert r.effective_n == pytest.approx(5.102041, abs=1e-6)
    assert "PPI++" in r.estimate.method


def test_cluster_jackknife_ppi_by_hand():
    # Pairs in clusters [0,0,1,1,2,2]: Y = [1,0,1,1,0,1], F = [1,0,0,1,0,1];
    # unlabeled G = [1,1,1,1,0,0] in the same clusters; λ = 1.
    # Full: mean G 4/6 + mean Y 4/6 − mean F 3/6 = 0.833333.
    # Leave out cluster 0: .5 (G) + .75 (Y) − .5 (F) = .75; cluster 1: .5 + .5 − .5 = .5;
    # cluster 2: 1 + .75 − .5 = 1.25. Jackknife V = (2/3)·Σ(θ_k − 0.833333)²
    # = (2/3)(0.006944 + 0.111111 + 0.173611) = 7/36 = 0.194444; half = t(0.975; 2) · √V
    # = 4.302653 · 0.440959 = 1.897292.
    # Classical (λ = 0): leave-outs .75, .5, .75 → V = (2/3)(0.041667) = 0.027778;
    # n_eff = 6 · 0.027778 / 0.194444 = 0.857143.
    r = ppi_mean_clustered(
        [1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 0, 1], [0, 0, 1, 1, 2, 2],
        [1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 2, 2], 0.95, lam=1.0,
    )  # fmt: skip
    assert r.estimate.value == pytest.approx(0.833333, abs=1e-6)
    assert r.variance == pytest.approx(0.194444, abs=1e-6)
    assert r.classical_variance == pytest.approx(0.027778, abs=1e-6)
    assert r.estimate.high - r.estimate.value == pytest.approx(1.897292, abs=1e-5)
    assert r.effective_n == pytest.approx(0.857143, abs=1e-5)
    assert r.clusters == 3 and "jackknife" in r.estimate.method


@pytest.mark.parametrize("lam", ["tuned", "classical"])
def test_constant_sim_gives_the_classical_interval(lam):
    rng = np.random.default_rng(7)
    y = (rng.random(80) < 0.7).astype(float)
    r = ppi_mean(y, np.full(80, 0.6), np.full(500, 0.6), 0.9, lam=lam)
    n = y.size
    half = 1.6448536269514722 * math.sqrt(np.var(y, ddof=1) / n)
    assert r.estimate.value == pytest.approx(y.mean())
    assert (r.estimate.low, r.estimate.high) == pytest.approx((y.mean() - half, y.mean() + half))
    assert r.effective_n == pytest.approx(n)


def test_constant_sim_cluster_version_is_the_jackknife_of_the_real_mean():
    rng = np.random.default_rng(8)
    y = (rng.random(60) < 0.6).astype(float)
    cl = np.arange(60) % 12
    r = ppi_mean_clustered(y, np.ones(60), cl, np.ones(300), np.arange(300) % 12, 0.95)
    # Hand-rolled delete-one-cluster jackknife of the plain mean of Y.
    loo = np.array([y[cl != k].mean() for k in range(12)])
    var = 11 / 12 * np.sum((loo - loo.mean()) ** 2)
    assert r.lam == 0.0 and r.estimate.value == pytest.approx(y.mean())
    assert r.variance == pytest.approx(var)


def test_perfect_sim_is_much_narrower():
    rng = np.random.default_rng(9)
    y = (rng.random(100) < 0.7).astype(float)
    g = (rng.random(5000) < 0.7).astype(float)
    r = ppi_mean(y, y, g, 0.95)
    classical = 2 * Z975 * math.sqrt(np.var(y, ddof=1) / 100)
    # f = Y: Cov(Y, f) = Var(f), so λ = 1/(1 + n/N) = 1/1.02.
    assert r.lam == pytest.approx(1 / 1.02)
    width = r.estimate.high - r.estimate.low
    assert width < 0.3 * classical
    assert r.effective_n > 10 * 100


def test_trials_needed_formula():
    # h = 0.05 at 95 %: (h/z)² = 6.5077e-4; minus sim term 0.1/2000 = 5e-5 → 6.0077e-4;
    # σ²_res = 0.05 → n = ⌈0.05/6.0077e-4⌉ = ⌈83.23⌉ = 84.
    assert ppi_trials_needed(0.05, 0.05, 0.1, 2000, 0.95) == 84
    assert ppi_trials_needed(0.001, 0.05, 0.1, 10, 0.95) is None


def test_bad_input_is_refused():
    with pytest.raises(EvalError, match="paired sim predictions"):
        ppi_mean([1, 0, 1], [1, 0], [1])
    with pytest.raises(EvalError, match="at least 2"):
        ppi_mean([1], [1], [1, 0])
    with pytest.raises(EvalError, match="lam"):
        ppi_mean(Y, F, G, lam=1.5)
    with pytest.raises(EvalError, match="3 clusters"):
        ppi_mean_clustered(Y, F, [0, 0, 1, 1], G, [0, 0, 0, 1, 1, 1])
