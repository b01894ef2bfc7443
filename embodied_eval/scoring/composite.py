"""Composite AAI-Index (eq. (12)): weighted geometric mean of the axes, its weight profiles,
its uncertainty (delta method and axis-vector resampling), and the uniformity factor U with the
jaggedness-adjusted index AAI* (eq. (35)).

A zero on any axis with positive weight gives an index of 0 (property (ii) of eq. (12)): there is
no compensation across axes. Axes with weight 0 (E in the software profile) do not enter the index
or U at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import AXES, AxisScore
from embodied_eval.scoring.resampling import (
    DEFAULT_RESAMPLES,
    check_level,
    percentile_estimate,
    standard_error_from_interval,
    two_sided_z,
)
from embodied_eval.stats.estimate import Estimate

#: Weight profiles: `default` (Table 1), `software` (§3.6: E's 0.5 moved equally to P, M, T) and
#: `robotics` (§7).
PROFILES: dict[str, dict[str, float]] = {
    "default": {
        "A": 1.0, "G": 1.0, "P": 1.0, "M": 1.0, "T": 1.0,
        "R": 1.5, "S": 1.0, "E": 0.5, "W": 1.0, "$": 1.0,
    },
    "software": {
        "A": 1.0, "G": 1.0, "P": 1.25, "M": 1.25, "T": 1.25,
        "R": 1.5, "S": 1.0, "E": 0.0, "W": 1.0, "$": 1.0,
    },
    "robotics": {
        "A": 1.0, "G": 1.0, "P": 1.1, "M": 1.0, "T": 1.1,
        "R": 1.5, "S": 1.0, "E": 1.25, "W": 1.0, "$": 1.0,
    },
}  # fmt: skip

#: Default exponent λ of the uniformity factor in AAI* (eq. (35)).
DEFAULT_JAGGEDNESS_EXPONENT = 0.5


def profile_weights(profile: str) -> dict[str, float]:
    """The weight vector of a named profile (`default`, `software`, `robotics`)."""
    try:
        return dict(PROFILES[profile])
    except KeyError:
        raise EvalError(
            f"profile {profile!r} is not one of {', '.join(PROFILES)}", key="profile"
        ) from None


def included_axes(weights: Mapping[str, float]) -> list[str]:
    """Axes that enter the index and U: those with weight > 0, in the seed's order."""
    for x, w in weights.items():
        if x not in AXES:
            raise EvalError(f"weights: {x!r} is not an axis", key=f"weights.{x}")
        if not (math.isfinite(w) and w >= 0):
            raise EvalError(f"weights.{x}: {w} must be a non-negative number", key=f"weights.{x}")
    out = [x for x in AXES if weights.get(x, 0.0) > 0]
    if not out:
        raise EvalError("weights: at least one axis needs a positive weight", key="weights")
    return out


def resolve_weights(
    values: Mapping[str, float], weights: Mapping[str, float] | str | None
) -> dict[str, float]:
    """Weights given as a mapping, or as a profile name (None = "default"). Under the named
    `default` profile E is optional (Table 1): without an E value it gets weight 0."""
    if weights is None or isinstance(weights, str):
        name = weights or "default"
        resolved = profile_weights(name)
        if name == "default" and "E" not in values:
            resolved["E"] = 0.0
        return resolved
    return dict(weights)


def _vector(values: Mapping[str, float], axes: list[str]) -> NDArray[np.float64]:
    missing = [x for x in axes if x not in values]
    if missing:
        raise EvalError(
            f"axes.{missing[0]}: missing (it has a positive weight)", key=f"axes.{missing[0]}"
        )
    v = np.array([float(values[x]) for x in axes])
    if np.any(~np.isfinite(v)) or np.any(v < 0) or np.any(v > 1):
        bad = axes[int(np.flatnonzero(~((v >= 0) & (v <= 1)))[0])]
        raise EvalError(f"axes.{bad}: {values[bad]} must lie in [0, 1]", key=f"axes.{bad}")
    return v


def aai_index(
    values: Mapping[str, float], weights: Mapping[str, float] | str | None = None
) -> float:
    """AAI-Index C = (Π_x x^{w_x})^{1/W} = exp((1/W) Σ_x w_x log x), W = Σ_x w_x, eq. (12).

    Args:
        values: normalized axis values x ∈ [0, 1] by symbol.
        weights: w_x ≥ 0 by symbol (axes with w_x = 0 are left out), or a profile name
            ("default", "software", "robotics"; None = "default", see `resolve_weights`).
    Returns:
        C ∈ [0, 1]; 0 when any included axis is 0 (no compensation, property (ii)).
    """
    weights = resolve_weights(values, weights)
    axes = included_axes(weights)
    v = _vector(values, axes)
    w = np.array([weights[x] for x in axes])
    return float(_index_rows(v[None, :], w)[0])


def _index_rows(v: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """eq. (12) on each row of v (shape (B, k)); a row with a zero gives 0."""
    with np.errstate(divide="ignore"):
        logs = np.log(v)
    out = np.exp(logs @ w / w.sum())
    out[np.any(v <= 0, axis=1)] = 0.0
    return out


def index_gradient(
    values: Mapping[str, float], weights: Mapping[str, float] | str | None = None
) -> dict[str, float]:
    """Marginal returns ∂C/∂x = (w_x / (W x)) C, property (iv) of eq. (12).

    Args:
        values: normalized axis values. weights: as for `aai_index`.
    Returns:
        {axis: ∂C/∂x} over the included axes; +inf at a zero axis (C is not differentiable there).
    """
    weights = resolve_weights(values, weights)
    axes = included_axes(weights)
    c = aai_index(values, weights)
    total = sum(weights[x] for x in axes)
    out = {}
    for x in axes:
        xv = float(values[x])
        out[x] = math.inf if xv == 0 else weights[x] / (total * xv) * c
    return out


def index_delta_method(
    axes: Mapping[str, AxisScore], weights: Mapping[str, float], *, level: float = 0.95
) -> Estimate:
    """Interval for C by the delta method on eq. (12): Var C ≈ Σ_x (∂C/∂x)² Var x.

    Axis standard errors come from each axis interval (normal approximation); axes are taken as
    independent. Axes without an interval contribute no variance and are named in `note`.

    Args:
        axes: AxisScore per symbol (all included axes present).
        weights: w_x.
        level: two-sided confidence level.
    Returns:
        Estimate of C with a normal interval clipped to [0, 1] (no interval at a zero axis).
    """
    check_level(level)
    inc = included_axes(weights)
    values = {x: axes[x].x for x in inc if x in axes}
    c = aai_index(values, weights)
    if c == 0.0:
        return Estimate(
            0.0,
            None,
            None,
            level,
            "delta method",
            len(inc),
            note="an axis is 0: the index is 0 and not differentiable there",
        )
    grad = index_gradient(values, weights)
    var, fixed = 0.0, []
    for x in inc:
        se = standard_error_from_interval(axes[x].value)
        if se is None:
            fixed.append(x)
            continue
        var += (grad[x] * se) ** 2
    if len(fixed) == len(inc):
        return Estimate(
            c, None, None, level, "delta method", len(inc), note="no axis carries an interval"
        )
    z = two_sided_z(level)
    se_c = math.sqrt(var)
    note = f"axes without interval held fixed: {' '.join(fixed)}" if fixed else ""
    return Estimate(
        c,
        max(0.0, c - z * se_c),
        min(1.0, c + z * se_c),
        level,
        "delta method (independent axes)",
        len(inc),
        note=note,
    )


def axis_draws(
    axis: AxisScore, n_resamples: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], str]:
    """Draws of one normalized axis for resampling the axis vector.

    Bootstrap replicates when the axis carries them (resampled with replacement), else a normal
    with the interval's standard error clipped to [0, 1], else the fixed point value.

    Returns:
        (draws of shape (B,), source: "replicates" | "normal" | "fixed").
    """
    if axis.replicates is not None and axis.replicates.size:
        return rng.choice(axis.replicates, size=n_resamples, replace=True), "replicates"
    se = standard_error_from_interval(axis.value)
    if se is not None and se > 0:
        return np.clip(rng.normal(axis.x, se, size=n_resamples), 0.0, 1.0), "normal"
    return np.full(n_resamples, axis.x), "fixed"


def index_resampled(
    axes: Mapping[str, AxisScore],
    weights: Mapping[str, float],
    rng: np.random.Generator,
    *,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> tuple[Estimate, NDArray[np.float64]]:
    """Interval for C by resampling the axis vector (A, …, $) and recomputing eq. (12).

    Axes are drawn independently (see `axis_draws`); the interval is the percentile interval of
    the recomputed indices.

    Args:
        axes: AxisScore per symbol (all included axes present).
        weights: w_x.
        rng: explicit generator.
        level: two-sided confidence level.
        n_resamples: B.
    Returns:
        (Estimate of C, index replicates of shape (B,)).
    """
    inc = included_axes(weights)
    values = {x: axes[x].x for x in inc if x in axes}
    c = aai_index(values, weights)
    cols, sources = [], {}
    for x in inc:
        draws, src = axis_draws(axes[x], n_resamples, rng)
        cols.append(draws)
        sources[x] = src
    reps = _index_rows(np.column_stack(cols), np.array([weights[x] for x in inc]))
    fixed = [x for x, s in sources.items() if s == "fixed"]
    if len(fixed) == len(inc):
        method = "axis-vector resampling"
        return Estimate(c, None, None, level, method, 0, note="no axis carries an interval"), reps
    note = f"axes without interval held fixed: {' '.join(fixed)}" if fixed else ""
    est = percentile_estimate(
        c,
        reps,
        level=check_level(level),
        method="axis-vector resampling (independent axes)",
        n=n_resamples,
        note=note,
    )
    return est, reps


def uniformity(
    values: Mapping[str, float], weights: Mapping[str, float] | str | None = None
) -> float:
    """Uniformity U = min_i s_i / median_i s_i over the included axes, eq. (35).

    Args:
        values: normalized axis values. weights: as for `aai_index` (which axes are included).
    Returns:
        U ∈ [0, 1]; 0 when the median is 0 (then the minimum is 0 too and the profile is as
        uneven as it can be).
    """
    weights = resolve_weights(values, weights)
    axes = included_axes(weights)
    v = _vector(values, axes)
    med = float(np.median(v))
    return 0.0 if med == 0.0 else float(np.min(v) / med)


def jaggedness_adjusted_index(
    index: float, uniformity_factor: float, exponent: float = DEFAULT_JAGGEDNESS_EXPONENT
) -> float:
    """Jaggedness-adjusted index AAI* = AAI · U^λ, λ ∈ [0, 1] (default 0.5), eq. (35)."""
    if not 0.0 <= exponent <= 1.0:
        raise EvalError(f"lambda: {exponent} must lie in [0, 1]", key="lambda")
    if not (0.0 <= index <= 1.0 and 0.0 <= uniformity_factor <= 1.0):
        raise EvalError("index and U must lie in [0, 1]", key="index")
    return float(index * uniformity_factor**exponent)
