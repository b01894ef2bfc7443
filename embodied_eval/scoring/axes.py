"""Axis functionals on task observables: Autonomy A (eq. (2)), Generality G (eq. (3)), Planning
depth P (eq. (4)), Economic Throughput $ (eq. (11)) and the Embodiment axis E taken from the
embodiment report.

Each `*_statistic` function is the seed equation on arrays and returns the raw x̂. Each axis
function (`autonomy`, `generality`, ...) accepts either the raw observables or a pre-computed raw
statistic (`raw=`, an `Estimate` with its interval) and returns an `AxisScore` with x̂, φ_x(x̂),
a bootstrap interval over tasks when an explicit `rng` is given, and the breakdown the seed asks
to report. Memory M, Tool Economy T, Self-Revision R, Sociality S and World-Model W live in their
own modules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import (
    IDENTITY,
    Anchors,
    AxisScore,
    axis_from_raw,
    axis_from_value,
    point_estimate,
)
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES, bootstrap_statistic, check_level
from embodied_eval.stats.estimate import Estimate

#: Minimum family size of an admissible battery (§3 "Admissibility" (b)).
M_MIN = 5


def as_array(values: ArrayLike, name: str, *, min_size: int = 1) -> NDArray[np.float64]:
    """1-D float array with finite entries, or EvalError naming `name`."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise EvalError(f"{name}: expected a flat list of numbers", key=name)
    if arr.size < min_size:
        raise EvalError(f"{name}: needs at least {min_size} value(s), got {arr.size}", key=name)
    if not np.all(np.isfinite(arr)):
        raise EvalError(f"{name}: contains a missing or non-finite value", key=name)
    return arr


def _check_positive(value: float | None, name: str) -> float:
    if value is None or not math.isfinite(value) or value <= 0:
        raise EvalError(f"{name}: must be a positive number, got {value}", key=name)
    return float(value)


# --- A: Autonomy -----------------------------------------------------------------------------


def autonomy_statistic(actions: ArrayLike, horizon: float) -> float:
    """Autonomy Â = mean_t min(a(t)/H, 1), eq. (2).

    Args:
        actions: uninterrupted action counts a(t), shape (n_tasks,).
        horizon: horizon cap H (> 0), per domain.
    Returns:
        Â ∈ [0, 1].
    """
    a = as_array(actions, "actions")
    h = _check_positive(horizon, "horizon")
    if np.any(a < 0):
        raise EvalError("actions: counts must be non-negative", key="actions")
    return float(np.mean(np.minimum(a / h, 1.0)))


def _mean_axis(
    axis: str,
    capped: NDArray[np.float64],
    anchors: Anchors,
    rng: np.random.Generator | None,
    level: float,
    n_resamples: int,
    breakdown: dict[str, Any],
) -> AxisScore:
    """Axis whose raw statistic is the task mean of `capped` values, with a bootstrap over tasks."""
    check_level(level)
    point = float(np.mean(capped))
    if rng is None:
        raw = Estimate(point, None, None, level, "point (no rng, no interval)", capped.size)
        return axis_from_raw(axis, raw, anchors, breakdown=breakdown)
    raw, reps = bootstrap_statistic(
        lambda idx: float(np.mean(capped[idx])),
        capped.size,
        rng,
        n_resamples=n_resamples,
        level=level,
        method="percentile bootstrap over tasks",
    )
    return axis_from_raw(axis, raw, anchors, breakdown=breakdown, raw_replicates=reps)


def autonomy(
    actions: ArrayLike | None = None,
    *,
    horizon: float | None = None,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    interventions: ArrayLike | None = None,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Autonomy axis A = φ_A(Â) from action counts (eq. (2)) or a pre-computed Â.

    Args:
        actions: a(t) per task, shape (n_tasks,); or None with `raw`.
        horizon: H, required with `actions`.
        raw: pre-computed Â (Estimate with interval, or float).
        anchors: (L_A, U_A).
        interventions: optional human-intervention counts per task, shape (n_tasks,), to report
            the fraction of tasks completed without intervention (§3.1 A remarks).
        rng: explicit generator for the bootstrap interval over tasks (None: point only).
    Returns:
        AxisScore; breakdown has the distribution of a(t) and the capped fraction.
    """
    if raw is not None:
        return axis_from_raw("A", raw, anchors)
    if actions is None or horizon is None:
        raise EvalError("autonomy: give actions and horizon, or raw", key="A")
    a = as_array(actions, "actions")
    h = _check_positive(horizon, "horizon")
    autonomy_statistic(a, h)  # validates
    capped = np.minimum(a / h, 1.0)
    q = np.quantile(a, [0.0, 0.25, 0.5, 0.75, 1.0])
    breakdown: dict[str, Any] = {
        "horizon": h,
        "n_tasks": int(a.size),
        "actions_quantiles": dict(
            zip(("min", "q25", "median", "q75", "max"), map(float, q), strict=False)
        ),
        "fraction_at_horizon": float(np.mean(a >= h)),
    }
    if interventions is not None:
        iv = as_array(interventions, "interventions")
        if iv.size != a.size:
            raise EvalError("interventions: one count per task is needed", key="interventions")
        breakdown["fraction_without_intervention"] = float(np.mean(iv == 0))
    return _mean_axis("A", capped, anchors, rng, level, n_resamples, breakdown)


# --- G: Generality ---------------------------------------------------------------------------


def _family_thresholds(
    families: Sequence[str], thresholds: float | Mapping[str, float]
) -> dict[str, float]:
    names = list(dict.fromkeys(families))
    if isinstance(thresholds, Mapping):
        missing = [f for f in names if f not in thresholds]
        if missing:
            raise EvalError(
                f"thresholds: no τ for family {missing[0]!r}", key=f"thresholds.{missing[0]}"
            )
        return {f: float(thresholds[f]) for f in names}
    return dict.fromkeys(names, float(thresholds))


def generality_statistic(
    qualities: ArrayLike, families: Sequence[str], thresholds: float | Mapping[str, float]
) -> float:
    """Generality Ĝ = (1/N) Σ_i 1{q̄(F_i) ≥ τ_i}, eq. (3).

    Args:
        qualities: q(t) per task, shape (n_tasks,).
        families: family label per task, length n_tasks.
        thresholds: τ_i per family (mapping) or one τ for all.
    Returns:
        Ĝ ∈ [0, 1], the fraction of covered families (uniform family weighting).
    """
    q = as_array(qualities, "qualities")
    if len(families) != q.size:
        raise EvalError("families: one label per task is needed", key="families")
    tau = _family_thresholds(families, thresholds)
    labels = np.asarray(families)
    covered = [float(np.mean(q[labels == f])) >= t for f, t in tau.items()]
    return float(np.mean(covered))


def generality(
    qualities: ArrayLike | None = None,
    families: Sequence[str] | None = None,
    *,
    thresholds: float | Mapping[str, float] | None = None,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Generality axis G = φ_G(Ĝ) with the per-family breakdown (eq. (3), §3.2 "Reporting").

    The interval resamples tasks within each family (stratified bootstrap), so every resample
    keeps all N families.

    Args:
        qualities, families: per-task q(t) and family labels; or None with `raw`.
        thresholds: τ_i per family or one τ.
        raw: pre-computed Ĝ.
        anchors: (L_G, U_G).
        rng: explicit generator for the interval (None: point only).
    Returns:
        AxisScore; breakdown["families"] has n, mean quality, τ, covered, admissible (n ≥ 5).
    """
    if raw is not None:
        return axis_from_raw("G", raw, anchors)
    if qualities is None or families is None or thresholds is None:
        raise EvalError("generality: give qualities, families and thresholds, or raw", key="G")
    q = as_array(qualities, "qualities")
    point = generality_statistic(q, families, thresholds)
    tau = _family_thresholds(families, thresholds)
    labels = np.asarray(families)
    members = {f: np.flatnonzero(labels == f) for f in tau}
    per_family = {
        f: {
            "n": int(idx.size),
            "mean_quality": float(np.mean(q[idx])),
            "threshold": tau[f],
            "covered": bool(np.mean(q[idx]) >= tau[f]),
            "admissible": bool(idx.size >= M_MIN),
        }
        for f, idx in members.items()
    }
    breakdown: dict[str, Any] = {"families": per_family, "n_families": len(tau)}
    small = [f for f, d in per_family.items() if not d["admissible"]]
    if small:
        breakdown["note"] = f"families below m_min = {M_MIN} instances: {', '.join(small)}"
    if rng is None:
        est = Estimate(point, None, None, check_level(level), "point (no rng, no interval)", q.size)
        return axis_from_raw("G", est, anchors, breakdown=breakdown)
    taus = np.array([tau[f] for f in members])
    reps = np.empty(n_resamples)
    means = np.empty((n_resamples, len(members)))
    for j, idx in enumerate(members.values()):
        draws = rng.integers(0, idx.size, size=(n_resamples, idx.size))
        means[:, j] = q[idx][draws].mean(axis=1)
    reps = np.mean(means >= taus[None, :], axis=1)
    alpha = 1.0 - check_level(level)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    est = Estimate(
        point, float(lo), float(hi), level, "stratified percentile bootstrap over tasks", q.size
    )
    return axis_from_raw("G", est, anchors, breakdown=breakdown, raw_replicates=reps)


# --- P: Planning depth -----------------------------------------------------------------------


def planning_statistic(depths: ArrayLike, depth_anchor: float) -> float:
    """Planning depth P̂ = mean_t min(d(t)/D, 1), eq. (4).

    Args:
        depths: minimal solved plan depth d(t) per task, shape (n_tasks,).
        depth_anchor: target depth D (> 0) of the suite.
    Returns:
        P̂ ∈ [0, 1].
    """
    d = as_array(depths, "depths")
    big_d = _check_positive(depth_anchor, "depth_anchor")
    if np.any(d < 0):
        raise EvalError("depths: plan depths must be non-negative", key="depths")
    return float(np.mean(np.minimum(d / big_d, 1.0)))


def planning(
    depths: ArrayLike | None = None,
    *,
    depth_anchor: float | None = None,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Planning axis P = φ_P(P̂) from plan depths (eq. (4)) or a pre-computed P̂.

    Args:
        depths: d(t) per task; or None with `raw`.
        depth_anchor: D, required with `depths`.
        raw: pre-computed P̂.
        anchors: (L_P, U_P).
        rng: explicit generator for the interval over tasks (None: point only).
    Returns:
        AxisScore; breakdown has the plan-depth distribution (§5 "Secondary").
    """
    if raw is not None:
        return axis_from_raw("P", raw, anchors)
    if depths is None or depth_anchor is None:
        raise EvalError("planning: give depths and depth_anchor, or raw", key="P")
    d = as_array(depths, "depths")
    planning_statistic(d, depth_anchor)  # validates
    capped = np.minimum(d / float(depth_anchor), 1.0)
    values, counts = np.unique(d, return_counts=True)
    breakdown = {
        "depth_anchor": float(depth_anchor),
        "n_tasks": int(d.size),
        "depth_distribution": {f"{v:g}": int(c) for v, c in zip(values, counts, strict=False)},
    }
    return _mean_axis("P", capped, anchors, rng, level, n_resamples, breakdown)


# --- $: Economic Throughput ------------------------------------------------------------------


def economic_throughput_statistic(tasks_per_hour: float, cost_per_hour: float) -> float:
    """Cost-normalized throughput $̂ = TPH_Q* / CPH, eq. (11) (tasks per USD)."""
    if tasks_per_hour < 0:
        raise EvalError("tasks_per_hour: must be non-negative", key="tasks_per_hour")
    return float(tasks_per_hour / _check_positive(cost_per_hour, "cost_per_hour"))


def economic_throughput(
    *,
    qualities: ArrayLike | None = None,
    targets: ArrayLike | float | None = None,
    durations_h: ArrayLike | None = None,
    costs: ArrayLike | None = None,
    raw: Estimate | float | None = None,
    anchors: Anchors,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Economic Throughput axis $ = φ_$($̂) from runs (eq. (11)) or a pre-computed $̂.

    TPH_Q* = #{q ≥ Q*} / hours and CPH = cost / hours over the same runs, so $̂ = #{q ≥ Q*} / cost.
    $̂ has units (tasks per currency unit), so anchors are required.

    Args:
        qualities, targets: q and Q* per run, shape (n,).
        durations_h: wall-clock hours per run, shape (n,).
        costs: cost per run (USD), shape (n,).
        raw: pre-computed $̂.
        anchors: (L_$, U_$) in the same units as $̂.
        rng: explicit generator for the interval over runs (None: point only).
    Returns:
        AxisScore; breakdown has TPH, CPH, hours and cost.
    """
    if raw is not None:
        return axis_from_raw("$", raw, anchors)
    if qualities is None or targets is None or durations_h is None or costs is None:
        raise EvalError(
            "economic_throughput: give qualities, targets, durations_h and costs, or raw",
            key="$",
        )
    q = as_array(qualities, "qualities")
    tgt = np.broadcast_to(np.asarray(targets, dtype=float), q.shape)
    dur = as_array(durations_h, "durations_h")
    c = as_array(costs, "costs")
    if not (dur.size == c.size == q.size):
        raise EvalError("durations_h, costs: one value per run is needed", key="durations_h")
    z = (q >= tgt).astype(float)
    hours = float(dur.sum())
    tph = float(z.sum()) / _check_positive(hours, "durations_h (total)")
    cph = float(c.sum()) / hours
    point = economic_throughput_statistic(tph, cph)
    breakdown = {
        "tasks_per_hour": tph,
        "cost_per_hour": cph,
        "hours": hours,
        "cost": float(c.sum()),
        "tasks_at_target": int(z.sum()),
    }
    if rng is None:
        est = Estimate(point, None, None, check_level(level), "point (no rng, no interval)", q.size)
        return axis_from_raw("$", est, anchors, breakdown=breakdown)

    def stat(idx: NDArray[np.intp]) -> float:
        cost = c[idx].sum()
        return float(z[idx].sum() / cost) if cost > 0 else math.nan

    est, reps = bootstrap_statistic(
        stat,
        q.size,
        rng,
        n_resamples=n_resamples,
        level=level,
        method="percentile bootstrap over runs",
    )
    return axis_from_raw("$", est, anchors, breakdown=breakdown, raw_replicates=reps)


# --- E: Embodiment (from the embodiment report) ----------------------------------------------


def embodiment(
    *,
    raw: Estimate | float | None = None,
    value: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    breakdown: dict[str, Any] | None = None,
) -> AxisScore:
    """Embodiment axis E from the embodiment report: Ê = (AR·SS·S2R)^(1/3) with its interval
    (`raw`, normalized here by φ_E) or E = φ_E(Ê) already normalized (`value`) (§3.1 E, §7).

    The report computes Ê; this core only calibrates and aggregates it.
    """
    if (raw is None) == (value is None):
        raise EvalError("embodiment: give exactly one of raw (Ê) or value (E)", key="E")
    if raw is not None:
        return axis_from_raw("E", raw, anchors, breakdown=breakdown)
    assert value is not None
    est = value if isinstance(value, Estimate) else point_estimate(float(value))
    return axis_from_value("E", est, breakdown=breakdown)
