"""Readers of evidence fields: objects, numbers, booleans, strings, lists and quantities with
intervals. Every problem raises `EvalError` naming the JSON key path.

A quantity is a bare number (a point value, no interval) or an object {"value", "low", "high",
"level" (0.95), "method", "n", "sided" ("two"), "note"}.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.input_files import read_user_json
from embodied_eval.stats.estimate import SIDED, Estimate

ESTIMATE_KEYS = ("value", "low", "high", "level", "method", "n", "sided", "note")


def load_evidence(path: str | Path) -> dict[str, Any]:
    """Read an evidence JSON file (EvalError on a missing file or bad JSON)."""
    p = Path(path)
    data = read_user_json(p, "evidence file")
    if not isinstance(data, dict):
        raise EvalError(f"{p}: the evidence must be a JSON object", key="evidence")
    return data


def mapping(obj: Any, key: str, allowed: Sequence[str] | None = None) -> Mapping[str, Any]:
    """A JSON object at `key`, optionally restricted to `allowed` member names."""
    if not isinstance(obj, Mapping):
        raise EvalError(f"{key}: expected an object", key=key)
    if allowed is not None:
        for k in obj:
            if k not in allowed:
                raise EvalError(
                    f"{key}.{k}: unknown key (expected one of {', '.join(allowed)})",
                    key=f"{key}.{k}",
                )
    return obj


def number(obj: Any, key: str, *, low: float | None = None, high: float | None = None) -> float:
    """A finite JSON number at `key`, optionally within [low, high]."""
    if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not math.isfinite(obj):
        raise EvalError(f"{key}: expected a finite number, got {obj!r}", key=key)
    if (low is not None and obj < low) or (high is not None and obj > high):
        raise EvalError(f"{key}: {obj} must lie in [{low}, {high}]", key=key)
    return float(obj)


def boolean(obj: Any, key: str) -> bool:
    if not isinstance(obj, bool):
        raise EvalError(f"{key}: expected true or false, got {obj!r}", key=key)
    return obj


def string(obj: Any, key: str) -> str:
    if not isinstance(obj, str) or not obj:
        raise EvalError(f"{key}: expected a non-empty string", key=key)
    return obj


def estimate(
    obj: Any, key: str, *, low: float | None = None, high: float | None = None
) -> Estimate:
    """A quantity: a bare number or {"value", "low", "high", "level", "method", "n", "sided"}."""
    if not isinstance(obj, Mapping):
        v = number(obj, key, low=low, high=high)
        return Estimate(v, None, None, 0.95, "reported (point)", 0)
    m = mapping(obj, key, ESTIMATE_KEYS)
    if "value" not in m:
        raise EvalError(f"{key}.value: missing", key=f"{key}.value")
    v = number(m["value"], f"{key}.value", low=low, high=high)
    lo = None if m.get("low") is None else number(m["low"], f"{key}.low")
    hi = None if m.get("high") is None else number(m["high"], f"{key}.high")
    for bound, bk in ((lo, "low"), (hi, "high")):
        if bound is not None and (
            (low is not None and bound < low) or (high is not None and bound > high)
        ):
            raise EvalError(f"{key}.{bk}: {bound} must lie in [{low}, {high}]", key=f"{key}.{bk}")
    if lo is not None and lo > v:
        raise EvalError(f"{key}.low: {lo} is above the value {v}", key=f"{key}.low")
    if hi is not None and hi < v:
        raise EvalError(f"{key}.high: {hi} is below the value {v}", key=f"{key}.high")
    level = number(m.get("level", 0.95), f"{key}.level", low=0.0, high=1.0)
    if not 0.0 < level < 1.0:
        raise EvalError(
            f"{key}.level: {level} must lie strictly between 0 and 1", key=f"{key}.level"
        )
    sided = m.get("sided", "two")
    if sided not in SIDED:
        raise EvalError(
            f"{key}.sided: {sided!r} is not one of {', '.join(SIDED)}", key=f"{key}.sided"
        )
    n = m.get("n", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise EvalError(f"{key}.n: expected a non-negative integer", key=f"{key}.n")
    method = m.get("method", "reported")
    if not isinstance(method, str):
        raise EvalError(f"{key}.method: expected a string", key=f"{key}.method")
    note = m.get("note", "")
    return Estimate(v, lo, hi, level, method, n, sided, str(note))


#: Longest list of numbers (bootstrap replicates) an evidence file may carry.
MAX_NUMBERS = 1_000_000


def number_list(obj: Any, key: str) -> list[float]:
    if not isinstance(obj, list) or not obj:
        raise EvalError(f"{key}: expected a non-empty list of numbers", key=key)
    if len(obj) > MAX_NUMBERS:
        raise EvalError(f"{key}: {len(obj)} numbers; at most {MAX_NUMBERS}", key=key)
    return [number(x, f"{key}[{i}]") for i, x in enumerate(obj)]


def string_list(obj: Any, key: str) -> tuple[str, ...]:
    if not isinstance(obj, list):
        raise EvalError(f"{key}: expected a list of strings", key=key)
    return tuple(string(x, f"{key}[{i}]") for i, x in enumerate(obj))
