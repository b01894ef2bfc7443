"""The incident classifier: pure rules over a safety event's measurements.

Severity = the highest rule that fires (the project's safety notes, default rules 1–7):

1. Protective / emergency / reflex stop (also joint-limit and workspace stops) with no contact
   → near_miss.
2. Separation below the protective separation distance S_p → near_miss.
3. TCP speed above the reduced-speed limit while reduced speed is required → near_miss.
4. Permitted contact with a person between α·limit and the limit → near_miss.
5. Unintended contact with a person, contact above the body-region limit (force or pressure;
   transient limit = factor × quasi-static), any skull/face contact, a first-aid injury, or
   property damage at or below the reporting threshold → minor (injury check required).
6. Recordable injury, or property damage above the threshold → major.
7. Severe injury (death, hospitalisation, amputation, loss of an eye), a safety function that
   failed to stop the robot, an uncontrolled hazard or a standards breach → critical.

Edges (tested): "above the limit" is strict. A force equal to the limit is *at* the limit, not
above it: a permitted contact at exactly the limit is a near-miss (rule 4), and one at exactly
α·limit is inside the band too. Separation equal to S_p and speed equal to the limit are not
breaches. Equality is judged with a relative tolerance of 1e-9, so 0.8 × 140 N (which is
112.00000000000001 in floating point) and 112 N are the same value. A contact whose type is not
given is judged against the quasi-static (lower) limit.

Every rule that fires is returned with its measured value, the limit used, the signed margin
(measured − limit, in the quantity's unit: > 0 above a ceiling, < 0 below a floor) and the basis
of the limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import SafetyEvent, severity_rank
from incident_logging.taxonomy import INJURY_LEVELS, RECORDABLE_INJURIES, SEVERE_INJURIES
from incident_logging.thresholds import ThresholdTable, default_table

CLASSIFIER_VERSION = "rules-1"

#: Event kinds that are stops (rule 1).
STOP_KINDS = frozenset({"protective_stop", "emergency_stop", "joint_limit", "workspace"})
#: `contact_with` values meaning a person.
PERSON_WORDS = frozenset({"person", "human", "operator", "worker", "bystander"})

_REL_TOL = 1e-9


def _same(x: float, limit: float) -> bool:
    return math.isclose(x, limit, rel_tol=_REL_TOL, abs_tol=1e-12)


def _above(x: float, limit: float) -> bool:
    """x is strictly above `limit` (a value at the limit within tolerance is not above it)."""
    return x > limit and not _same(x, limit)


def _below(x: float, limit: float) -> bool:
    """x is strictly below `limit`."""
    return x < limit and not _same(x, limit)


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
        injury_check_required: rule 5 contacts: someone must check for an injury.
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


@dataclass(frozen=True)
class Classification:
    """The classifier's answer: provisional severity (None when no rule fires) and the rules."""

    severity: str | None
    rules: tuple[RuleFired, ...]
    threshold_version: str
    threshold_hash: str
    classifier_version: str = CLASSIFIER_VERSION

    @property
    def injury_check_required(self) -> bool:
        return any(r.injury_check_required for r in self.rules)

    @property
    def top_rules(self) -> tuple[str, ...]:
        """Ids of the rules that gave the severity."""
        return tuple(r.rule for r in self.rules if r.severity == self.severity)


def _fired(
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


def _is_person_contact(event: SafetyEvent) -> bool:
    if event.body_region is not None:
        return True
    return (event.contact_with or "").strip().lower() in PERSON_WORDS


def _contact_rules(event: SafetyEvent, table: ThresholdTable) -> list[RuleFired]:
    """Rules 4 and 5 for a contact with a person."""
    out: list[RuleFired] = []
    if event.body_region is None:
        out.append(
            _fired(
                "R5.unknown_region",
                "minor",
                "contact_force_n",
                event.contact_force_n,
                None,
                "N",
                "contact with a person without a body region: the limit cannot be checked",
                injury_check=True,
            )
        )
        return out
    region = table.region(event.body_region)
    ctype = event.contact_type or "quasi_static"
    assumed = "" if event.contact_type else " (contact type not given: quasi-static assumed)"
    quasi = float(table.body_regions[region])
    limit = table.force_limit_n(region, ctype)
    limit_basis = (
        f"{ctype.replace('_', '-')} force limit for {region}: "
        + (f"{limit:g} N" if limit is not None else "no transient allowance")
        + (f" ({table.transient_factor:g} × {quasi:g} N)" if ctype == "transient" and limit else "")
        + assumed
    )
    force = event.contact_force_n
    pressure = event.contact_pressure_ncm2
    p_limit = table.pressure_limit_ncm2(region, ctype)

    if region in table.no_transient_regions:
        out.append(
            _fired(
                "R5.head_contact",
                "minor",
                "contact_force_n",
                force,
                quasi,
                "N",
                f"any contact with {region} is at least minor (no transient allowance; "
                f"quasi-static limit {quasi:g} N shown for the margin)",
                injury_check=True,
            )
        )
    if not event.permitted:
        out.append(
            _fired(
                "R5.unintended_contact",
                "minor",
                "contact_force_n",
                force,
                limit,
                "N",
                "unintended contact with a person; " + limit_basis,
                injury_check=True,
            )
        )
    if force is not None and limit is not None:
        if _above(force, limit):
            out.append(
                _fired(
                    "R5.over_limit",
                    "minor",
                    "contact_force_n",
                    force,
                    limit,
                    "N",
                    "force above the " + limit_basis,
                    injury_check=True,
                )
            )
        elif event.permitted:
            band_low = table.near_miss_alpha * limit
            if force >= band_low or _same(force, band_low):
                out.append(
                    _fired(
                        "R4.contact_band",
                        "near_miss",
                        "contact_force_n",
                        force,
                        limit,
                        "N",
                        f"permitted contact within [α·limit, limit], α = "
                        f"{table.near_miss_alpha:g}; " + limit_basis,
                        band_low=band_low,
                    )
                )
    if pressure is not None and p_limit is not None:
        p_basis = f"{ctype.replace('_', '-')} pressure limit for {region}: {p_limit:g} N/cm²"
        if _above(pressure, p_limit):
            out.append(
                _fired(
                    "R5.over_pressure",
                    "minor",
                    "contact_pressure_ncm2",
                    pressure,
                    p_limit,
                    "N/cm²",
                    "pressure above the " + p_basis,
                    injury_check=True,
                )
            )
        elif event.permitted:
            band_low = table.near_miss_alpha * p_limit
            if pressure >= band_low or _same(pressure, band_low):
                out.append(
                    _fired(
                        "R4.pressure_band",
                        "near_miss",
                        "contact_pressure_ncm2",
                        pressure,
                        p_limit,
                        "N/cm²",
                        f"permitted contact pressure within [α·limit, limit]; {p_basis}",
                        band_low=band_low,
                    )
                )
    return out


def _damage_rules(event: SafetyEvent, kind: str, table: ThresholdTable) -> list[RuleFired]:
    cost = event.damage_cost
    threshold = table.damage_threshold
    if cost is None:
        if kind != "damage":
            return []
        return [
            _fired(
                "R5.damage",
                "minor",
                basis="property damage with no cost given: treated as below the reporting "
                f"threshold ({threshold:g}) until a cost is recorded",
            )
        ]
    if _above(cost, threshold):
        return [
            _fired(
                "R6.damage",
                "major",
                "damage_cost",
                cost,
                threshold,
                "currency",
                f"damage above the reporting threshold {threshold:g}",
            )
        ]
    if cost > 0 or kind == "damage":
        return [
            _fired(
                "R5.damage",
                "minor",
                "damage_cost",
                cost,
                threshold,
                "currency",
                f"damage at or below the reporting threshold {threshold:g}",
            )
        ]
    return []


def _injury_rules(event: SafetyEvent, kind: str) -> list[RuleFired]:
    level = event.injury_level
    if level is None:
        if kind != "injury":
            return []
        return [
            _fired(
                "R5.injury_unknown",
                "minor",
                basis="injury reported without a level: minor until the injury check records one",
                injury_check=True,
            )
        ]
    if level not in INJURY_LEVELS:
        raise EvalError(
            f"injury_level: {level!r} is not one of {', '.join(INJURY_LEVELS)}", key="injury_level"
        )
    if level in SEVERE_INJURIES:
        return [_fired("R7.severe_injury", "critical", basis=f"injury: {level}")]
    if level in RECORDABLE_INJURIES:
        return [_fired("R6.recordable_injury", "major", basis=f"recordable injury: {level}")]
    if level == "first_aid":
        return [_fired("R5.first_aid", "minor", basis="injury treated with first aid only")]
    return []


def classify(
    event: SafetyEvent,
    table: ThresholdTable | None = None,
    *,
    uncontrolled_hazard: bool = False,
    standards_breach: bool = False,
    kind: str | None = None,
) -> Classification:
    """Classify one safety event: provisional severity and every rule that fired.

    Args:
        event: the measurements (see `SafetyEvent`: units m, m/s, N, N/cm², currency).
        table: the threshold table (defaults when None).
        uncontrolled_hazard, standards_breach: rule 7 facts a reporter states (no sensor has them).
        kind: overrides `event.kind` (a manual report's event type may be `other`, which no
            sensor emits; only its measurements are then judged).

    Returns:
        Classification(severity=None when no rule fires, rules in rule order).

    Raises:
        EvalError when a kind's required measurement is missing (e.g. a `separation` event without
        `separation_m`) or a body region / injury level is unknown.
    """
    table = table if table is not None else default_table()
    kind = kind if kind is not None else event.kind
    rules: list[RuleFired] = []
    person_contact = _is_person_contact(event) and (
        kind == "contact"
        or event.contact_force_n is not None
        or event.contact_pressure_ncm2 is not None
    )

    # Rule 1: a stop without contact.
    if kind in STOP_KINDS and not person_contact:
        cat = "" if event.stop_category is None else f" (stop category {event.stop_category})"
        rules.append(
            _fired(
                "R1.stop",
                "near_miss",
                "stop_category",
                None if event.stop_category is None else float(event.stop_category),
                basis=f"{kind.replace('_', ' ')} with no contact{cat}",
            )
        )

    # Rule 2: separation below S_p.
    if kind == "separation" and (
        event.separation_m is None or event.protective_separation_m is None
    ):
        raise EvalError(
            "separation event: needs separation_m and protective_separation_m", key="separation_m"
        )
    if (
        event.separation_m is not None
        and event.protective_separation_m is not None
        and _below(event.separation_m, event.protective_separation_m)
    ):
        rules.append(
            _fired(
                "R2.separation",
                "near_miss",
                "separation_m",
                event.separation_m,
                event.protective_separation_m,
                "m",
                "separation below the protective separation distance S_p",
            )
        )

    # Rule 3: speed above the reduced-speed limit while reduced speed is required.
    if kind == "tcp_speed" and event.tcp_speed_mps is None:
        raise EvalError("tcp_speed event: needs tcp_speed_mps", key="tcp_speed_mps")
    if event.reduced_speed_required and event.tcp_speed_mps is not None:
        limit = table.reduced_speed_mps
        basis = f"reduced-speed limit {limit:g} m/s (threshold table)"
        if event.speed_limit_mps is not None and event.speed_limit_mps < limit:
            limit = event.speed_limit_mps
            basis = f"robot's configured reduced-speed limit {limit:g} m/s (stricter than table)"
        if _above(event.tcp_speed_mps, limit):
            rules.append(
                _fired(
                    "R3.reduced_speed",
                    "near_miss",
                    "tcp_speed_mps",
                    event.tcp_speed_mps,
                    limit,
                    "m/s",
                    "TCP speed above the " + basis,
                )
            )

    # Rules 4-5: contact with a person.
    if (
        kind == "contact"
        and not person_contact
        and event.contact_force_n is None
        and event.contact_with is None
        and event.damage_cost is None
    ):
        raise EvalError(
            "contact event: needs body_region (a person) or contact_with (what was touched)",
            key="body_region",
        )
    if person_contact:
        rules.extend(_contact_rules(event, table))

    # Rules 5-6: damage and injury.
    rules.extend(_damage_rules(event, kind, table))
    rules.extend(_injury_rules(event, kind))

    # Rule 7: a safety function that failed; reporter-stated facts.
    if kind == "safety_function_failure":
        rules.append(
            _fired(
                "R7.safety_function_failure",
                "critical",
                basis="a safety function failed to stop the robot"
                + (f": {event.detail}" if event.detail else ""),
            )
        )
    if uncontrolled_hazard:
        rules.append(_fired("R7.uncontrolled_hazard", "critical", basis="uncontrolled hazard"))
    if standards_breach:
        rules.append(_fired("R7.standards_breach", "critical", basis="standards breach"))

    severity = max((r.severity for r in rules), key=severity_rank) if rules else None
    return Classification(
        severity=severity,
        rules=tuple(rules),
        threshold_version=table.version,
        threshold_hash=table.table_hash,
    )
