"""Argument checks shared by the statistics modules (each raises `EvalError` with a one-line fix)."""

from __future__ import annotations

import math

from embodied_eval.errors import EvalError


def check_level(level: float) -> float:
    """Return `level` as float after checking 0 < level < 1."""
    level = float(level)
    if not 0.0 < level < 1.0 or math.isnan(level):
        raise EvalError(f"level: {level} must be between 0 and 1 (e.g. 0.95)", key="level")
    return level


def check_count(value: int, name: str) -> int:
    """Return a non-negative integer count (events, successes, trials)."""
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise EvalError(f"{name}: {value!r} must be a non-negative integer", key=name)
    return int(value)


def check_nonnegative(value: float, name: str) -> float:
    """Return a finite non-negative float (hours, exposure)."""
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise EvalError(f"{name}: {value!r} must be a finite number >= 0", key=name)
    return value


def check_positive(value: float, name: str) -> float:
    """Return a finite positive float (thresholds, scales)."""
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise EvalError(f"{name}: {value!r} must be a finite number > 0", key=name)
    return value
