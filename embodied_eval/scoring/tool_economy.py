"""Tool Economy axis T (eqs. (7)–(9)): coverage of required tool categories, drifted success
succ_δ with its per-δ curve, and the size prior S."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.calibration import IDENTITY, Anchors, AxisScore, axis_from_raw
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES, bootstrap_statistic, check_level
from embodied_eval.stats.estimate import Estimate


def tool_coverage(used: Sequence[str], required: Sequence[str]) -> float:
    """Tool coverage cov = |{c : used & required}| / |{c : required}|, eq. (7)."""
    req = set(required)
    if not req:
        raise EvalError("required: at least one required tool category is needed", key="required")
    return len(set(used) & req) / len(req)


def drifted_success(qualities: ArrayLike, targets: ArrayLike | float) -> float:
    """Drifted success succ_δ = E[z_δ(t)], z_δ(t) = 1{q_δ(t) ≥ q*(t)}, eq. (8).

    Args:
        qualities: q_δ(t) per drifted episode, shape (n,).
        targets: q*(t) per episode, shape (n,), or one q* for all.
    Returns:
        Mean strict success under drift, in [0, 1].
    """
    q = as_array(qualities, "qualities")
    t = np.broadcast_to(np.asarray(targets, dtype=float), q.shape)
    return float(np.mean(q >= t))


def tool_size_prior(n_tools: int, s_max: int) -> float:
    """Size prior S = log(1 + |𝒯|) / log(1 + S_max) of eq. (9), capped at 1 when |𝒯| > S_max."""
    if s_max < 1:
        raise EvalError(f"s_max: must be at least 1, got {s_max}", key="s_max")
    if n_tools < 0:
        raise EvalError(f"n_tools: must be non-negative, got {n_tools}", key="n_tools")
    return min(1.0, math.log1p(n_tools) / math.log1p(s_max))


def tool_economy_statistic(coverage: float, success: float, size_prior: float) -> float:
    """Tool economy T̂ = (cov · succ_δ · S)^(1/3), eq. (9)."""
    for name, v in (("coverage", coverage), ("success", success), ("size_prior", size_prior)):
        if not 0.0 <= v <= 1.0:
            raise EvalError(f"{name}: {v} must lie in [0, 1]", key=name)
    return float((coverage * success * size_prior) ** (1.0 / 3.0))


def tool_economy(
    *,
    used: Sequence[str] | None = None,
    required: Sequence[str] | None = None,
    qualities: ArrayLike | None = None,
    targets: ArrayLike | float | None = None,
    drifts: ArrayLike | None = None,
    s_max: int | None = None,
    at_drift: float | None = None,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Tool Economy axis T = φ_T(T̂), eqs. (7)–(9), with the per-δ success curve.

    succ_δ enters T̂ pooled over the drifted episodes as μ drew them, or at one magnitude with
    `at_drift`; the per-δ curve is always reported (§3.2 "Reporting"). |𝒯| is the number of
    categories used with success under drift (`used`). The interval resamples drifted episodes;
    coverage and the size prior are counts and stay fixed.

    Args:
        used: tool categories used with success under drift.
        required: tool categories the battery requires.
        qualities, targets, drifts: per drifted episode q_δ, q* and δ, shape (n,).
        s_max: S_max of the size prior.
        at_drift: evaluate succ_δ at this δ only.
        raw: pre-computed T̂.
        anchors: (L_T, U_T).
        rng: explicit generator for the interval (None: point only).
    Returns:
        AxisScore; breakdown has coverage, succ_δ, S, |𝒯| and success_by_drift {δ: (succ, n)}.
    """
    if raw is not None:
        return axis_from_raw("T", raw, anchors)
    if used is None or required is None or qualities is None or targets is None or s_max is None:
        raise EvalError(
            "tool_economy: give used, required, qualities, targets and s_max, or raw", key="T"
        )
    q = as_array(qualities, "qualities")
    tgt = np.broadcast_to(np.asarray(targets, dtype=float), q.shape)
    d = np.zeros_like(q) if drifts is None else as_array(drifts, "drifts")
    if d.size != q.size:
        raise EvalError("drifts: one δ per episode is needed", key="drifts")
    if at_drift is not None:
        mask = np.isclose(d, at_drift)
        if not mask.any():
            raise EvalError(f"at_drift: no episode has δ = {at_drift}", key="at_drift")
        q, tgt, d = q[mask], tgt[mask], d[mask]
    cov = tool_coverage(used, required)
    n_tools = len(set(used))
    size = tool_size_prior(n_tools, s_max)
    succ = drifted_success(q, tgt)
    point = tool_economy_statistic(cov, succ, size)
    z = (q >= tgt).astype(float)
    curve = {
        f"{v:g}": {"success": float(np.mean(z[d == v])), "n": int(np.sum(d == v))}
        for v in np.unique(d)
    }
    breakdown: dict[str, Any] = {
        "coverage": cov,
        "success_under_drift": succ,
        "size_prior": size,
        "n_tools": n_tools,
        "s_max": int(s_max),
        "success_by_drift": curve,
    }
    if at_drift is not None:
        breakdown["at_drift"] = float(at_drift)
    if rng is None:
        est = Estimate(point, None, None, check_level(level), "point (no rng, no interval)", q.size)
        return axis_from_raw("T", est, anchors, breakdown=breakdown)
    est, reps = bootstrap_statistic(
        lambda idx: tool_economy_statistic(cov, float(np.mean(z[idx])), size),
        q.size,
        rng,
        n_resamples=n_resamples,
        level=level,
        method="percentile bootstrap over drifted episodes",
    )
    return axis_from_raw("T", est, anchors, breakdown=breakdown, raw_replicates=reps)
