"""Review workflow: the current state of an incident, and the rules a review must satisfy.

Workflow (modelled on OSHA 1904, AHRQ Common Formats and 21 CFR 11.10(e), as in the project's
safety notes): anyone or a detector reports; a reviewer classifies (`classify` reviews); the
safety officer signs the final severity (`final` review). Rules, each refused with an EvalError:

* only keys registered as `reviewer` or `safety_officer` review; only a `safety_officer` signs a
  final severity;
* a downgrade (a severity below the incident's current one) needs a written rationale;
* a major or critical final severity needs two distinct signers — another person must have
  reviewed the incident at that severity — and is never signed off by the reporter.

Escalation is allowed at once: an amendment whose new facts make the classifier give a higher
severity, or a reviewer's `classify` review proposing a higher one, raises the provisional
severity immediately (a proposed downgrade waits for the safety officer's signed final). If that happens after the final sign-off and
goes above the signed severity, the incident is unreviewed again until the safety officer signs.
The state is a fold over the original record and its amendment and review records in chain order;
the original row never changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import Incident, severity_rank
from incident_logging.record import IncidentRecord
from incident_logging.taxonomy import DECISIONS, REVIEW_ROLES

SERIOUS = ("major", "critical")


@dataclass(frozen=True)
class IncidentState:
    """An incident as it stands now.

    Attributes:
        original: the record as first stored (never changes).
        current: the record with every amendment (and automatic escalation) applied.
        record_hash: chain hash of the original record.
        amendments, reviews: the amendment / review payloads in chain order, each with `seq`,
            `at` and (reviews) `signer`.
        final_severity: the latest signed final severity, or None.
        reviewed: True when a final severity is signed and no later escalation went above it.
    """

    original: IncidentRecord
    current: IncidentRecord
    record_hash: str
    amendments: tuple[Mapping[str, Any], ...] = ()
    reviews: tuple[Mapping[str, Any], ...] = ()
    final_severity: str | None = None
    reviewed: bool = False

    @property
    def incident_id(self) -> str:
        return self.original.incident_id

    @property
    def provisional_severity(self) -> str:
        return self.current.provisional_severity

    @property
    def severity(self) -> str:
        """The severity that counts: signed final when reviewed, else provisional."""
        if self.reviewed and self.final_severity is not None:
            return self.final_severity
        return self.current.provisional_severity

    @property
    def unreviewed_serious(self) -> bool:
        """A major/critical incident with no current signed final severity."""
        return self.severity in SERIOUS and not self.reviewed

    @property
    def signers(self) -> tuple[str, ...]:
        """Holders who signed reviews of this incident, in order, without repeats."""
        out: list[str] = []
        for review in self.reviews:
            if review["reviewer"] not in out:
                out.append(review["reviewer"])
        return tuple(out)

    def to_contract(self) -> Incident:
        """The data-contract Incident (severity = final if reviewed, else provisional)."""
        return self.current.to_contract(
            final_severity=self.final_severity if self.reviewed else None, reviewed=self.reviewed
        )


def apply_changes(record: IncidentRecord, changes: Sequence[Mapping[str, Any]]) -> IncidentRecord:
    """Apply amendment changes ({field, new}; `measurements.<key>` for a measurement) to a copy."""
    values: dict[str, Any] = {}
    measurements = dict(record.measurements)
    touched_measurements = False
    for change in changes:
        name = str(change["field"])
        if name.startswith("measurements."):
            key = name.split(".", 1)[1]
            touched_measurements = True
            if change["new"] is None:
                measurements.pop(key, None)
            else:
                measurements[key] = change["new"]
        else:
            values[name] = change["new"]
    if touched_measurements:
        values["measurements"] = measurements
    if "persons" in values and isinstance(values["persons"], list):
        values["persons"] = tuple(values["persons"])
    try:
        return dataclasses.replace(record, **values)
    except TypeError as exc:
        raise EvalError(f"amendment: {exc}", key="field") from None


def fold_state(
    original: IncidentRecord,
    record_hash: str,
    events: Sequence[Mapping[str, Any]],
) -> IncidentState:
    """The incident's state after its amendments and reviews (each a payload with `kind`, `seq`).

    Args:
        original: the stored incident record.
        record_hash: its chain hash.
        events: amendment (`kind` = "amendment") and review (`kind` = "review") payloads of this
            incident, in chain order.
    """
    current = original
    amendments: list[Mapping[str, Any]] = []
    reviews: list[Mapping[str, Any]] = []
    final: str | None = None
    final_seq = -1
    escalated_seq = -1
    for event in events:
        if event["kind"] == "amendment":
            amendments.append(event)
            current = apply_changes(current, event["changes"])
            escalation = event.get("escalation")
            if escalation:
                current = dataclasses.replace(
                    current,
                    provisional_severity=escalation["to"],
                    rules_fired=tuple(escalation["rules_fired"]),
                    injury_check_required=bool(escalation.get("injury_check_required", False)),
                )
                escalated_seq = int(event["seq"])
        elif event["kind"] == "review":
            reviews.append(event)
            proposed = str(event["severity"])
            if event["decision"] == "final":
                final = proposed
                final_seq = int(event["seq"])
            elif severity_rank(proposed) > severity_rank(current.provisional_severity):
                # A reviewer's escalation counts at once; only downgrades wait for the officer.
                current = dataclasses.replace(current, provisional_severity=proposed)
                escalated_seq = int(event["seq"])
    reviewed = final is not None
    if (
        final is not None
        and escalated_seq > final_seq
        and severity_rank(current.provisional_severity) > severity_rank(final)
    ):
        reviewed = False
    return IncidentState(
        original=original,
        current=current,
        record_hash=record_hash,
        amendments=tuple(amendments),
        reviews=tuple(reviews),
        final_severity=final,
        reviewed=reviewed,
    )


def _same_person(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def check_review(
    state: IncidentState,
    *,
    decision: str,
    severity: str,
    rationale: str,
    reviewer: str,
    role: str,
) -> dict[str, Any]:
    """Check a review against the workflow rules; return what the review record notes.

    Args:
        state: the incident now.
        decision: "classify" (propose a severity) or "final" (sign the final severity).
        severity: the severity the reviewer signs.
        rationale: written reasoning (required for a downgrade).
        reviewer, role: the signing key's holder and registered role.

    Returns:
        {"previous_severity", "downgrade", "escalation"} for the review record.

    Raises:
        EvalError naming the rule that refuses the review.
    """
    incident = state.incident_id
    if decision not in DECISIONS:
        raise EvalError(
            f"decision: {decision!r} is not one of {', '.join(DECISIONS)}", key="decision"
        )
    rank = severity_rank(severity)
    if role not in REVIEW_ROLES:
        raise EvalError(
            f"{reviewer}'s key has role {role}; only a reviewer or safety_officer key reviews "
            "incidents",
            key="role",
        )
    if decision == "final" and role != "safety_officer":
        raise EvalError(
            f"only a safety_officer signs the final severity ({reviewer}'s key has role {role}); "
            "use --decision classify to propose a severity",
            key="role",
        )
    previous = state.severity
    downgrade = rank < severity_rank(previous)
    if downgrade and not rationale.strip():
        raise EvalError(
            f"downgrading {incident} from {previous} to {severity} needs a written rationale "
            "(--rationale)",
            key="rationale",
        )
    if decision == "final" and severity in SERIOUS:
        reporter = state.original.reporter
        if state.original.source == "manual" and reporter and _same_person(reporter, reviewer):
            raise EvalError(
                f"{reviewer} reported {incident}; a {severity} final severity cannot be signed "
                "off by the reporter — another safety officer must sign",
                key="reviewer",
            )
        others = {
            r["reviewer"]
            for r in state.reviews
            if r["severity"] == severity and not _same_person(r["reviewer"], reviewer)
        }
        if not others:
            raise EvalError(
                f"a {severity} final severity needs two distinct signers: have another reviewer "
                f"sign `incidents review {incident} --decision classify --severity {severity}` "
                "first",
                key="reviewer",
            )
    return {
        "previous_severity": previous,
        "downgrade": downgrade,
        "escalation": rank > severity_rank(previous),
    }
