"""Curvature of self-improvement (§3.7): local quadratic fit of g(C) against R (eqs. (13)–(14))
with block-bootstrap intervals over days, the acceleration gate (eq. (15)), the
diminishing-returns bound (eq. (16)) and the meta-elasticity of improvement (eq. (23)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.dynamics import time_normalized_curvature, time_normalized_slope
from embodied_eval.scoring.gate_checks import GateCheck, Verdict, check_at_least
from embodied_eval.scoring.links import check_link, link
from embodied_eval.scoring.resampling import (
    DEFAULT_RESAMPLES,
    block_indices,
    check_level,
    percentile_estimate,
)
from embodied_eval.stats.estimate import Estimate


def _design(r: NDArray[np.float64], center: float) -> NDArray[np.float64]:
    u = r - center
    return np.stack([np.ones_like(u), u, 0.5 * u * u], axis=-1)


def _tricube(r: NDArray[np.float64], center: float, bandwidth: float | None) -> NDArray[np.float64]:
    if bandwidth is None:
        return np.ones_like(r)
    u = np.abs(r - center) / bandwidth
    return np.where(u < 1.0, (1.0 - u**3) ** 3, 0.0)


def _solve_rows(
    x: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Weighted least squares per row: x (B, n, 3), y (B, n), w (B, n) → β (B, 3), NaN rows when
    the fit is not identified (fewer than three distinct R with weight)."""
    xtw = x.transpose(0, 2, 1) * w[:, None, :]
    a = xtw @ x
    b = (xtw @ y[:, :, None])[:, :, 0]
    out = np.full((x.shape[0], 3), np.nan)
    # identified when the weighted design has rank 3; test conditioning rather than det == 0
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(a)
    ok = np.isfinite(cond) & (cond < 1e12)
    if ok.any():
        out[ok] = np.linalg.solve(a[ok], b[ok][:, :, None])[:, :, 0]
    return out


def local_quadratic_fit(
    resources: ArrayLike,
    values: ArrayLike,
    *,
    center: float | None = None,
    bandwidth: float | None = None,
) -> tuple[float, float, float]:
    """Fit y_i ≈ β₀ + β₁ (R_i − R̄) + ½ β₂ (R_i − R̄)² (§3.7 "Estimators").

    Args:
        resources: R_i, shape (n,), at least three distinct values (inside the kernel).
        values: y_i = g(C_i) (or C_i on the raw scale), shape (n,).
        center: R̄ (default the mean of R).
        bandwidth: tricube kernel half-width h around R̄ (None: equal weights, a global quadratic).
    Returns:
        (β₀, β₁, β₂): level, slope κ̃ and curvature δκ̃ at R̄.
    """
    r = as_array(resources, "R", min_size=3)
    y = as_array(values, "y", min_size=3)
    if r.size != y.size:
        raise EvalError("y: one value per R is needed", key="y")
    if bandwidth is not None and not bandwidth > 0:
        raise EvalError(f"bandwidth: must be positive, got {bandwidth}", key="bandwidth")
    c = float(np.mean(r)) if center is None else float(center)
    beta = _solve_rows(_design(r, c)[None], y[None], _tricube(r, c, bandwidth)[None])[0]
    if np.any(np.isnan(beta)):
        raise EvalError(
            "R: the quadratic fit needs at least three distinct R values with kernel weight",
            key="R",
        )
    return float(beta[0]), float(beta[1]), float(beta[2])


@dataclass(frozen=True)
class CurvatureFit:
    """Slope and curvature of g(C) in R at R̄ with block-bootstrap intervals (eq. (14)).

    Attributes:
        link: "logit", "surprisal" or "identity" (raw scale, eq. (13)).
        center: R̄.
        slope: κ̃ = β₁ (capability on the link per R-unit).
        curvature: δκ̃ = β₂.
        prob_nonnegative: P(δκ̃ ≥ 0) as the share of bootstrap fits with β₂ ≥ 0 (None without rng).
        bandwidth: kernel half-width (None: global quadratic).
    """

    link: str
    center: float
    slope: Estimate
    curvature: Estimate
    prob_nonnegative: float | None
    bandwidth: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "center": self.center,
            "bandwidth": self.bandwidth,
            "slope": self.slope.to_json(),
            "curvature": self.curvature.to_json(),
            "prob_curvature_nonnegative": self.prob_nonnegative,
        }


def link_curvature(
    resources: ArrayLike,
    capability: ArrayLike,
    *,
    link_name: str = "logit",
    center: float | None = None,
    bandwidth: float | None = None,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    block_length: int | None = None,
) -> CurvatureFit:
    """Link-rate κ̃ = d g(C)/dR and curvature δκ̃ = d² g(C)/dR² at R̄, eqs. (13)–(14).

    Fits the local quadratic on y_i = g(C_i) and bootstraps days in moving blocks (to respect
    autocorrelation), refitting at the same R̄.

    Args:
        resources: cumulative resources R_i per day, in time order, shape (n,).
        capability: C_i per day, shape (n,).
        link_name: g; "identity" gives the raw-scale curvature of eq. (13).
        center, bandwidth: see `local_quadratic_fit`.
        rng: explicit generator (None: point estimates only).
        level: two-sided confidence level.
        n_resamples: B.
        block_length: days per block (default ⌈n^(1/3)⌉).
    Returns:
        CurvatureFit.
    """
    check_link(link_name)
    check_level(level)
    r = as_array(resources, "R", min_size=3)
    y = np.asarray(link(as_array(capability, "C", min_size=3), link_name), dtype=float)
    c = float(np.mean(r)) if center is None else float(center)
    _, b1, b2 = local_quadratic_fit(r, y, center=c, bandwidth=bandwidth)
    method = f"local quadratic on {link_name} link"
    if rng is None:
        return CurvatureFit(
            link_name,
            c,
            Estimate(b1, None, None, level, method, r.size),
            Estimate(b2, None, None, level, method, r.size),
            None,
            bandwidth,
        )
    idx = block_indices(r.size, n_resamples, rng, block_length)
    rb, yb = r[idx], y[idx]
    beta = _solve_rows(_design(rb, c), yb, _tricube(rb, c, bandwidth))
    boot = f"{method}, block bootstrap over days"
    slope = percentile_estimate(b1, beta[:, 1], level=level, method=boot, n=r.size)
    curv = percentile_estimate(b2, beta[:, 2], level=level, method=boot, n=r.size)
    finite = beta[np.isfinite(beta[:, 2]), 2]
    prob = float(np.mean(finite >= 0.0)) if finite.size else None
    return CurvatureFit(link_name, c, slope, curv, prob, bandwidth)


def time_based_curvature(
    times: ArrayLike,
    resources: ArrayLike,
    capability: ArrayLike,
    *,
    link_name: str = "identity",
    center: float | None = None,
    bandwidth: float | None = None,
) -> tuple[float, float]:
    """κ and δκ at t̄ from time derivatives, for noisy resource metering (§3.7 "Time-based
    alternative"): fit g(C) and R locally in t, then normalize by r = dR/dt (see
    `time_normalized_slope`, `time_normalized_curvature`).

    Args:
        times: t_i (days), shape (n,), at least three distinct values.
        resources: cumulative R_i, shape (n,).
        capability: C_i, shape (n,).
        link_name: g ("identity" for the raw scale).
        center: t̄ (default the mean time).
        bandwidth: tricube half-width in time (None: global quadratic).
    Returns:
        (κ, δκ) on the link scale per R-unit at t̄.
    """
    check_link(link_name)
    t = as_array(times, "t", min_size=3)
    y = np.asarray(link(as_array(capability, "C", min_size=3), link_name), dtype=float)
    c = float(np.mean(t)) if center is None else float(center)
    _, kappa_t, delta_kappa_t = local_quadratic_fit(t, y, center=c, bandwidth=bandwidth)
    _, rate, rate_change = local_quadratic_fit(t, resources, center=c, bandwidth=bandwidth)
    return (
        time_normalized_slope(kappa_t, rate),
        time_normalized_curvature(kappa_t, delta_kappa_t, rate, rate_change),
    )


def acceleration_gate(fit: CurvatureFit, alpha: float = 0.05) -> GateCheck:
    """Acceleration gate P(δκ̃ ≥ 0) ≥ 1 − α, eq. (15) (default α = 0.05).

    pass when the bootstrap share of δκ̃ ≥ 0 reaches 1 − α; inconclusive when the point δκ̃ ≥ 0 but
    the share falls short; fail when the point δκ̃ < 0; evidence_missing without a bootstrap.
    """
    if not 0.0 < alpha < 1.0:
        raise EvalError(f"alpha: {alpha} must lie in (0, 1)", key="alpha")
    name = f"acceleration: P(δκ̃ ≥ 0) ≥ {1 - alpha:g} ({fit.link} link)"
    point = fit.curvature.value
    if fit.prob_nonnegative is None or point is None:
        return GateCheck(
            name,
            Verdict.EVIDENCE_MISSING,
            1 - alpha,
            ">=",
            detail="no block bootstrap of the curvature",
        )
    if fit.prob_nonnegative >= 1 - alpha:
        verdict = Verdict.PASS
    elif point >= 0:
        verdict = Verdict.INCONCLUSIVE
    else:
        verdict = Verdict.FAIL
    return GateCheck(
        name,
        verdict,
        1 - alpha,
        ">=",
        value=fit.prob_nonnegative,
        detail=f"δκ̃ = {point:.4g} at R̄ = {fit.center:.4g}",
    )


def diminishing_returns_bound(fit: CurvatureFit, gamma: float) -> GateCheck:
    """Diminishing-returns bound δκ̃ ≥ −γ, eq. (16), decided on the interval's lower bound."""
    if not gamma > 0:
        raise EvalError(f"gamma: γ must be positive, got {gamma}", key="gamma")
    return check_at_least(
        f"diminishing returns: δκ̃ ≥ −{gamma:g} ({fit.link} link)", fit.curvature, -gamma
    )


def meta_elasticity(resource: float, slope: float, curvature: float) -> float | None:
    """Meta-elasticity E_g = d log κ̃ / d log R = R δκ̃ / κ̃, eq. (23); None where κ̃ ≤ 0."""
    if slope <= 0 or math.isnan(slope):
        return None
    return resource * curvature / slope
