"""The incident taxonomy: severities, event types, injury levels, roles and review decisions.

Severities are the data contract's (`embodied_eval.records.SEVERITIES`), ordered
near_miss < minor < major < critical. Injury levels follow OSHA 1904 recordability: first aid is
not recordable; medical treatment beyond first aid, days away, restricted work and loss of
consciousness are (→ major); death, in-patient hospitalisation, amputation and loss of an eye are
the severe outcomes (→ critical).
"""

from __future__ import annotations

from embodied_eval.errors import EvalError
from embodied_eval.records import SAFETY_EVENT_KINDS, SEVERITIES, severity_rank

__all__ = [
    "DECISIONS",
    "EVENT_TYPES",
    "INJURY_LEVELS",
    "OPERATING_MODES",
    "PERSON_WORDS",
    "RECORDABLE_INJURIES",
    "REVIEW_ROLES",
    "ROLES",
    "SEVERE_INJURIES",
    "SEVERITIES",
    "check_role",
    "max_severity",
    "severity_rank",
]

#: What happened, as a detector or a reporter names it (the safety-event kinds plus `other`).
EVENT_TYPES: tuple[str, ...] = (*SAFETY_EVENT_KINDS, "other")

#: The closed list of `contact_with` words naming a person, by role (the sim's human proxy
#: stands for one). A contact partner that is neither one of these nor a declared environment
#: partner (`ThresholdTable.environment_partners`) is refused; an unnamed one is a person.
PERSON_WORDS = frozenset(
    {
        "person",
        "human",
        "human_proxy",
        "operator",
        "technician",
        "visitor",
        "worker",
        "bystander",
        "engineer",
        "researcher",
        "student",
        "contractor",
    }
)

#: Injury and treatment levels, mildest first.
INJURY_LEVELS = (
    "none",
    "first_aid",
    "medical_treatment",
    "days_away",
    "restricted_work",
    "loss_of_consciousness",
    "hospitalisation",
    "amputation",
    "loss_of_eye",
    "death",
)
#: OSHA 1904 recordable injuries (beyond first aid): rule 6 → major.
RECORDABLE_INJURIES = frozenset(
    {"medical_treatment", "days_away", "restricted_work", "loss_of_consciousness"}
)
#: Severe outcomes: rule 7 → critical.
SEVERE_INJURIES = frozenset({"hospitalisation", "amputation", "loss_of_eye", "death"})

#: Operating modes a report may name (free text is refused so filters stay reliable).
OPERATING_MODES = (
    "",
    "automatic",
    "collaborative",
    "reduced_speed",
    "manual",
    "teach",
    "maintenance",
)

#: Roles a signing key is registered with.
ROLES = ("technician", "reviewer", "safety_officer", "protocol_owner")
#: Roles that may review (classify) an incident.
REVIEW_ROLES = ("reviewer", "safety_officer")
#: Review decisions: `classify` proposes a severity; `final` signs the final severity.
DECISIONS = ("classify", "final")


def check_role(role: str) -> str:
    """Return `role` after checking it is one of ROLES (EvalError otherwise)."""
    if role not in ROLES:
        raise EvalError(f"role: {role!r} is not one of {', '.join(ROLES)}", key="role")
    return role


def max_severity(*severities: str | None) -> str | None:
    """The highest of the given severities (None entries ignored; None when all are None)."""
    present = [s for s in severities if s is not None]
    if not present:
        return None
    return max(present, key=severity_rank)
