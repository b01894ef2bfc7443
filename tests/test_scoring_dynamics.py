"""κ, curvature, link steps, Λ and escape velocity (§3.3, §3.7–3.8, §3.13), pinned by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import theilslopes

from embodied_eval.errors import EvalError
from embodied_eval.scoring.continuous import (
    continuous_score,
    escape_resource_bound,
    escape_time_bound,
    saturation_position,
    slope_reward,
)
from embodied_eval.scoring.curvature import (
    acceleration_gate,
    diminishing_returns_bound,
    link_curvature,
    local_quadratic_fit,
    meta_elasticity,
    time_based_curvature,
)
from embodied_eval.scoring.dynamics import (
    finite_difference_slopes,
    kappa_finite_differences,
    ols_slope,
    self_improvement_coefficient,
    theil_sen_slope,
    time_normalized_curvature,
    time_normalized_slope,
    window_averages,
)
from embodied_eval.scoring.gate_checks import Verdict
from embodied_eval.scoring.links import (
    inverse_link,
    link,
    link_step,
    meets_step,
    multiplicative_link_step,
    step_target,
)

pytestmark = pytest.mark.timeout(60)

# checkpoints with one outlier at the end
R = [0.0, 1.0, 2.0, 3.0, 4.0]
C = [0.10, 0.11, 0.12, 0.13, 0.30]


def test_theil_sen_resists_the_outlier_ols_does_not():
    # pairwise slopes: six pairs among the first four points give 0.01; pairs with the last point:
    # (0,4) 0.20/4 = 0.05, (1,4) 0.19/3 = 0.0633, (2,4) 0.18/2 = 0.09, (3,4) 0.17 → sorted ten
    # slopes have 5th and 6th = 0.01 → median 0.01
    assert theil_sen_slope(R, C) == pytest.approx(0.01)
    assert theil_sen_slope(R, C) == pytest.approx(theilslopes(C, R).slope)
    # OLS: R̄ = 2, C̄ = 0.76/5 = 0.152; Sxy = (−2)(−0.052) + (−1)(−0.042) + 0 + (1)(−0.022)
    # + (2)(0.148) = 0.42; Sxx = 10 → 0.042
    assert ols_slope(R, C) == pytest.approx(0.042)
    # finite differences 0.01, 0.01, 0.01, 0.17 → median 0.01
    np.testing.assert_allclose(finite_difference_slopes(R, C), [0.01, 0.01, 0.01, 0.17])
    assert kappa_finite_differences(R, C) == pytest.approx(0.01)


def test_finite_differences_skip_steps_without_spend():
    # R flat between the 2nd and 3rd checkpoint: that step is undefined and left out
    np.testing.assert_allclose(
        finite_difference_slopes([0, 1, 1, 3], [0.1, 0.2, 0.25, 0.35]), [0.1, 0.05]
    )
    with pytest.raises(EvalError, match="decrease"):
        finite_difference_slopes([0, 2, 1], [0.1, 0.2, 0.3])


@pytest.mark.parametrize("method", ["theil-sen", "ols", "finite-differences"])
def test_kappa_bootstrap_over_checkpoints(method):
    r = np.arange(10.0)
    c = 0.5 + 0.01 * r + np.array([0, 0.002, -0.001, 0.001, 0, -0.002, 0.001, 0, 0.002, -0.001])
    a = self_improvement_coefficient(
        r, c, method=method, rng=np.random.default_rng(5), n_resamples=400
    )
    b = self_improvement_coefficient(
        r, c, method=method, rng=np.random.default_rng(5), n_resamples=400
    )
    assert a == b
    assert a.low < a.value < a.high
    assert a.low > 0.005 and a.high < 0.015  # slope 0.01 with small noise
    point = self_improvement_coefficient(r, c, method=method)
    assert point.low is None and point.value == a.value


def test_window_averages():
    # C 0.50 → 0.56 over R 10 → 40 and t 2 → 8 days:
    # κ̄ = 0.06/30 = 0.002, v̄ = 30/6 = 5 per day, κ̄_t = 0.06/6 = 0.01 = κ̄·v̄
    w = window_averages(2, 8, 0.50, 0.56, 10, 40)
    assert (w.kappa, w.spend_rate, w.kappa_time) == pytest.approx((0.002, 5.0, 0.01))
    assert w.kappa * w.spend_rate == pytest.approx(w.kappa_time)
    assert window_averages(0, 1, 0.5, 0.5, 3, 3).kappa is None  # R₂ = R₁: omitted


def test_time_based_normalization_uses_the_chain_rule():
    # C(t) = t², R(t) = 2t → C = R²/4, dC/dR = R/2, d²C/dR² = 1/2.
    # At t = 1: κ_t = 2, δκ_t = 2, r = 2, r′ = 0 → κ = 2/2 = 1 = R/2 at R = 2
    assert time_normalized_slope(2.0, 2.0) == 1.0
    # δκ = δκ_t/r² − κ_t r′/r³ = 2/4 − 0 = 0.5 (the seed's printed δκ_t/r would give 1)
    assert time_normalized_curvature(2.0, 2.0, 2.0, 0.0) == pytest.approx(0.5)
    # C(t) = t, R(t) = t² → C = √R: at t = 1 (R = 1) dC/dR = 1/2, d²C/dR² = −1/4 R^(−3/2) = −0.25;
    # κ_t = 1, δκ_t = 0, r = 2t = 2, r′ = 2 → 0/4 − 1·2/8 = −0.25
    assert time_normalized_curvature(1.0, 0.0, 2.0, 2.0) == pytest.approx(-0.25)


def test_time_based_curvature_from_series():
    # C(t) = t², R(t) = 2t on t = 0..4, t̄ = 2: κ_t = 4, δκ_t = 2, r = 2, r′ = 0
    # → κ = 4/2 = 2 = R/2 at R = 4, δκ = 2/2² = 0.5 (C = R²/4)
    t = np.arange(5.0)
    kappa, dkappa = time_based_curvature(t, 2 * t, t**2)
    assert (kappa, dkappa) == pytest.approx((2.0, 0.5))


def test_local_quadratic_recovers_the_generating_coefficients():
    r = np.arange(0.0, 11.0)
    u = r - r.mean()  # R̄ = 5
    y = 1.0 + 2.0 * u + 0.5 * 3.0 * u**2
    b0, b1, b2 = local_quadratic_fit(r, y)
    assert (b0, b1, b2) == pytest.approx((1.0, 2.0, 3.0))
    # a tricube kernel around R̄ changes nothing on an exact quadratic
    assert local_quadratic_fit(r, y, bandwidth=4.0) == pytest.approx((1.0, 2.0, 3.0))
    with pytest.raises(EvalError, match="three distinct"):
        local_quadratic_fit([1, 1, 2, 2], [0, 1, 2, 3])


def test_link_curvature_on_logit_and_gates():
    r = np.arange(0.0, 15.0)
    u = r - 7.0
    y = -0.5 + 0.2 * u + 0.5 * 0.01 * u**2  # logit of C: κ̃ = 0.2, δκ̃ = 0.01
    noise = 0.002 * np.sin(np.arange(15) * 1.7)
    c = 1.0 / (1.0 + np.exp(-(y + noise)))
    fit = link_curvature(r, c, link_name="logit", rng=np.random.default_rng(2), n_resamples=500)
    assert fit.slope.value == pytest.approx(0.2, abs=2e-3)
    assert fit.curvature.value == pytest.approx(0.01, abs=1e-3)
    assert fit.prob_nonnegative == 1.0
    assert acceleration_gate(fit).verdict is Verdict.PASS  # eq. (15) with α = 0.05
    assert diminishing_returns_bound(fit, gamma=0.001).verdict is Verdict.PASS  # eq. (16)
    flat = link_curvature(r, c, link_name="logit")  # no rng: no probability
    assert acceleration_gate(flat).verdict is Verdict.EVIDENCE_MISSING
    # bending down: δκ̃ = −0.01 fails the acceleration gate and a tight bound
    c_down = 1.0 / (1.0 + np.exp(-(-0.5 + 0.2 * u - 0.005 * u**2 + noise)))
    down = link_curvature(r, c_down, rng=np.random.default_rng(2), n_resamples=500)
    assert acceleration_gate(down).verdict is Verdict.FAIL
    assert diminishing_returns_bound(down, gamma=0.001).verdict is Verdict.FAIL


def test_meta_elasticity_eq_23():
    # E_g = R δκ̃/κ̃ = 10 · 0.02/0.5 = 0.4
    assert meta_elasticity(10.0, 0.5, 0.02) == pytest.approx(0.4)
    assert meta_elasticity(10.0, 0.0, 0.02) is None  # defined only where κ̃ > 0


def test_link_steps_seed_examples():
    # surprisal, C = 0.50, A = e (Δ = log A = 1): 1 − C_{n+1} ≤ 0.5/e = 0.184 → C_{n+1} ≥ 0.816
    assert link_step(0.5, 1.0, "surprisal") == pytest.approx(1 - 0.5 / math.e)
    assert round(link_step(0.5, 1.0, "surprisal"), 3) == 0.816
    # multiplicative: 1 − C_{n+1} ≤ (1 − C_n)^A = 0.5^e → C_{n+1} ≥ 1 − exp(−e · 0.693) ≈ 0.848
    assert multiplicative_link_step(0.5, math.e) == pytest.approx(1 - 0.5**math.e)
    assert round(multiplicative_link_step(0.5, math.e), 3) == 0.848
    # logit with Δ = log 3 multiplies the odds by 3: odds 1 → 3 → C = 0.75
    assert link_step(0.5, math.log(3), "logit") == pytest.approx(0.75)
    # two surprisal steps of Δ = 1 from 0.5: 1 − 0.5/e² = 0.932332 (the double leap of eq. (29))
    assert step_target(0.5, 1.0, "surprisal", steps=2) == pytest.approx(0.932332, abs=1e-6)
    assert meets_step(0.82, 0.5, 1.0, "surprisal") and not meets_step(0.81, 0.5, 1.0, "surprisal")
    assert inverse_link(link(0.3, "logit"), "logit") == pytest.approx(0.3)
    with pytest.raises(EvalError):
        link(1.0, "logit")


def test_continuous_score_and_escape_velocity():
    # U(0.5) on surprisal with ε₀ = 0.01: ln 2 / ln 100 = 0.693147/4.605170 = 0.150515
    assert saturation_position(0.5) == pytest.approx(0.150515, abs=1e-6)
    assert saturation_position(0.3, "logit") < 0  # logit: negative below 0.5
    # M(κ̃ = κ*) = tanh(1 · ln 2) = (2 − 1/2)/(2 + 1/2) = 0.6
    assert slope_reward(0.01, 0.01) == pytest.approx(0.6)
    assert slope_reward(-0.02, 0.01) == -1.0
    # Λ = 0.5 · 0.150515 + 0.5 · 0.6 = 0.375257
    assert continuous_score(0.5, 0.01, kappa_star=0.01) == pytest.approx(0.375257, abs=1e-6)
    # with w_δ = 0.2 and δκ̃ = 0: K = 0, K⁺ = 0.5 → 0.4·0.150515 + 0.4·0.6 + 0.2·0.5 = 0.400206
    lam = continuous_score(
        0.5, 0.01, 0.0, kappa_star=0.01, weights=(0.4, 0.4, 0.2), nonnegative=True
    )
    assert lam == pytest.approx(0.4 * 0.150515 + 0.4 * 0.6 + 0.1, abs=1e-6)
    # escape: g(0.9) − g(0.5) = ln 10 − ln 2 = ln 5 = 1.609438; v_esc = 0.5 → ΔR ≤ 3.218876
    assert escape_resource_bound(0.5, 0.1, 0.5) == pytest.approx(3.218876, abs=1e-6)
    # r_min = 2 → T ≤ 1.609438
    assert escape_time_bound(0.5, 0.1, 0.5, 2.0) == pytest.approx(1.609438, abs=1e-6)
    assert escape_resource_bound(0.95, 0.1, 0.5) == 0.0  # already past 1 − ε
