"""Gate checks decided on confidence bounds (pass / inconclusive / fail / evidence missing).

A gate check compares an `Estimate` with a threshold. **pass** when the one-sided confidence bound
clears the threshold; **inconclusive** when the point estimate clears it but the bound does not
(the check then says how many more trials or hours would settle it, when known); **fail**
otherwise; **evidence_missing** when there is nothing to decide on. Missing evidence never passes.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from embodied_eval.stats.estimate import Estimate


class Verdict(str, Enum):
    PASS = "pass"
    INCONCLUSIVE = "inconclusive"
    FAIL = "fail"
    EVIDENCE_MISSING = "evidence_missing"


@dataclass(frozen=True)
class GateCheck:
    """One check of a gate, with the numbers it was decided on.

    `comparison` is ">=" (the lower bound must reach the threshold) or "<=" (the upper bound must
    stay at or below it). `remaining` holds the planner's answer for inconclusive checks, e.g.
    {"trials": 14} or {"hours": 179.6}. `id` is the stable machine name of the check
    (e.g. "aai2.e_min"), kept when the display name's wording or threshold changes.
    """

    name: str
    verdict: Verdict
    threshold: float | None = None
    comparison: str = ">="
    value: float | None = None
    bound: float | None = None
    detail: str = ""
    remaining: dict[str, float] = field(default_factory=dict)
    id: str = ""

    @property
    def check_id(self) -> str:
        """The stable id (e.g. "aai2.e_min"); without one set, a slug of the name."""
        return self.id or slug(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.check_id,
            "name": self.name,
            "verdict": self.verdict.value,
            "threshold": self.threshold,
            "comparison": self.comparison,
            "value": self.value,
            "bound": self.bound,
            "detail": self.detail,
            "remaining": dict(self.remaining),
        }


#: Greek letters of display names, spelled out in ids ("κ ≥ κ*" → "kappa_kappa").
_GREEK = str.maketrans(
    {"κ": " kappa ", "φ": " phi ", "σ": " sigma ", "δ": " delta ", "μ": " mu ", "λ": " lambda ",
     "τ": " tau ", "ρ": " rho ", "θ": " theta "}
)  # fmt: skip


def slug(text: str) -> str:
    """A lowercase ASCII identifier from a display name ("RA ≥ 0.5" → "ra_0_5")."""
    words = re.findall(r"[a-z0-9]+", text.lower().translate(_GREEK).replace("$", "dollar"))
    return "_".join(words) or "check"


def combine_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """A gate passes only when every check passes; any fail fails it; else missing evidence or
    an inconclusive check leaves it undecided (evidence_missing dominates inconclusive)."""
    items = list(verdicts)
    if not items:
        return Verdict.EVIDENCE_MISSING
    if Verdict.FAIL in items:
        return Verdict.FAIL
    if Verdict.EVIDENCE_MISSING in items:
        return Verdict.EVIDENCE_MISSING
    if Verdict.INCONCLUSIVE in items:
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


@dataclass(frozen=True)
class GateResult:
    """A named gate (e.g. "AAI-2 (Robotics)") and its checks."""

    name: str
    checks: tuple[GateCheck, ...]

    @property
    def verdict(self) -> Verdict:
        return combine_verdicts(c.verdict for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "checks": [c.to_json() for c in self.checks],
        }


def check_at_least(
    name: str,
    estimate: Estimate | None,
    threshold: float,
    *,
    remaining: dict[str, float] | None = None,
    detail: str = "",
) -> GateCheck:
    """Check "quantity ≥ threshold" on the lower confidence bound of `estimate`."""
    return _check_bound(name, estimate, threshold, ">=", remaining=remaining, detail=detail)


def check_at_most(
    name: str,
    estimate: Estimate | None,
    threshold: float,
    *,
    remaining: dict[str, float] | None = None,
    detail: str = "",
) -> GateCheck:
    """Check "quantity ≤ threshold" on the upper confidence bound of `estimate`."""
    return _check_bound(name, estimate, threshold, "<=", remaining=remaining, detail=detail)


def _check_bound(
    name: str,
    estimate: Estimate | None,
    threshold: float,
    comparison: str,
    *,
    remaining: dict[str, float] | None,
    detail: str,
) -> GateCheck:
    """The one decision rule behind `check_at_least` (">=") and `check_at_most` ("<=").

    pass: the bound on the threshold's side (low for ">=", high for "<=") clears the threshold;
    inconclusive: only the point estimate clears it (`remaining` is kept); fail: neither does;
    evidence_missing: no estimate or no value.
    """
    if estimate is None or estimate.value is None:
        return GateCheck(
            name, Verdict.EVIDENCE_MISSING, threshold, comparison, detail=detail or "no data"
        )
    if comparison == ">=":
        bound, clears = estimate.low, operator.ge
    else:
        bound, clears = estimate.high, operator.le
    if bound is not None and clears(bound, threshold):
        verdict = Verdict.PASS
    elif clears(estimate.value, threshold):
        verdict = Verdict.INCONCLUSIVE
    else:
        verdict = Verdict.FAIL
    return GateCheck(
        name,
        verdict,
        threshold,
        comparison,
        value=estimate.value,
        bound=bound,
        detail=detail,
        remaining=dict(remaining or {}) if verdict is Verdict.INCONCLUSIVE else {},
    )
