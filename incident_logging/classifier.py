"""The incident classifier: pure rules over a safety event's measurements.

Severity = the highest rule that fires (the project's safety notes, default rules 1–7), which
follow the seed's taxonomy — near-miss: a protective stop or a breach of a distance/force margin;
minor: contact or property damage below the reporting threshold; major: reportable injury or
significant damage; critical: severe injury, uncontrolled hazard or a standards breach:

1. Protective / emergency / reflex stop (also joint-limit and workspace stops) → near_miss. Its
   basis says "with no contact" only when no contact was measured with the stop.
2. Separation below the protective separation distance S_p → near_miss (a distance margin);
   contact with the environment above the robot's force limit → near_miss (a force margin), or
   minor when property damage is reported (`incident_logging.contact_rules`).
3. TCP speed above the reduced-speed limit while reduced speed is required → near_miss.
4. Permitted contact with a person between α·limit and the limit → near_miss.
5. Unintended contact with a person within the body-region limit, any skull/face contact within
   the limit, a first-aid injury, or property damage at or below the reporting threshold → minor
   (injury check required for contacts).
6. Recordable injury, or property damage above the threshold → major.
7. Severe injury (death, hospitalisation, amputation, loss of an eye), a safety function that
   failed to stop the robot, an uncontrolled hazard, or a standards breach → critical. A contact
   force or pressure on a person above the ISO/TS 15066 body-region limit (transient limit =
   factor × quasi-static, no transient allowance on skull/forehead and face) *is* a standards
   breach, measured: it is critical whether or not the reporter said so.

Edges (tested): "above the limit" is strict (`incident_logging.rule_base`). A force equal to the
limit is *at* the limit, not above it: a permitted contact at exactly the limit is a near-miss
(rule 4), and one at exactly α·limit is inside the band too. Separation equal to S_p and speed
equal to the limit are not breaches. A contact whose type is not given is judged against the
quasi-static (lower) limit.

Who was touched (`incident_logging.contact_rules.contact_partner`): a body region or a person word
→ a person; a declared environment partner → the environment; nothing said → a person (unknown is
not harmless); any other word → refused. A person without a body region is held to the lowest
body-region limit (rule 7 when above it).

Every rule that fires is returned with its measured value, the limit used, the signed margin
(measured − limit, in the quantity's unit: > 0 above a ceiling, < 0 below a floor) and the basis
of the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from embodied_eval.errors import EvalError
from embodied_eval.records import SafetyEvent, severity_rank
from incident_logging.contact_rules import (
    PERSON_WORDS,
    environment_contact_rules,
    is_person,
    person_contact_rules,
    stop_basis,
)
from incident_logging.rule_base import RuleFired, above, below, decisive_rule, fired
from incident_logging.taxonomy import INJURY_LEVELS, RECORDABLE_INJURIES, SEVERE_INJURIES
from incident_logging.thresholds import ThresholdTable, default_table

__all__ = [
    "CLASSIFIER_VERSION",
    "PERSON_WORDS",
    "STOP_KINDS",
    "Classification",
    "RuleFired",
    "classify",
    "decisive_rule",
]

#: rules-2: measured standards breaches are critical; environment force margins; stops never
#: "with no contact" when a contact was measured.
#: rules-3: unknown is not harmless — an unnamed contact partner is a person, a person without a
#: body region is held to the lowest body-region limit, partners come from closed lists.
CLASSIFIER_VERSION = "rules-3"

#: Event kinds that are stops (rule 1).
STOP_KINDS = frozenset({"protective_stop", "emergency_stop", "joint_limit", "workspace"})


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


def _damage_rules(
    event: SafetyEvent, kind: str, table: ThresholdTable, *, damage_reported: bool
) -> list[RuleFired]:
    cost = event.damage_cost
    threshold = table.damage_threshold
    if cost is None:
        if kind != "damage" and not damage_reported:
            return []
        return [
            fired(
                "R5.damage",
                "minor",
                basis="property damage with no cost given: treated as below the reporting "
                f"threshold ({threshold:g}) until a cost is recorded",
            )
        ]
    if above(cost, threshold):
        return [
            fired(
                "R6.damage",
                "major",
                "damage_cost",
                cost,
                threshold,
                "currency",
                f"damage above the reporting threshold {threshold:g}",
            )
        ]
    if cost > 0 or kind == "damage" or damage_reported:
        return [
            fired(
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
            fired(
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
        return [fired("R7.severe_injury", "critical", basis=f"injury: {level}")]
    if level in RECORDABLE_INJURIES:
        return [fired("R6.recordable_injury", "major", basis=f"recordable injury: {level}")]
    if level == "first_aid":
        return [fired("R5.first_aid", "minor", basis="injury treated with first aid only")]
    return []


def classify(
    event: SafetyEvent,
    table: ThresholdTable | None = None,
    *,
    uncontrolled_hazard: bool = False,
    standards_breach: bool = False,
    kind: str | None = None,
    damage_reported: bool = False,
) -> Classification:
    """Classify one safety event: provisional severity and every rule that fired.

    Args:
        event: the measurements (see `SafetyEvent`: units m, m/s, N, N/cm², currency).
        table: the threshold table (defaults when None).
        uncontrolled_hazard, standards_breach: rule 7 facts a reporter states (no sensor has them;
            a measured force above a body-region limit is a standards breach without the flag).
        kind: overrides `event.kind` (a manual report's event type may be `other`, which no
            sensor emits; only its measurements are then judged).
        damage_reported: property damage was reported (a description without a cost): an
            environment contact above the force limit is then minor, not a near-miss.

    Returns:
        Classification(severity=None when no rule fires, rules in rule order).

    Raises:
        EvalError when a kind's required measurement is missing (e.g. a `separation` event without
        `separation_m`), a body region / injury level is unknown, or `contact_with` is neither a
        person word nor a declared environment partner.
    """
    table = table if table is not None else default_table()
    kind = kind if kind is not None else event.kind
    rules: list[RuleFired] = []
    person_contact = is_person(event, table) and (
        kind == "contact"
        or event.contact_force_n is not None
        or event.contact_pressure_ncm2 is not None
    )

    # Rule 1: a stop (its basis names any contact measured with it).
    if kind in STOP_KINDS:
        rules.append(
            fired(
                "R1.stop",
                "near_miss",
                "stop_category",
                None if event.stop_category is None else float(event.stop_category),
                basis=stop_basis(event, kind),
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
        and below(event.separation_m, event.protective_separation_m)
    ):
        rules.append(
            fired(
                "R2.separation",
                "near_miss",
                "separation_m",
                event.separation_m,
                event.protective_separation_m,
                "m",
                "separation below the protective separation distance S_p",
            )
        )

    # A force margin: contact with the environment above the robot's force limit.
    damaged = (
        damage_reported
        or kind == "damage"
        or (event.damage_cost is not None and event.damage_cost > 0)
    )
    rules.extend(environment_contact_rules(event, table, damage_reported=damaged))

    # Rule 3: speed above the reduced-speed limit while reduced speed is required.
    if kind == "tcp_speed" and event.tcp_speed_mps is None:
        raise EvalError("tcp_speed event: needs tcp_speed_mps", key="tcp_speed_mps")
    if event.reduced_speed_required and event.tcp_speed_mps is not None:
        limit = table.reduced_speed_mps
        basis = f"reduced-speed limit {limit:g} m/s (threshold table)"
        if event.speed_limit_mps is not None and event.speed_limit_mps < limit:
            limit = event.speed_limit_mps
            basis = f"robot's configured reduced-speed limit {limit:g} m/s (stricter than table)"
        if above(event.tcp_speed_mps, limit):
            rules.append(
                fired(
                    "R3.reduced_speed",
                    "near_miss",
                    "tcp_speed_mps",
                    event.tcp_speed_mps,
                    limit,
                    "m/s",
                    "TCP speed above the " + basis,
                )
            )

    # Rules 4, 5 and 7: contact with a person.
    if (
        kind == "contact"
        and event.body_region is None
        and event.contact_force_n is None
        and event.contact_pressure_ncm2 is None
        and event.contact_with is None
        and event.damage_cost is None
    ):
        raise EvalError(
            "contact event: needs body_region (a person) or contact_with (what was touched)",
            key="body_region",
        )
    if person_contact:
        rules.extend(person_contact_rules(event, table))

    # Rules 5-6: damage and injury.
    rules.extend(_damage_rules(event, kind, table, damage_reported=damage_reported))
    rules.extend(_injury_rules(event, kind))

    # Rule 7: a safety function that failed; reporter-stated facts.
    if kind == "safety_function_failure":
        rules.append(
            fired(
                "R7.safety_function_failure",
                "critical",
                basis="a safety function failed to stop the robot"
                + (f": {event.detail}" if event.detail else ""),
            )
        )
    if uncontrolled_hazard:
        rules.append(fired("R7.uncontrolled_hazard", "critical", basis="uncontrolled hazard"))
    if standards_breach:
        rules.append(
            fired("R7.standards_breach", "critical", basis="standards breach (stated by reporter)")
        )

    severity = max((r.severity for r in rules), key=severity_rank) if rules else None
    return Classification(
        severity=severity,
        rules=tuple(rules),
        threshold_version=table.version,
        threshold_hash=table.table_hash,
    )
