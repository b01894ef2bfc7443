"""Classification rules for contacts: with a person (ISO/TS 15066 body-region limits) and with
the environment (the robot's force limit).

Who was touched — unknown is not harmless (the project's safety notes):

* a body region, or a person word from the closed list `PERSON_WORDS` (technician, operator,
  visitor, person, …) → a person;
* a declared environment partner from the table's closed list (`environment`, the fixtures and
  objects the built-in scenes and the protocol name) → the environment;
* nothing said → a person (the worst plausible case);
* any other word → refused (EvalError listing both lists): it must be declared.

A contact with a person without a body region is checked against the *lowest* body-region limit
of the table for its contact type (transient or quasi-static; quasi-static when not given): above
it → standards breach → critical (R7.force_over_lowest_limit / R7.pressure_over_lowest_limit);
within it → minor (R5.unknown_region, injury check required). With the default limits the lowest
is the face's 65 N for both types (the face has no transient allowance).

A person (the project's safety notes, rules 4, 5 and 7):

* force or pressure above the body-region limit → **standards breach → critical** (R7), whether
  or not a reporter ticked "standards breach". The limit is the quasi-static value of the table,
  or `transient_factor` × it for a transient contact — except on the regions without a transient
  allowance (skull/forehead and face), where the quasi-static value applies to every contact;
* any contact with skull/forehead or face within the limit → minor (R5.head_contact);
* unintended contact within the limit → minor (R5.unintended_contact), injury check required;
* permitted contact between α·limit and the limit → near-miss (R4.contact_band).

The environment (fixtures, objects, the table): a contact force above the robot's force limit is
a breach of a force margin → near-miss (R2.force_margin, the seed's "breach of a distance/force
margin"), or minor when property damage is reported (R5.force_margin_damage). The limit is the
table's `environment_force_limit_n`, or the robot's own configured limit (`force_limit_n` of the
event) when that is stricter."""

from __future__ import annotations

from embodied_eval.errors import EvalError
from embodied_eval.records import SafetyEvent
from incident_logging.rule_base import RuleFired, above, below, fired, same_value
from incident_logging.taxonomy import PERSON_WORDS
from incident_logging.thresholds import ThresholdTable, partner_word

__all__ = [
    "PERSON_WORDS",
    "contact_partner",
    "environment_contact_rules",
    "is_person",
    "person_contact_rules",
    "stop_basis",
]


def contact_partner(event: SafetyEvent, table: ThresholdTable) -> str:
    """ "person" or "environment": who the event says was touched (see the module docstring).

    Raises:
        EvalError (key contact_with) when `contact_with` is neither a person word nor a declared
        environment partner; the message lists both closed lists.
    """
    if event.body_region is not None:
        return "person"
    if event.contact_with is None or not event.contact_with.strip():
        return "person"
    word = partner_word(event.contact_with)
    if word in PERSON_WORDS:
        return "person"
    if word in table.environment_partners:
        return "environment"
    raise EvalError(
        f"contact_with: {event.contact_with!r} is not a known contact partner; people: "
        f"{', '.join(sorted(PERSON_WORDS))}; environment: "
        f"{', '.join(sorted(table.environment_partners))} (a protocol declares more fixtures "
        "with [incidents.thresholds] environment_partners)",
        key="contact_with",
    )


def is_person(event: SafetyEvent, table: ThresholdTable) -> bool:
    """Whether the contact is (taken to be) with a person: a body region, a person word, or no
    partner named at all."""
    return contact_partner(event, table) == "person"


def lowest_limit(
    limits: dict[str, float], table: ThresholdTable, ctype: str, *, pressure: bool
) -> tuple[float, str] | None:
    """(limit, region) of the lowest body-region limit of `ctype` (None when `limits` is empty)."""
    found = [
        (
            table.pressure_limit_ncm2(r, ctype) if pressure else table.force_limit_n(r, ctype),
            r,
        )
        for r in limits
    ]
    usable = [(float(v), r) for v, r in found if v is not None]
    return min(usable) if usable else None


def _who(event: SafetyEvent) -> str:
    if event.contact_with is None or not event.contact_with.strip():
        return "an unnamed partner (a person until declared otherwise)"
    return f"a person ({partner_word(event.contact_with)})"


def unknown_region_rules(event: SafetyEvent, table: ThresholdTable) -> list[RuleFired]:
    """A contact with a person (or an unnamed partner) without a body region: the lowest limit."""
    ctype = event.contact_type or "quasi_static"
    kind = ctype.replace("_", "-")
    assumed = "" if event.contact_type else " (contact type not given: quasi-static assumed)"
    who = _who(event)
    out: list[RuleFired] = []
    checks = (
        ("force", "contact_force_n", event.contact_force_n, "N", table.body_regions),
        (
            "pressure",
            "contact_pressure_ncm2",
            event.contact_pressure_ncm2,
            "N/cm²",
            table.pressure_limits_ncm2,
        ),
    )
    within: list[str] = []
    for what, quantity, value, unit, limits in checks:
        if value is None:
            continue
        lowest = lowest_limit(dict(limits), table, ctype, pressure=what == "pressure")
        if lowest is None:
            continue
        limit, region = lowest
        basis = (
            f"lowest {kind} {what} limit of any body region: {limit:g} {unit} ({region}){assumed}"
        )
        if above(value, limit):
            out.append(
                fired(
                    f"R7.{what}_over_lowest_limit",
                    "critical",
                    quantity,
                    value,
                    limit,
                    unit,
                    f"standards breach (ISO/TS 15066): contact {what} on {who} with no body "
                    "region, above the " + basis,
                    injury_check=True,
                )
            )
        else:
            within.append(basis)
    if out:
        return out
    checked = f" within the {'; '.join(within)}" if within else ": the limit cannot be checked"
    lowest_force = lowest_limit(dict(table.body_regions), table, ctype, pressure=False)
    force_limit = lowest_force[0] if lowest_force is not None else None
    return [
        fired(
            "R5.unknown_region",
            "minor",
            "contact_force_n",
            event.contact_force_n,
            force_limit if event.contact_force_n is not None else None,
            "N",
            f"contact with {who} without a body region{checked}",
            injury_check=True,
        )
    ]


def _force_limit_basis(table: ThresholdTable, region: str, ctype: str, assumed: str) -> str:
    quasi = float(table.body_regions[region])
    limit = table.force_limit_n(region, ctype)
    if region in table.no_transient_regions:
        # The same limit for every contact type: whether the type was given does not matter.
        return f"force limit for {region}: {limit:g} N (no transient allowance)"
    if ctype == "transient":
        text = (
            f"transient force limit for {region}: {limit:g} N "
            f"({table.transient_factor:g} × {quasi:g} N)"
        )
    else:
        text = f"quasi-static force limit for {region}: {limit:g} N"
    return text + assumed


def person_contact_rules(event: SafetyEvent, table: ThresholdTable) -> list[RuleFired]:
    """Rules 4, 5 and 7 for a contact with a person (see the module docstring)."""
    if event.body_region is None:
        return unknown_region_rules(event, table)
    out: list[RuleFired] = []
    region = table.region(event.body_region)
    ctype = event.contact_type or "quasi_static"
    assumed = "" if event.contact_type else " (contact type not given: quasi-static assumed)"
    limit = table.force_limit_n(region, ctype)
    limit_basis = _force_limit_basis(table, region, ctype, assumed)
    force = event.contact_force_n
    pressure = event.contact_pressure_ncm2
    p_limit = table.pressure_limit_ncm2(region, ctype)
    p_basis = (
        f"{ctype.replace('_', '-')} pressure limit for {region}: {p_limit:g} N/cm²{assumed}"
        if p_limit is not None
        else ""
    )
    force_over = force is not None and above(force, limit)
    pressure_over = pressure is not None and p_limit is not None and above(pressure, p_limit)

    if force_over:
        out.append(
            fired(
                "R7.force_over_limit",
                "critical",
                "contact_force_n",
                force,
                limit,
                "N",
                "standards breach (ISO/TS 15066 body-region limit): contact force on a person "
                "above the " + limit_basis,
                injury_check=True,
            )
        )
    if pressure_over:
        out.append(
            fired(
                "R7.pressure_over_limit",
                "critical",
                "contact_pressure_ncm2",
                pressure,
                p_limit,
                "N/cm²",
                "standards breach (ISO/TS 15066 body-region limit): contact pressure on a person "
                "above the " + p_basis,
                injury_check=True,
            )
        )
    if region in table.no_transient_regions:
        out.append(
            fired(
                "R5.head_contact",
                "minor",
                "contact_force_n",
                force,
                limit,
                "N",
                f"any contact with {region} is at least minor; " + limit_basis,
                injury_check=True,
            )
        )
    if not event.permitted:
        out.append(
            fired(
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
    if event.permitted and force is not None and not force_over:
        band_low = table.near_miss_alpha * limit
        if force >= band_low or same_value(force, band_low):
            out.append(
                fired(
                    "R4.contact_band",
                    "near_miss",
                    "contact_force_n",
                    force,
                    limit,
                    "N",
                    f"permitted contact within [α·limit, limit], α = {table.near_miss_alpha:g}; "
                    + limit_basis,
                    band_low=band_low,
                )
            )
    if event.permitted and pressure is not None and p_limit is not None and not pressure_over:
        band_low = table.near_miss_alpha * p_limit
        if pressure >= band_low or same_value(pressure, band_low):
            out.append(
                fired(
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


def environment_force_limit(event: SafetyEvent, table: ThresholdTable) -> tuple[float, str]:
    """(limit N, its basis in words) for a contact with the environment: the table's limit, or
    the robot's configured limit reported with the event when that is stricter."""
    limit = float(table.environment_force_limit_n)
    basis = f"force limit for contact with the environment {limit:g} N (threshold table)"
    robot = event.force_limit_n
    if robot is not None and below(robot, limit):
        return float(robot), f"robot's configured force limit {robot:g} N (stricter than table)"
    return limit, basis


def environment_contact_rules(
    event: SafetyEvent, table: ThresholdTable, *, damage_reported: bool
) -> list[RuleFired]:
    """The force-margin rule for a measured contact force that is not on a person."""
    force = event.contact_force_n
    if force is None or is_person(event, table):
        return []
    limit, limit_basis = environment_force_limit(event, table)
    if not above(force, limit):
        return []
    what = event.contact_with
    basis = f"contact with {what} above the {limit_basis}: breach of a force margin"
    if damage_reported:
        return [
            fired(
                "R5.force_margin_damage",
                "minor",
                "contact_force_n",
                force,
                limit,
                "N",
                basis + ", with property damage reported",
            )
        ]
    return [fired("R2.force_margin", "near_miss", "contact_force_n", force, limit, "N", basis)]


def stop_basis(event: SafetyEvent, kind: str) -> str:
    """Rule 1's basis: what stopped, and — never "no contact" when a contact was measured — what
    it was in contact with."""
    what = kind.replace("_", " ")
    cat = "" if event.stop_category is None else f" (stop category {event.stop_category})"
    force, pressure = event.contact_force_n, event.contact_pressure_ncm2
    if force is None and pressure is None and not event.contact_with and not event.body_region:
        return f"{what} with no contact{cat}"
    if event.body_region:
        target = f"a person ({event.body_region})"
    elif event.contact_with:
        target = event.contact_with
    else:
        target = "an unnamed partner (a person until declared otherwise)"
    if force is not None:
        measured = f"{force:g} N measured"
    elif pressure is not None:
        measured = f"{pressure:g} N/cm² measured"
    else:
        measured = "no contact force measured with the stop"
    return f"{what} on contact with {target} ({measured}){cat}"
