"""World-Model Fidelity axis W (§3.1 W): Brier risk of stated probabilities against a
pre-registered reference predictor on the same evaluation draws.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.calibration import IDENTITY, Anchors, AxisScore, axis_from_raw
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES, check_level, percentile_estimate
from embodied_eval.stats.estimate import Estimate

#: Default numerical guard ε of the Brier ratio (§3.1 W: ε ∈ (0, 1e-6], default 1e-12).
DEFAULT_EPS = 1e-12


def stated_probability(
    prob: float | None = None,
    *,
    odds: float | None = None,
    interval: tuple[float, float] | None = None,
) -> float:
    """The terminal record's probability: prob, or o/(1 + o) for odds, or (a + b)/2 for an
    interval [a, b], clipped to [0, 1] (§3.1 W)."""
    given = [x is not None for x in (prob, odds, interval)]
    if sum(given) != 1:
        raise EvalError("give exactly one of prob, odds or interval", key="prob")
    if odds is not None:
        if odds < 0:
            raise EvalError(f"odds: {odds} must be non-negative", key="odds")
        p = 1.0 if math.isinf(odds) else odds / (1.0 + odds)
    elif interval is not None:
        a, b = interval
        p = (a + b) / 2.0
    else:
        assert prob is not None
        p = prob
    return float(np.clip(p, 0.0, 1.0))


def brier_score(probs: ArrayLike, outcomes: ArrayLike) -> float:
    """Empirical Brier risk (1/n) Σ_i (p_i − y_i)² over the evaluation draws (§3.1 W)."""
    p = as_array(probs, "probs")
    y = as_array(outcomes, "outcomes")
    if p.size != y.size:
        raise EvalError("outcomes: one per probability is needed", key="outcomes")
    if np.any((p < 0) | (p > 1)) or np.any((y != 0) & (y != 1)):
        raise EvalError("probs must lie in [0, 1] and outcomes be 0 or 1", key="probs")
    return float(np.mean((p - y) ** 2))


def world_model_statistic(
    brier: ArrayLike, brier_ref: ArrayLike, eps: float = DEFAULT_EPS
) -> NDArray[np.float64] | float:
    """Ŵ = 1 − norm(Brier; Brier_ref), norm(b; b_ref) = min{1, b / max(b_ref, ε)} (§3.1 W).

    Args:
        brier, brier_ref: system and reference Brier risks on the same draws (scalars or arrays
            of equal shape, e.g. bootstrap replicates).
        eps: ε ∈ (0, 1e-6].
    Returns:
        Ŵ ∈ [0, 1], same shape as the inputs (a float for scalars).
    """
    if not 0.0 < eps <= 1e-6:
        raise EvalError(f"eps: {eps} must lie in (0, 1e-6]", key="eps")
    out = 1.0 - np.minimum(
        1.0, np.asarray(brier, float) / np.maximum(np.asarray(brier_ref, float), eps)
    )
    return float(out) if out.ndim == 0 else out


def world_model(
    probs: ArrayLike | None = None,
    outcomes: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    *,
    eps: float = DEFAULT_EPS,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """World-Model axis W = φ_W(Ŵ) on matched draws, or from a pre-computed Ŵ.

    Args:
        probs: the agent's stated probabilities p_i, shape (n,).
        outcomes: y_i ∈ {0, 1}, shape (n,).
        reference: π_ref(t_i), shape (n,) (or one value for all).
        eps: ε guard.
        raw: pre-computed Ŵ.
        anchors: (L_W, U_W).
        rng: explicit generator for the interval over draws (None: point only).
    Returns:
        AxisScore; breakdown has both Brier risks and n.
    """
    if raw is not None:
        return axis_from_raw("W", raw, anchors)
    if probs is None or outcomes is None or reference is None:
        raise EvalError("world_model: give probs, outcomes and reference, or raw", key="W")
    p = as_array(probs, "probs")
    y = as_array(outcomes, "outcomes")
    ref = np.broadcast_to(np.asarray(reference, dtype=float), p.shape).copy()
    b, b_ref = brier_score(p, y), brier_score(ref, y)
    point = float(world_model_statistic(b, b_ref, eps))
    breakdown = {"brier": b, "brier_reference": b_ref, "n": int(p.size)}
    if rng is None:
        est = Estimate(point, None, None, check_level(level), "point (no rng, no interval)", p.size)
        return axis_from_raw("W", est, anchors, breakdown=breakdown)
    idx = rng.integers(0, p.size, size=(n_resamples, p.size))
    # Brier risks of every resample (rows), then the same ratio as the point estimate
    reps = np.asarray(
        world_model_statistic(
            np.mean((p[idx] - y[idx]) ** 2, axis=1), np.mean((ref[idx] - y[idx]) ** 2, axis=1), eps
        )
    )
    est = percentile_estimate(
        point, reps, level=check_level(level), method="percentile bootstrap over draws", n=p.size
    )
    return axis_from_raw("W", est, anchors, breakdown=breakdown, raw_replicates=reps)
