"""`Estimate`: the value every reported number carries (point, bounds, level, method, n, sided)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError

SIDED = ("two", "lower", "upper")


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval.

    Attributes:
        value: the point estimate (may be None when undefined, e.g. no episodes).
        low, high: interval bounds (a one-sided `lower` interval has high = +inf or the natural
            maximum; a one-sided `upper` interval has low = 0 or the natural minimum).
        level: confidence level, e.g. 0.95.
        method: the method's name as printed in reports, e.g. "Clopper-Pearson", "Garwood exact".
        n: the sample size the estimate rests on (episodes, events, clusters: see `method`).
        sided: "two", "lower" (only `low` is a confidence bound) or "upper".
        note: free text for the report (e.g. "0 observed; upper bound only").
    """

    value: float | None
    low: float | None
    high: float | None
    level: float
    method: str
    n: int = 0
    sided: str = "two"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.sided not in SIDED:
            raise EvalError(f"sided: {self.sided!r} is not one of {', '.join(SIDED)}", key="sided")
        if not 0.0 < self.level < 1.0:
            raise EvalError(f"level: {self.level} must be between 0 and 1", key="level")

    def to_json(self) -> dict[str, Any]:
        """The JSON form used by every `--json` output: value, low, high, level, method, n."""

        def clean(x: float | None) -> float | None:
            if x is None or (isinstance(x, float) and math.isnan(x)):
                return None
            if isinstance(x, float) and math.isinf(x):
                return None
            return float(x)

        out: dict[str, Any] = {
            "value": clean(self.value),
            "low": clean(self.low),
            "high": clean(self.high),
            "level": self.level,
            "method": self.method,
            "n": int(self.n),
        }
        if self.sided != "two":
            out["sided"] = self.sided
        if self.note:
            out["note"] = self.note
        return out

    def format(self, digits: int = 3) -> str:
        """Human form: `0.750 [0.628, 0.842] (95 % Wilson, n=60)`."""

        def f(x: float | None) -> str:
            if x is None or (isinstance(x, float) and math.isnan(x)):
                return "—"
            if isinstance(x, float) and math.isinf(x):
                return "∞"
            return f"{x:.{digits}f}"

        pct = f"{self.level * 100:g} %"
        return f"{f(self.value)} [{f(self.low)}, {f(self.high)}] ({pct} {self.method}, n={self.n})"
