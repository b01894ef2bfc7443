"""What every classification rule shares: the rule-fired record and the limit comparisons.

Edges (tested): "above the limit" is strict. A value equal to a limit is *at* the limit, not
above it. Equality is judged with a relative tolerance of 1e-9, so 0.8 × 140 N (which is
112.00000000000001 in floating point) and 112 N are the same value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError

_REL_TOL = 1e-9


def same_value(x: float, limit: float) -> bool:
    """x equals `limit` within the classifier's tolerance."""
    return math.isclose(x, limit, rel_tol=_REL_TOL, abs_tol=1e-12)


def above(x: float, limit: float) -> bool:
    """x is strictly above `limit` (a value at the limit within tolerance is not above it)."""
    return x > limit and not same_value(x, limit)


def below(x: float, limit: float) -> bool:
    """x is strictly below `limit`."""
    return x < limit and not same_value(x, limit)


@dataclass(frozen=True)
class RuleFired:
    """One rule that fired, with the numbers it fired on.

    Attributes:
        rule: rule id, e.g. "R4.contact_band" (the number is the notes' rule number).
        severity: the severity this rule gives.
        quantity: the measured quantity, e.g. "contact_force_n" ("" when none).
        measured, limit: the measurement and the limit it was compared with (unit in `unit`).
        margin: measured − limit (> 0 above a ceiling, < 0 below a floor).
        band_low: for the near-miss band, α·limit.
        basis: where the limit comes from, in words.
        injury_check_required: contacts with a person: someone must check for an injury.
    """

    rule: str
    severity: str
    quantity: str = ""
    measured: float | None = None
    limit: float | None = None
    margin: float | None = None
    unit: str = ""
    band_low: float | None = None
    basis: str = ""
    injury_check_required: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "quantity": self.quantity,
            "measured": self.measured,
            "limit": self.limit,
            "margin": self.margin,
            "unit": self.unit,
            "band_low": self.band_low,
            "basis": self.basis,
            "injury_check_required": self.injury_check_required,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleFired:
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise EvalError(f"rules_fired: {exc}", key="rules_fired") from None


def fired(
    rule: str,
    severity: str,
    quantity: str = "",
    measured: float | None = None,
    limit: float | None = None,
    unit: str = "",
    basis: str = "",
    *,
    band_low: float | None = None,
    injury_check: bool = False,
) -> RuleFired:
    """A RuleFired with its margin (measured − limit) computed when both are known."""
    margin = None
    if measured is not None and limit is not None:
        margin = float(measured) - float(limit)
    return RuleFired(
        rule=rule,
        severity=severity,
        quantity=quantity,
        measured=None if measured is None else float(measured),
        limit=None if limit is None else float(limit),
        margin=margin,
        unit=unit,
        band_low=band_low,
        basis=basis,
        injury_check_required=injury_check,
    )


def decisive_rule(rules: Any, severity: str | None) -> Mapping[str, Any] | None:
    """The rule that decided `severity`: among the rules at that severity, the first that carries
    a measured value (else the first). `rules` are RuleFired or their dicts; None when none."""
    at = [r if isinstance(r, Mapping) else r.to_dict() for r in rules]
    at = [r for r in at if r["severity"] == severity]
    if not at:
        return None
    for rule in at:
        if rule.get("measured") is not None and rule.get("limit") is not None:
            return rule
    return at[0]
