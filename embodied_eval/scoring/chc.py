"""CHC-core gates (§4.5, eq. (33)): verified-retrieval precision VRP@k, hallucination rate
Hall@k, working-memory span and delayed recall, required before promotion to AAI-2/3; and the
optional cognitive-core score of eq. (36).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from embodied_eval.errors import EvalError
from embodied_eval.scoring.gate_checks import (
    GateCheck,
    GateResult,
    Verdict,
    check_at_least,
    check_at_most,
)
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES, check_level, percentile_estimate
from embodied_eval.stats.estimate import Estimate

#: The cognitive core 𝒞𝒞 of eq. (36).
CORE_DOMAINS = ("Gc", "Grw", "Gf", "Gwm", "Gls", "Glr")


def verified_retrieval_precision(verifications: ArrayLike) -> float:
    """VRP@k = (1/n) Σ_t (1/k) Σ_j y_{t,j}, eq. (33) (Hall@k = 1 − VRP@k).

    Args:
        verifications: binary y_{t,j} of the top-k retrieved items, shape (n_items, k).
    """
    y = np.asarray(verifications, dtype=float)
    if y.ndim != 2 or y.size == 0 or not np.all((y == 0) | (y == 1)):
        raise EvalError("verifications: expected an n × k table of 0/1", key="verifications")
    return float(np.mean(np.mean(y, axis=1)))


def retrieval_fidelity(
    verifications: ArrayLike,
    *,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> tuple[Estimate, Estimate]:
    """VRP@k and Hall@k = 1 − VRP@k with a bootstrap interval over scored items (eq. (33)).

    Returns:
        (VRP@k, Hall@k) as Estimates (point only without `rng`).
    """
    check_level(level)
    y = np.asarray(verifications, dtype=float)
    vrp = verified_retrieval_precision(y)
    n = y.shape[0]
    if rng is None:
        v = Estimate(vrp, None, None, level, "point (no rng)", n)
        return v, Estimate(1.0 - vrp, None, None, level, "point (no rng)", n)
    per_item = y.mean(axis=1)
    reps = per_item[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    v = percentile_estimate(vrp, reps, level=level, method="percentile bootstrap over items", n=n)
    assert v.low is not None and v.high is not None
    hall = Estimate(1.0 - vrp, 1.0 - v.high, 1.0 - v.low, level, v.method, n)
    return v, hall


def working_memory_span(
    accuracy_by_length: Mapping[str, Mapping[int, float]], theta: float
) -> float:
    """WM-Span: the largest list length L with accuracy ≥ θ, median over seeds (§4.5).

    Args:
        accuracy_by_length: per seed, {list length L: accuracy}.
        theta: accuracy criterion θ.
    Returns:
        Median over seeds of the largest passing L (0 for a seed where none passes).
    """
    if not accuracy_by_length:
        raise EvalError("wm_span: no seed given", key="wm_span")
    spans = [
        max((L for L, acc in by_len.items() if acc >= theta), default=0)
        for by_len in accuracy_by_length.values()
    ]
    return float(np.median(spans))


def delayed_recall(recalled: ArrayLike) -> float:
    """Delayed-Recall: the fraction of designated items recalled after the fixed delay (§4.5)."""
    r = np.asarray(recalled, dtype=float)
    if r.ndim != 1 or r.size == 0 or not np.all((r == 0) | (r == 1)):
        raise EvalError("recalled: expected a flat list of 0/1", key="recalled")
    return float(np.mean(r))


def cognitive_core_score(domain_scores: Mapping[str, float]) -> float:
    """AAI_core: equal-weight geometric mean (eq. (34) with w_i = 1/6) over the cognitive core
    {Gc, Grw, Gf, Gwm, Gls, Glr}, eq. (36)."""
    missing = [d for d in CORE_DOMAINS if d not in domain_scores]
    if missing:
        raise EvalError(
            f"chc.core.{missing[0]}: missing core domain score", key=f"chc.core.{missing[0]}"
        )
    v = np.array([float(domain_scores[d]) for d in CORE_DOMAINS])
    if np.any((v < 0) | (v > 1)):
        raise EvalError("chc.core: domain scores must lie in [0, 1]", key="chc.core")
    return 0.0 if np.any(v == 0) else float(np.exp(np.mean(np.log(v))))


@dataclass(frozen=True)
class ChcThresholds:
    """Thresholds of eq. (33): τ_v = 0.85, τ_h = 0.05 by default; τ_w and τ_ms are the human
    medians of the suite's tasks and have no default (None ⇒ those checks are evidence_missing).
    `core_min` is γ of eq. (36); the AAI-3 promotion gate on AAI_core applies only when it is
    published."""

    vrp: float = 0.85
    hallucination: float = 0.05
    wm_span: float | None = None
    delayed_recall: float | None = None
    core_min: float | None = None


def chc_core_gates(
    *,
    vrp: Estimate | None,
    hallucination: Estimate | None,
    wm_span: Estimate | None,
    recall: Estimate | None,
    thresholds: ChcThresholds = ChcThresholds(),
    name: str = "CHC core (eq. 33)",
) -> GateResult:
    """CHC-core promotion gates, eq. (33): VRP@k ≥ τ_v, Hall@k ≤ τ_h, WM-Span ≥ τ_w,
    Delayed-Recall ≥ τ_ms."""

    def at_least(label: str, est: Estimate | None, thr: float | None) -> GateCheck:
        if thr is None:
            return GateCheck(
                label,
                Verdict.EVIDENCE_MISSING,
                None,
                ">=",
                value=None if est is None else est.value,
                detail="threshold (human median) not published",
            )
        return check_at_least(f"{label} ≥ {thr:g}", est, thr)

    checks = [
        at_least("VRP@k", vrp, thresholds.vrp),
        check_at_most(
            f"Hall@k ≤ {thresholds.hallucination:g}", hallucination, thresholds.hallucination
        ),
        at_least("WM-Span", wm_span, thresholds.wm_span),
        at_least("Delayed-Recall", recall, thresholds.delayed_recall),
    ]
    return GateResult(name, tuple(checks))
