"""Delegability frontier (§6, eqs. (38)–(41)) and the autonomy–quality frontier F(τ) (eq. (37)).

The delegability frontier q*(a) is the best expected quality among policies whose expected human
interventions fit the budget H_max(a) = (1 − a)·h_max of autonomy demand a. It is estimated on
autonomy bins and made non-increasing in a by isotonic regression; FD and AUF summarize it and
get block-bootstrap bands over the (t, s, δ) draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import isotonic_regression

from embodied_eval.errors import EvalError
from embodied_eval.scoring.resampling import (
    DEFAULT_RESAMPLES,
    block_indices,
    check_level,
    percentile_estimate,
)
from embodied_eval.stats.estimate import Estimate


def autonomy_bins(n_bins: int) -> NDArray[np.float64]:
    """Midpoints a_j = (j + ½)/K of K equal autonomy cells on [0, 1]."""
    if n_bins < 1:
        raise EvalError(f"bins: must be at least 1, got {n_bins}", key="bins")
    return (np.arange(n_bins) + 0.5) / n_bins


def _bin_weights(bins: NDArray[np.float64], weights: ArrayLike | None) -> NDArray[np.float64]:
    if weights is None:
        return np.full(bins.size, 1.0 / bins.size)
    w = np.asarray(weights, dtype=float)
    if w.shape != bins.shape or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-9:
        raise EvalError(
            "bin_weights: one non-negative ν weight per bin, summing to 1", key="bin_weights"
        )
    return w


def _sup_admissible(
    mean_quality: NDArray[np.float64],
    mean_interventions: NDArray[np.float64],
    bins: NDArray[np.float64],
    h_max: float,
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """sup over admissible policies per bin; inputs (P, …) → q* (…, K), admissible counts (…, K)."""
    budget = (1.0 - bins) * h_max  # H_max(a_j), shape (K,)
    ok = mean_interventions[..., None] <= budget + 1e-12  # (P, …, K)
    q = np.where(ok, mean_quality[..., None], -np.inf).max(axis=0)
    # no admissible policy: nothing can be delegated at that demand; quality 0 on the frontier
    return np.where(np.isfinite(q), q, 0.0), ok.sum(axis=0)


def frontier_quality(
    mean_quality: ArrayLike, mean_interventions: ArrayLike, bins: ArrayLike, h_max: float
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Frontier q*(a_j) = sup_{π ∈ Π(a_j)} E[Q(π)], Π(a) = {π : E[H(π)] ≤ (1 − a) h_max}, eq. (38),
    on autonomy bins, made non-increasing in a by isotonic regression.

    Args:
        mean_quality: E[Q] per policy, shape (P,).
        mean_interventions: E[H] per policy (interventions or assistance cost), shape (P,).
        bins: autonomy demands a_j ∈ [0, 1], increasing, shape (K,).
        h_max: maximal allowance h_max > 0.
    Returns:
        (q* of shape (K,), number of admissible policies per bin (K,)); q* = 0 where no policy
        is admissible.
    """
    q = np.asarray(mean_quality, dtype=float)
    h = np.asarray(mean_interventions, dtype=float)
    a = np.asarray(bins, dtype=float)
    if q.ndim != 1 or q.shape != h.shape or q.size == 0:
        raise EvalError("policies: one mean quality and one mean intervention each", key="policies")
    if not h_max > 0:
        raise EvalError(f"h_max: must be positive, got {h_max}", key="h_max")
    if np.any((a < 0) | (a > 1)) or np.any(np.diff(a) <= 0):
        raise EvalError("bins: autonomy demands must be increasing within [0, 1]", key="bins")
    q_star, counts = _sup_admissible(q, h, a, h_max)
    # Π(a) shrinks as a grows, so the exact sup is already non-increasing; the isotonic fit
    # matters for noisy per-bin estimates and is a no-op otherwise.
    fitted = isotonic_regression(q_star, increasing=False).x
    return np.asarray(fitted, dtype=float), counts


def fraction_delegable(
    q_star: ArrayLike, target: float, bin_weights: ArrayLike | None = None
) -> NDArray[np.float64] | float:
    """FD_Q* = ∫ 1{q*(a) ≥ Q*} dν(a) over the bins, eq. (40) (ν uniform by default).

    Args:
        q_star: q*(a_j), shape (K,) or (B, K) for bootstrap rows.
        target: Q*.
        bin_weights: ν per bin, shape (K,).
    Returns:
        FD, a float for one frontier or shape (B,).
    """
    q = np.asarray(q_star, dtype=float)
    w = _bin_weights(np.zeros(q.shape[-1]), bin_weights)
    out = np.sum((q >= target) * w, axis=-1)
    return float(out) if out.ndim == 0 else out


def area_under_frontier(
    q_star: ArrayLike, target: float, bin_weights: ArrayLike | None = None
) -> NDArray[np.float64] | float:
    """AUF_Q* = ∫ (q*(a) − Q*)₊ dν(a) over the bins, eq. (41).

    Args:
        q_star: q*(a_j), shape (K,) or (B, K).
        target: Q*.
        bin_weights: ν per bin, shape (K,).
    Returns:
        AUF, a float for one frontier or shape (B,).
    """
    q = np.asarray(q_star, dtype=float)
    w = _bin_weights(np.zeros(q.shape[-1]), bin_weights)
    out = np.sum(np.maximum(q - target, 0.0) * w, axis=-1)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class DelegabilityFrontier:
    """q*(a) on bins with FD and AUF and their block-bootstrap bands (§6).

    Attributes:
        bins: a_j, shape (K,).
        q_star: q*(a_j), shape (K,).
        admissible: admissible policies per bin, shape (K,).
        target: Q*.
        fd, auf: eqs. (40)–(41) with intervals.
        auf_replicates: bootstrap replicates of AUF, shape (B,) (for ΔF bands).
    """

    bins: NDArray[np.float64]
    q_star: NDArray[np.float64]
    admissible: NDArray[np.intp]
    target: float
    fd: Estimate
    auf: Estimate
    auf_replicates: NDArray[np.float64] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "bins": self.bins.tolist(),
            "q_star": self.q_star.tolist(),
            "admissible_policies": self.admissible.tolist(),
            "FD": self.fd.to_json(),
            "AUF": self.auf.to_json(),
        }


def delegability_frontier(
    quality: ArrayLike,
    interventions: ArrayLike,
    *,
    target: float,
    h_max: float,
    n_bins: int = 20,
    bin_weights: ArrayLike | None = None,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    block_length: int | None = None,
) -> DelegabilityFrontier:
    """Estimate q*(a), FD and AUF from matched policy runs, with block-bootstrap bands (§6).

    Args:
        quality: Q(π; t, s, δ), shape (P policies, n draws); the same draws for every policy,
            in time order.
        interventions: H(π; t, s, δ), shape (P, n).
        target: Q*.
        h_max: maximal intervention allowance.
        n_bins: K autonomy bins (midpoints).
        bin_weights: ν per bin (default uniform).
        rng: explicit generator (None: point estimates only).
        level: two-sided confidence level.
        n_resamples: B.
        block_length: draws per block (default ⌈n^(1/3)⌉).
    Returns:
        DelegabilityFrontier.
    """
    check_level(level)
    q = np.asarray(quality, dtype=float)
    h = np.asarray(interventions, dtype=float)
    if q.ndim != 2 or q.shape != h.shape or q.shape[1] == 0:
        raise EvalError("quality, interventions: matching (policies × draws) tables", key="quality")
    bins = autonomy_bins(n_bins)
    w = _bin_weights(bins, bin_weights)
    q_star, counts = frontier_quality(q.mean(axis=1), h.mean(axis=1), bins, h_max)
    fd = float(fraction_delegable(q_star, target, w))
    auf = float(area_under_frontier(q_star, target, w))
    n = q.shape[1]
    if rng is None:
        return DelegabilityFrontier(
            bins,
            q_star,
            counts,
            target,
            Estimate(fd, None, None, level, "point (no rng)", n),
            Estimate(auf, None, None, level, "point (no rng)", n),
        )
    idx = block_indices(n, n_resamples, rng, block_length)
    qb = q[:, idx].mean(axis=2)  # (P, B)
    hb = h[:, idx].mean(axis=2)
    q_rows, _ = _sup_admissible(qb, hb, bins, h_max)  # (B, K), non-increasing per row
    fd_reps = np.asarray(fraction_delegable(q_rows, target, w))
    auf_reps = np.asarray(area_under_frontier(q_rows, target, w))
    method = "block bootstrap over draws"
    return DelegabilityFrontier(
        bins,
        q_star,
        counts,
        target,
        percentile_estimate(fd, fd_reps, level=level, method=method, n=n),
        percentile_estimate(auf, auf_reps, level=level, method=method, n=n),
        auf_reps,
    )


def frontier_shift(later: DelegabilityFrontier, earlier: DelegabilityFrontier) -> Estimate:
    """Frontier shift ΔF_Q*(τ₁, τ₀) = AUF_Q*(τ₁) − AUF_Q*(τ₀) (§6), with a band from the
    difference of independent bootstrap replicates when both carry them."""
    if later.target != earlier.target:
        raise EvalError("frontier_shift: both frontiers need the same Q*", key="target")
    assert later.auf.value is not None and earlier.auf.value is not None
    delta = later.auf.value - earlier.auf.value
    if later.auf_replicates is None or earlier.auf_replicates is None:
        return Estimate(delta, None, None, later.auf.level, "difference of AUF (point)")
    m = min(later.auf_replicates.size, earlier.auf_replicates.size)
    reps = later.auf_replicates[:m] - earlier.auf_replicates[:m]
    return percentile_estimate(
        delta, reps, level=later.auf.level, method="difference of independent block bootstraps", n=m
    )


# --- quality frontier F(τ), eq. (37) ----------------------------------------------------------


def _task_weights(tasks: NDArray[Any], weights: dict[str, float] | None) -> dict[Any, float]:
    names = list(dict.fromkeys(tasks.tolist()))
    if weights is None:
        return dict.fromkeys(names, 1.0 / len(names))
    if set(weights) != set(names) or abs(sum(weights.values()) - 1.0) > 1e-9:
        raise EvalError("task_weights: one ω_t per task, summing to 1", key="task_weights")
    return {t: float(weights[t]) for t in names}


def quality_frontier(
    qualities: ArrayLike,
    tasks: ArrayLike,
    tau: ArrayLike,
    task_weights: dict[str, float] | None = None,
) -> NDArray[np.float64] | float:
    """Autonomy–quality frontier F(τ) = Σ_t ω_t E_{(s,δ)}[1{q(t, s, δ) ≥ τ}], eq. (37).

    Args:
        qualities: q per run, shape (n,).
        tasks: task id per run, shape (n,).
        tau: quality threshold(s), scalar or shape (m,).
        task_weights: ω_t (default uniform over tasks).
    Returns:
        F(τ), same shape as `tau`.
    """
    q = np.asarray(qualities, dtype=float)
    t = np.asarray(tasks)
    if q.ndim != 1 or q.shape != t.shape or q.size == 0:
        raise EvalError("qualities, tasks: one task id per quality", key="tasks")
    w = _task_weights(t, task_weights)
    taus = np.atleast_1d(np.asarray(tau, dtype=float))
    out = np.zeros(taus.size)
    for task, wt in w.items():
        qt = q[t == task]
        out += wt * np.mean(qt[:, None] >= taus[None, :], axis=0)
    return float(out[0]) if np.ndim(tau) == 0 else out


def quality_frontier_area(
    qualities: ArrayLike, tasks: ArrayLike, task_weights: dict[str, float] | None = None
) -> float:
    """AUF := ∫₀¹ F(τ) dτ for eq. (37). For q ∈ [0, 1], ∫₀¹ 1{q ≥ τ} dτ = q, so the area is
    exactly Σ_t ω_t E[q(t, ·)]."""
    q = np.asarray(qualities, dtype=float)
    t = np.asarray(tasks)
    if q.ndim != 1 or q.shape != t.shape or q.size == 0:
        raise EvalError("qualities, tasks: one task id per quality", key="tasks")
    if np.any((q < 0) | (q > 1)):
        raise EvalError("qualities: must lie in [0, 1]", key="qualities")
    w = _task_weights(t, task_weights)
    return float(sum(wt * np.mean(q[t == task]) for task, wt in w.items()))


def quality_frontier_shift(
    model_b: tuple[ArrayLike, ArrayLike],
    model_a: tuple[ArrayLike, ArrayLike],
    tau_star: float,
    task_weights: dict[str, float] | None = None,
) -> float:
    """ΔF := F(τ*)_model B − F(τ*)_model A at a published target quality τ* (eq. (37)).

    Args:
        model_b, model_a: (qualities, tasks) of each model.
        tau_star: τ*.
    """
    fb = quality_frontier(model_b[0], model_b[1], tau_star, task_weights)
    fa = quality_frontier(model_a[0], model_a[1], tau_star, task_weights)
    return float(fb) - float(fa)


def quality_frontier_estimate(
    qualities: ArrayLike,
    tasks: ArrayLike,
    tau_star: float,
    rng: np.random.Generator,
    *,
    task_weights: dict[str, float] | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    block_length: int | None = None,
) -> tuple[Estimate, Estimate]:
    """F(τ*) and its area (eq. (37)) with block-bootstrap intervals over runs in time order.

    Returns:
        (F(τ*), AUF) as Estimates. A resample that loses a task entirely keeps the weights of the
        tasks it has, renormalized.
    """
    check_level(level)
    q = np.asarray(qualities, dtype=float)
    t = np.asarray(tasks)
    f_point = float(quality_frontier(q, t, tau_star, task_weights))
    a_point = quality_frontier_area(q, t, task_weights)
    w = _task_weights(t, task_weights)
    idx = block_indices(q.size, n_resamples, rng, block_length)
    f_reps = np.empty(n_resamples)
    a_reps = np.empty(n_resamples)
    for b, row in enumerate(idx):
        qb, tb = q[row], t[row]
        present = set(tb.tolist())
        total = sum(v for k, v in w.items() if k in present)
        wb = {k: v / total for k, v in w.items() if k in present}
        f_reps[b] = float(quality_frontier(qb, tb, tau_star, wb))
        a_reps[b] = quality_frontier_area(qb, tb, wb)
    method = "block bootstrap over runs"
    return (
        percentile_estimate(f_point, f_reps, level=level, method=method, n=q.size),
        percentile_estimate(a_point, a_reps, level=level, method=method, n=q.size),
    )
