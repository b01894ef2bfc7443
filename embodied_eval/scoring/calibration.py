"""Calibration φ_x (eq. (1)) and the `AxisScore` every axis functional returns.

Each axis x ∈ {A, G, P, M, T, R, S, E, W, $} is a raw statistic x̂ (eqs. (2)–(11) and the S, E, W
definitions) mapped to [0, 1] by φ_x with published anchors (L_x, U_x). The raw x̂ is always kept
next to x so reports can show it before φ (§3.2 "Reporting").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from embodied_eval.errors import EvalError
from embodied_eval.stats.estimate import Estimate

#: The ten axes in the seed's order (§3.1).
AXES: tuple[str, ...] = ("A", "G", "P", "M", "T", "R", "S", "E", "W", "$")

AXIS_NAMES: dict[str, str] = {
    "A": "Autonomy",
    "G": "Generality",
    "P": "Planning depth",
    "M": "Memory/Persistence",
    "T": "Tool Economy",
    "R": "Self-Revision",
    "S": "Sociality/Coordination",
    "E": "Embodiment/Actuation",
    "W": "World-Model Fidelity",
    "$": "Economic Throughput",
}


def check_axis(axis: str) -> str:
    """Return `axis` if it is one of the ten axis symbols, else raise EvalError."""
    if axis not in AXES:
        raise EvalError(f"axis {axis!r} is not one of {' '.join(AXES)}", key=axis)
    return axis


@dataclass(frozen=True)
class Anchors:
    """Published anchors (L_x, U_x) of φ_x: L a strong baseline, U a reference target (§3.2)."""

    low: float
    high: float
    source: str = "published"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise EvalError(f"anchors must be finite numbers, got L={self.low}, U={self.high}")
        if not self.low < self.high:
            raise EvalError(f"anchors need L < U, got L={self.low}, U={self.high}", key="L")

    def to_json(self) -> dict[str, Any]:
        return {"L": self.low, "U": self.high, "source": self.source}


#: Identity anchors (0, 1): φ is then the clip to [0, 1]. Used only where the raw statistic is a
#: fraction in [0, 1] by definition and no anchors were published; reports say so.
IDENTITY = Anchors(0.0, 1.0, source="identity (raw statistic already in [0, 1])")


def calibrate(raw: ArrayLike, low: float, high: float) -> NDArray[np.float64] | float:
    """Calibration map φ_x(r) = clip((r − L_x)/(U_x − L_x), 0, 1), eq. (1).

    Args:
        raw: raw statistic(s) r, any shape.
        low: anchor L_x.
        high: anchor U_x (> L_x).
    Returns:
        Normalized value(s) in [0, 1], same shape as `raw` (a float for scalar input).
    """
    if not low < high:
        raise EvalError(f"anchors need L < U, got L={low}, U={high}", key="L")
    r = np.asarray(raw, dtype=float)
    out = np.clip((r - low) / (high - low), 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def calibrate_estimate(raw: Estimate, anchors: Anchors) -> Estimate:
    """Apply φ_x to a raw estimate and its bounds (φ is monotone, so bounds map to bounds)."""

    def phi(x: float | None) -> float | None:
        if x is None or math.isnan(x):
            return None
        if math.isinf(x):  # an open one-sided bound maps to the end of [0, 1]
            return 1.0 if x > 0 else 0.0
        return float(calibrate(x, anchors.low, anchors.high))

    return Estimate(
        phi(raw.value),
        phi(raw.low),
        phi(raw.high),
        raw.level,
        raw.method,
        raw.n,
        raw.sided,
        raw.note,
    )


def point_estimate(
    value: float | None, *, method: str = "point (no interval)", n: int = 0
) -> Estimate:
    """An Estimate that carries only a point value (no interval)."""
    return Estimate(None if value is None else float(value), None, None, 0.95, method, n)


@dataclass(frozen=True)
class AxisScore:
    """One axis: raw statistic x̂ (before φ), normalized x = φ_x(x̂), anchors and breakdown.

    Attributes:
        axis: axis symbol ("A" … "$").
        raw: x̂ with its interval, or None when only a normalized value was supplied.
        value: x ∈ [0, 1] with its interval.
        anchors: (L_x, U_x) used for φ_x, or None when `value` was supplied directly.
        breakdown: axis-specific detail for the report (per-family G, per-δ T, per-event R, ...).
        replicates: optional bootstrap replicates of the normalized value, shape (B,), used to
            resample the axis vector for the index interval.
    """

    axis: str
    raw: Estimate | None
    value: Estimate
    anchors: Anchors | None = None
    breakdown: dict[str, Any] = field(default_factory=dict)
    replicates: NDArray[np.float64] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_axis(self.axis)
        v = self.value.value
        if v is None or not (0.0 <= v <= 1.0) or math.isnan(v):
            raise EvalError(
                f"axes.{self.axis}: normalized value {v} must lie in [0, 1]",
                key=f"axes.{self.axis}",
            )

    @property
    def x(self) -> float:
        """The normalized value as a float."""
        assert self.value.value is not None
        return float(self.value.value)

    def to_json(self) -> dict[str, Any]:
        """JSON: raw and value as numbers, their intervals, anchors and breakdown."""
        raw_json = None if self.raw is None else self.raw.to_json()
        val_json = self.value.to_json()
        return {
            "axis": self.axis,
            "name": AXIS_NAMES[self.axis],
            "raw": None if raw_json is None else raw_json["value"],
            "raw_interval": None if raw_json is None else _interval(raw_json),
            "value": val_json["value"],
            "interval": _interval(val_json),
            "anchors": None if self.anchors is None else self.anchors.to_json(),
            "breakdown": self.breakdown,
        }


def _interval(est_json: dict[str, Any]) -> dict[str, Any] | None:
    if est_json["low"] is None and est_json["high"] is None:
        return None
    out = {k: est_json[k] for k in ("low", "high", "level", "method", "n")}
    for k in ("sided", "note"):
        if k in est_json:
            out[k] = est_json[k]
    return out


def axis_from_raw(
    axis: str,
    raw: Estimate | float,
    anchors: Anchors,
    *,
    breakdown: dict[str, Any] | None = None,
    raw_replicates: ArrayLike | None = None,
) -> AxisScore:
    """Build an axis from a pre-computed raw statistic x̂ (with its interval) and anchors.

    Args:
        axis: axis symbol.
        raw: x̂ as an Estimate (interval kept) or a bare float.
        anchors: (L_x, U_x) for φ_x, eq. (1).
        breakdown: axis-specific detail to report.
        raw_replicates: optional bootstrap replicates of x̂, shape (B,); mapped through φ_x.
    Returns:
        AxisScore with raw = x̂ and value = φ_x(x̂).
    """
    check_axis(axis)
    est = raw if isinstance(raw, Estimate) else point_estimate(float(raw))
    if est.value is None or not math.isfinite(est.value):
        raise EvalError(f"axes.{axis}: raw value is missing or not finite", key=f"axes.{axis}.raw")
    reps = None
    if raw_replicates is not None:
        reps = np.asarray(
            calibrate(np.asarray(raw_replicates, dtype=float), anchors.low, anchors.high)
        )
    return AxisScore(
        axis, est, calibrate_estimate(est, anchors), anchors, dict(breakdown or {}), reps
    )


def axis_from_value(
    axis: str,
    value: Estimate | float,
    *,
    breakdown: dict[str, Any] | None = None,
    replicates: ArrayLike | None = None,
) -> AxisScore:
    """Build an axis from an already-normalized value x ∈ [0, 1] (raw x̂ unknown, reported null)."""
    check_axis(axis)
    est = value if isinstance(value, Estimate) else point_estimate(float(value))
    reps = None if replicates is None else np.asarray(replicates, dtype=float)
    return AxisScore(axis, None, est, None, dict(breakdown or {}), reps)
