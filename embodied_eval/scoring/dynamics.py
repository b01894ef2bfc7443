"""Self-improvement coefficient κ = dC/dR (§3.3): slope estimators over checkpoints (Theil–Sen,
OLS, median of finite differences) with bootstrap intervals over checkpoints, window averages κ̄,
v̄, κ̄_t, and the time-based alternative normalized by the resource rate (§3.7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.resampling import (
    DEFAULT_RESAMPLES,
    block_indices,
    check_level,
    iid_indices,
    percentile_estimate,
)
from embodied_eval.stats.estimate import Estimate

METHODS = ("theil-sen", "ols", "finite-differences")

#: Resamples processed at once by the vectorized Theil–Sen (bounds memory to ~B·m² floats).
_CHUNK = 256


def _pair(
    x: ArrayLike, y: ArrayLike, xname: str, yname: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    xa = as_array(x, xname, min_size=2)
    ya = as_array(y, yname, min_size=2)
    if xa.size != ya.size:
        raise EvalError(f"{yname}: one value per {xname} is needed", key=yname)
    return xa, ya


def _theil_sen_rows(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Median pairwise slope of each row (shape (B, m)); NaN where all x in a row coincide."""
    out = np.empty(x.shape[0])
    iu = np.triu_indices(x.shape[1], k=1)
    for start in range(0, x.shape[0], _CHUNK):
        xs, ys = x[start : start + _CHUNK], y[start : start + _CHUNK]
        dx = (xs[:, None, :] - xs[:, :, None])[:, iu[0], iu[1]]
        dy = (ys[:, None, :] - ys[:, :, None])[:, iu[0], iu[1]]
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes = np.where(dx != 0, dy / dx, np.nan)
        all_nan = np.all(np.isnan(slopes), axis=1)
        slopes[all_nan] = 0.0  # placeholder, replaced below (avoids nanmedian warnings)
        med = np.nanmedian(slopes, axis=1)
        med[all_nan] = np.nan
        out[start : start + _CHUNK] = med
    return out


def theil_sen_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Theil–Sen slope: the median of (y_j − y_i)/(x_j − x_i) over pairs with x_i ≠ x_j.

    Args:
        x, y: shape (m,), m ≥ 2 with at least two distinct x.
    """
    xa, ya = _pair(x, y, "x", "y")
    slope = float(_theil_sen_rows(xa[None, :], ya[None, :])[0])
    if math.isnan(slope):
        raise EvalError("x: the slope needs at least two distinct x values", key="x")
    return slope


def _ols_rows(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    xc = x - x.mean(axis=1, keepdims=True)
    sxx = np.sum(xc * xc, axis=1)
    sxy = np.sum(xc * (y - y.mean(axis=1, keepdims=True)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)


def ols_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Ordinary least-squares slope Σ(x − x̄)(y − ȳ) / Σ(x − x̄)²."""
    xa, ya = _pair(x, y, "x", "y")
    slope = float(_ols_rows(xa[None, :], ya[None, :])[0])
    if math.isnan(slope):
        raise EvalError("x: the slope needs at least two distinct x values", key="x")
    return slope


def finite_difference_slopes(resources: ArrayLike, capability: ArrayLike) -> NDArray[np.float64]:
    """Finite-difference slopes Δκ_j = (C_{j+1} − C_j)/(R_{j+1} − R_j) (§3.3).

    Args:
        resources: cumulative resources R_j in checkpoint order, non-decreasing, shape (m,).
        capability: C_j, shape (m,).
    Returns:
        Δκ_j for the steps with R_{j+1} > R_j, shape (≤ m − 1,). Steps with no spend are
        undefined and left out.
    """
    r, c = _pair(resources, capability, "R", "C")
    dr = np.diff(r)
    if np.any(dr < 0):
        raise EvalError("R: cumulative resources must not decrease between checkpoints", key="R")
    keep = dr > 0
    if not keep.any():
        raise EvalError("R: no resources were spent between checkpoints", key="R")
    return np.diff(c)[keep] / dr[keep]


def kappa_finite_differences(resources: ArrayLike, capability: ArrayLike) -> float:
    """κ̂ = median_j Δκ_j over consecutive checkpoints (§3.3)."""
    return float(np.median(finite_difference_slopes(resources, capability)))


def self_improvement_coefficient(
    resources: ArrayLike,
    capability: ArrayLike,
    *,
    method: str = "theil-sen",
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    blocked: bool = False,
    block_length: int | None = None,
) -> Estimate:
    """Self-improvement coefficient κ̂ = Slope({(R_j, C_j)}) ≈ dC/dR, with a bootstrap interval
    over checkpoints (§3.3). Units: capability points per R-unit.

    Args:
        resources: cumulative agent-initiated resources R_j, shape (m,).
        capability: AAI-Index C_j at the checkpoints, shape (m,).
        method: "theil-sen", "ols" or "finite-differences" (median Δκ_j).
        rng: explicit generator (None: point only).
        level: two-sided confidence level.
        n_resamples: B.
        blocked: moving-block bootstrap of checkpoints (or of Δκ_j) instead of iid.
        block_length: block length for `blocked`.
    Returns:
        Estimate of κ; resamples where the slope is undefined (all R equal) are dropped and
        counted in `note`.
    """
    if method not in METHODS:
        raise EvalError(f"method: {method!r} is not one of {', '.join(METHODS)}", key="method")
    check_level(level)
    r, c = _pair(resources, capability, "R", "C")
    name = {
        "theil-sen": "Theil-Sen",
        "ols": "OLS",
        "finite-differences": "median finite difference",
    }[method]
    if method == "finite-differences":
        slopes = finite_difference_slopes(r, c)
        point = float(np.median(slopes))
        n = slopes.size
    else:
        point = theil_sen_slope(r, c) if method == "theil-sen" else ols_slope(r, c)
        n = r.size
    if rng is None:
        return Estimate(point, None, None, level, f"{name} (point, no rng)", n)
    idx = (
        block_indices(n, n_resamples, rng, block_length)
        if blocked
        else iid_indices(n, n_resamples, rng)
    )
    if method == "finite-differences":
        reps = np.median(slopes[idx], axis=1)
    elif method == "theil-sen":
        reps = _theil_sen_rows(r[idx], c[idx])
    else:
        reps = _ols_rows(r[idx], c[idx])
    kind = "block bootstrap" if blocked else "bootstrap"
    return percentile_estimate(
        point, reps, level=level, method=f"{name}, {kind} over checkpoints", n=n
    )


@dataclass(frozen=True)
class WindowAverages:
    """Window averages over [t₁, t₂] (§3.3): κ̄ (capability per R-unit), v̄ (R-units per time)
    and κ̄_t = κ̄ · v̄ (capability per time). κ̄ is None when R₂ = R₁ (the window is omitted)."""

    kappa: float | None
    spend_rate: float
    kappa_time: float

    def to_json(self) -> dict[str, Any]:
        return {"kappa_bar": self.kappa, "v_bar": self.spend_rate, "kappa_t_bar": self.kappa_time}


def window_averages(
    t1: float, t2: float, c1: float, c2: float, r1: float, r2: float
) -> WindowAverages:
    """κ̄ = (C₂ − C₁)/(R₂ − R₁), v̄ = (R₂ − R₁)/(t₂ − t₁), κ̄_t = (C₂ − C₁)/(t₂ − t₁) (§3.3).

    Args:
        t1, t2: window ends (t₂ > t₁), e.g. days.
        c1, c2: capability at the ends.
        r1, r2: cumulative resources at the ends (R₂ ≥ R₁).
    """
    if not t2 > t1:
        raise EvalError(f"window: t2 = {t2} must be after t1 = {t1}", key="t2")
    if r2 < r1:
        raise EvalError("window: cumulative resources must not decrease", key="R")
    kappa = (c2 - c1) / (r2 - r1) if r2 > r1 else None
    return WindowAverages(kappa, (r2 - r1) / (t2 - t1), (c2 - c1) / (t2 - t1))


def time_normalized_slope(time_slope: float, resource_rate: float) -> float:
    """κ(t) = κ_t(t) / r(t), with κ_t = dC/dt and r = dR/dt > 0 (§3.3, §3.7)."""
    if not resource_rate > 0:
        raise EvalError(f"resource_rate: r(t) must be positive, got {resource_rate}", key="r")
    return time_slope / resource_rate


def time_normalized_curvature(
    time_slope: float, time_curvature: float, resource_rate: float, resource_rate_change: float
) -> float:
    """Curvature per resource from time derivatives (§3.7 "Time-based alternative").

    By the chain rule, with κ_t = dC/dt, δκ_t = d²C/dt², r = dR/dt and r′ = dr/dt:

        δκ = d²C/dR² = δκ_t / r² − κ_t r′ / r³.

    The seed prints the first term as δκ_t / r; that is not dimensionally consistent and does
    not recover d²C/dR² for constant r ≠ 1 (with R = r t, d²C/dR² = δκ_t / r²). This function
    uses the chain-rule form.

    Args:
        time_slope: κ_t at t.
        time_curvature: δκ_t at t.
        resource_rate: r(t) > 0.
        resource_rate_change: r′(t).
    """
    if not resource_rate > 0:
        raise EvalError(f"resource_rate: r(t) must be positive, got {resource_rate}", key="r")
    r = resource_rate
    return time_curvature / r**2 - time_slope * resource_rate_change / r**3
