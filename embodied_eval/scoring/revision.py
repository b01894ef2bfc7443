"""Self-Revision axis R (eq. (10)): difference-in-differences per autonomous revision event,
stage autonomy ρ_r, the event filters and the scaling anchor Z.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.scoring.calibration import IDENTITY, Anchors, AxisScore, axis_from_raw
from embodied_eval.scoring.resampling import DEFAULT_RESAMPLES, percentile_estimate
from embodied_eval.stats.estimate import Estimate

#: Default stage weights (α_P, α_I, α_V) for propose, implement, validate (§3.1 R).
EQUAL_STAGE_WEIGHTS = (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0)


def difference_in_differences(
    treated_post: float, treated_pre: float, control_post: float, control_pre: float
) -> float:
    """Debiased capability delta ΔC = (C_post − C_pre) − (C_ctrl,post − C_ctrl,pre).

    The difference-in-differences of §3.1 R (ΔC_r) and of the §3.4 ablation check (ΔC_DiD).
    Example (§3.1): (0.84 − 0.78) − (0.80 − 0.78) = 0.04.
    """
    return (treated_post - treated_pre) - (control_post - control_pre)


def stage_autonomy(
    propose: float,
    implement: float,
    validate: float,
    weights: tuple[float, float, float] = EQUAL_STAGE_WEIGHTS,
) -> float:
    """Autonomy factor ρ_r = α_P a_P + α_I a_I + α_V a_V ∈ [0, 1] (§3.1 R).

    Args:
        propose: a_P, 1 if the change was agent-initiated else 0.
        implement: a_I, fraction of edits/actions executed automatically.
        validate: a_V, fraction of acceptance checks fully automated.
        weights: (α_P, α_I, α_V), non-negative, summing to 1.
    """
    fractions = (propose, implement, validate)
    for name, v in zip(("propose", "implement", "validate"), fractions, strict=False):
        if not 0.0 <= v <= 1.0:
            raise EvalError(f"{name}: stage autonomy {v} must lie in [0, 1]", key=name)
    if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
        raise EvalError(f"stage weights {weights} must be non-negative and sum to 1", key="weights")
    return float(sum(w * a for w, a in zip(weights, fractions, strict=False)))


@dataclass(frozen=True)
class RevisionEvent:
    """One autonomous revision event r with its matched-holdout evaluations (§3.1 R).

    Give either `autonomy` (ρ_r directly) or `stages` (a_P, a_I, a_V). The four filter flags
    default to False: an event counts only once each is attested (missing evidence never passes).
    """

    name: str
    rev_pre: float
    rev_post: float
    ctrl_pre: float
    ctrl_post: float
    autonomy: float | None = None
    stages: tuple[float, float, float] | None = None
    matched_holdout: bool = False
    resource_parity: bool = False
    artifacts_logged: bool = False
    human_labels: bool = False

    def rho(self, weights: tuple[float, float, float] = EQUAL_STAGE_WEIGHTS) -> float:
        """ρ_r of this event."""
        if (self.autonomy is None) == (self.stages is None):
            raise EvalError(
                f"revision event {self.name!r}: give exactly one of autonomy or stages",
                key="autonomy",
            )
        if self.autonomy is not None:
            if not 0.0 <= self.autonomy <= 1.0:
                raise EvalError(
                    f"revision event {self.name!r}: autonomy {self.autonomy} must lie in [0, 1]",
                    key="autonomy",
                )
            return float(self.autonomy)
        assert self.stages is not None
        return stage_autonomy(*self.stages, weights=weights)

    def delta(self) -> float:
        """ΔC_r, the event's difference-in-differences."""
        return difference_in_differences(self.rev_post, self.rev_pre, self.ctrl_post, self.ctrl_pre)

    def exclusion_reasons(self) -> list[str]:
        """Why the event fails the window filters (empty when it passes)."""
        reasons = []
        if not self.matched_holdout:
            reasons.append("no matched pre/post holdout")
        if not self.resource_parity:
            reasons.append("no resource parity")
        if not self.artifacts_logged:
            reasons.append("diffs/seeds/checksums not logged")
        if self.human_labels:
            reasons.append("disqualifying human labels")
        return reasons


def self_revision_statistic(deltas: Sequence[float], rhos: Sequence[float], scale: float) -> float:
    """Self-revision R̂ = clip((1/Z) Σ_r ρ_r max(ΔC_r, 0), 0, 1), eq. (10).

    Args:
        deltas: ΔC_r of the events that passed the filters, shape (n_events,).
        rhos: ρ_r of the same events, shape (n_events,).
        scale: Z > 0, the scaling anchor (e.g. target cumulative gain).
    """
    if not scale > 0:
        raise EvalError(f"scale: Z must be positive, got {scale}", key="Z")
    d = np.asarray(deltas, dtype=float)
    r = np.asarray(rhos, dtype=float)
    if d.shape != r.shape:
        raise EvalError("deltas, rhos: one of each per event is needed", key="events")
    return float(np.clip(np.sum(r * np.maximum(d, 0.0)) / scale, 0.0, 1.0))


def self_revision(
    events: Sequence[RevisionEvent] | None = None,
    *,
    scale: float | None = None,
    stage_weights: tuple[float, float, float] = EQUAL_STAGE_WEIGHTS,
    raw: Estimate | float | None = None,
    anchors: Anchors = IDENTITY,
    rng: np.random.Generator | None = None,
    level: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AxisScore:
    """Self-Revision axis R = φ_R(R̂) over the window's events (eq. (10)), or a pre-computed R̂.

    Events failing a filter are kept in the breakdown with their reasons and left out of the sum.
    With `rng`, the interval resamples the passing events.

    Args:
        events: revision events in the reporting window.
        scale: Z.
        stage_weights: (α_P, α_I, α_V).
        raw: pre-computed R̂.
        anchors: (L_R, U_R).
        rng: explicit generator for the interval (None: point only).
    Returns:
        AxisScore; breakdown["events"] lists ΔC_r, ρ_r, contribution ρ_r·max(ΔC_r, 0), included.
    """
    if raw is not None:
        return axis_from_raw("R", raw, anchors)
    if events is None or scale is None:
        raise EvalError("self_revision: give events and scale (Z), or raw", key="R")
    rows: list[dict[str, Any]] = []
    deltas: list[float] = []
    rhos: list[float] = []
    for ev in events:
        delta, rho = ev.delta(), ev.rho(stage_weights)
        reasons = ev.exclusion_reasons()
        rows.append(
            {
                "name": ev.name,
                "delta": delta,
                "rho": rho,
                "contribution": rho * max(delta, 0.0),
                "included": not reasons,
                "excluded_because": reasons,
            }
        )
        if not reasons:
            deltas.append(delta)
            rhos.append(rho)
    point = self_revision_statistic(deltas, rhos, scale)
    breakdown = {
        "events": rows,
        "scale": float(scale),
        "n_included": len(deltas),
        "sum_contributions": float(
            sum(r * max(d, 0.0) for d, r in zip(deltas, rhos, strict=False))
        ),
    }
    if rng is None or not deltas:
        est = Estimate(point, None, None, level, "point (no rng, no interval)", len(deltas))
        return axis_from_raw("R", est, anchors, breakdown=breakdown)
    d, r = np.asarray(deltas), np.asarray(rhos)
    idx = rng.integers(0, d.size, size=(n_resamples, d.size))
    reps = np.clip(np.sum(r[idx] * np.maximum(d[idx], 0.0), axis=1) / scale, 0.0, 1.0)
    est = percentile_estimate(
        point, reps, level=level, method="percentile bootstrap over events", n=d.size
    )
    return axis_from_raw("R", est, anchors, breakdown=breakdown, raw_replicates=reps)
