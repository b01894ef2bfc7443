"""Memory/Persistence axis M (eqs. (5)–(6)): retention curves q(Δ) per family, summarized by a
forgetting rate λ (exponential fit or empirical half-life, t½ = ln 2 / λ), combined with
retrieval recall@K, then the median across families.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from embodied_eval.errors import EvalError
from embodied_eval.scoring.axes import as_array
from embodied_eval.scoring.calibration import IDENTITY, Anchors, AxisScore, axis_from_raw
from embodied_eval.stats.estimate import Estimate

LN2 = math.log(2.0)


def exponential_forgetting_rate(lags: ArrayLike, qualities: ArrayLike) -> tuple[float, float]:
    """Fit q(Δ) ≈ q₀ e^(−λΔ) by least squares on log q (§3.1 M).

    Args:
        lags: inter-session lags Δ in days, shape (n,), at least two distinct values.
        qualities: retention q(Δ) > 0, shape (n,).
    Returns:
        (q₀, λ) with λ in 1/day. A fitted λ < 0 (retention rising) is reported as is; the
        retention score treats it as no forgetting.
    """
    d = as_array(lags, "lags", min_size=2)
    q = as_array(qualities, "qualities", min_size=2)
    if d.size != q.size:
        raise EvalError("qualities: one value per lag is needed", key="qualities")
    if np.any(q <= 0):
        raise EvalError(
            "qualities: the exponential fit needs q > 0 at every lag; use method='half-life'",
            key="qualities",
        )
    if np.unique(d).size < 2:
        raise EvalError("lags: the fit needs at least two distinct lags", key="lags")
    slope, intercept = np.polyfit(d, np.log(q), 1)
    return float(math.exp(intercept)), float(-slope)


def empirical_half_life(lags: ArrayLike, qualities: ArrayLike) -> tuple[float, bool]:
    """Empirical half-life t½ = inf{Δ : q(Δ) ≤ q₀/2} over the measured lags (§3.1 M).

    q₀ is the quality at the smallest lag. When no measured lag falls to q₀/2 the half-life is
    right-censored: the largest lag is returned with `censored = True`, which is conservative
    (the true t½ is at least that long).

    Args:
        lags: Δ in days, shape (n,).
        qualities: q(Δ), shape (n,).
    Returns:
        (t½ in days, censored).
    """
    d = as_array(lags, "lags", min_size=2)
    q = as_array(qualities, "qualities", min_size=2)
    if d.size != q.size:
        raise EvalError("qualities: one value per lag is needed", key="qualities")
    order = np.argsort(d, kind="stable")
    d, q = d[order], q[order]
    q0 = q[0]
    if q0 <= 0:
        raise EvalError("qualities: q at the first lag must be positive", key="qualities")
    below = np.flatnonzero(q <= q0 / 2.0)
    if below.size == 0:
        return float(d[-1]), True
    return float(d[below[0]]), False


def half_life_rate(half_life: float) -> float:
    """Forgetting rate from a half-life, λ = ln 2 / t½ (§3.1 M)."""
    if not half_life > 0:
        raise EvalError(f"half_life: must be positive, got {half_life}", key="half_life")
    return LN2 / half_life


def retention_score(rate: float, min_half_life: float) -> float:
    """Retention M̂₁ = exp(−λ/λ_max) with λ_max = ln 2 / t_min, eq. (5).

    t_min is the minimum acceptable half-life, so M̂₁ = e^(−1) ≈ 0.37 at t½ = t_min and
    e^(−1/2) ≈ 0.61 at t½ = 2 t_min. λ ≤ 0 (no forgetting) gives 1.

    Args:
        rate: λ in 1/day.
        min_half_life: t_min in days.
    """
    lam_max = half_life_rate(min_half_life)
    return float(math.exp(-max(rate, 0.0) / lam_max))


def recall_at_k(
    retrieved: Sequence[Sequence[Any]], relevant: Sequence[Sequence[Any]], k: int
) -> float:
    """Retrieval recall@K on logged facts/specs, M̂₂ of eq. (5).

    Args:
        retrieved: per query, the ranked retrieved items.
        relevant: per query, the relevant items (non-empty).
        k: cut-off K.
    Returns:
        Mean over queries of |top-K ∩ relevant| / |relevant|.
    """
    if k < 1:
        raise EvalError(f"k: must be at least 1, got {k}", key="k")
    if len(retrieved) != len(relevant) or not relevant:
        raise EvalError("retrieved, relevant: one list of each per query is needed", key="relevant")
    scores = []
    for i, (got, want) in enumerate(zip(retrieved, relevant, strict=False)):
        rel = set(want)
        if not rel:
            raise EvalError(
                f"relevant[{i}]: a query needs at least one relevant item", key="relevant"
            )
        scores.append(len(set(list(got)[:k]) & rel) / len(rel))
    return float(np.mean(scores))


def memory_statistic(retention: float, recall: float) -> float:
    """Memory M̂ = ½ (M̂₁ + M̂₂), eq. (6)."""
    for name, v in (("retention", retention), ("recall", recall)):
        if not 0.0 <= v <= 1.0:
            raise EvalError(f"{name}: {v} must lie in [0, 1]", key=name)
    return 0.5 * (retention + recall)


@dataclass(frozen=True)
class RetentionFamily:
    """Observables of one persistence family: a retention curve and a retrieval recall@K.

    Attributes:
        lags: Δ in days, shape (n,).
        qualities: q(Δ), shape (n,).
        recall: Rec@K on the family's logged facts, in [0, 1].
    """

    lags: Sequence[float]
    qualities: Sequence[float]
    recall: float


def memory(
    families: Mapping[str, RetentionFamily] | None = None,
    *,
    min_half_life: float | None = None,
    method: str = "fit",
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
) -> AxisScore:
    """Memory axis M = φ_M(median_F M̂(F)), eqs. (5)–(6), or from a pre-computed M̂.

    Args:
        families: retention observables per family.
        min_half_life: t_min in days (sets λ_max = ln 2 / t_min).
        method: "fit" (exponential fit) or "half-life" (empirical half-life).
        raw: pre-computed M̂.
        anchors: (L_M, U_M).
    Returns:
        AxisScore (point value: the median across families has no interval here); breakdown has
        λ, t½, M̂₁, M̂₂, M̂ per family and the longest lag tested (persistence days).
    """
    if raw is not None:
        return axis_from_raw("M", raw, anchors)
    if not families or min_half_life is None:
        raise EvalError("memory: give families and min_half_life, or raw", key="M")
    if method not in ("fit", "half-life"):
        raise EvalError(f"method: {method!r} is not 'fit' or 'half-life'", key="method")
    per_family: dict[str, dict[str, Any]] = {}
    for name, fam in families.items():
        entry: dict[str, Any] = {}
        if method == "fit":
            q0, lam = exponential_forgetting_rate(fam.lags, fam.qualities)
            entry.update(q0=q0, rate=lam, half_life=(LN2 / lam) if lam > 0 else math.inf)
        else:
            t_half, censored = empirical_half_life(fam.lags, fam.qualities)
            lam = half_life_rate(t_half)
            entry.update(rate=lam, half_life=t_half, censored=censored)
        m1 = retention_score(lam, min_half_life)
        entry.update(
            retention=m1,
            recall=float(fam.recall),
            memory=memory_statistic(m1, float(fam.recall)),
            longest_lag_days=float(np.max(fam.lags)),
        )
        if math.isinf(entry["half_life"]):
            entry["half_life"] = None  # infinite half-life: JSON has no ∞
        per_family[name] = entry
    point = float(np.median([e["memory"] for e in per_family.values()]))
    breakdown = {
        "families": per_family,
        "method": method,
        "min_half_life_days": float(min_half_life),
        "persistence_days": max(e["longest_lag_days"] for e in per_family.values()),
    }
    est = Estimate(point, None, None, 0.95, "median across families (point)", len(per_family))
    return axis_from_raw("M", est, anchors, breakdown=breakdown)
