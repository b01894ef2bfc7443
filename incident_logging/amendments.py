"""Amendments: corrections recorded as chained records, with automatic escalation.

The original incident row never changes. An amendment lists each change (field, old, new) with
the reason, author and role; changing a fact the classifier reads (event type, stop category,
injury level, damage cost, a measurement) re-runs the classifier: a higher severity escalates the
provisional severity at once (recorded in the amendment), a lower one changes nothing — a
downgrade needs a signed review. Whether an incident counts toward the window changes only by a
safety officer's signed amendment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.errors import EvalError
from embodied_eval.store.core import transaction
from incident_logging.ids import new_id
from incident_logging.log_core import IncidentLogCore
from incident_logging.record import CLASSIFIED_FIELDS, FIXED_FIELDS, IncidentRecord
from incident_logging.taxonomy import severity_rank
from incident_logging.thresholds import ThresholdTable, default_table
from incident_logging.workflow import apply_changes


def amend_incident(
    store: IncidentLogCore,
    incident_id: str,
    changes: Mapping[str, Any],
    *,
    reason: str,
    author: str,
    role: str | None,
    key: Ed25519PrivateKey | None = None,
    table: ThresholdTable | None = None,
) -> dict[str, Any]:
    """Record an amendment of an incident; the original row never changes.

    Args:
        incident_id: the incident.
        changes: {field: new value}; `measurements.<key>` changes one measurement.
        reason, author, role: why, who and in which role (role None: the key's registered
            role, else technician).
        key: signing key; required to change `counts_toward_window` (safety officer).
        table: thresholds for re-classification (default: the table that classified it).

    Returns:
        The amendment payload (with `escalation` when the new facts raised the severity).
    """
    if not changes:
        raise EvalError("amend: give at least one field to change", key="field")
    if not reason.strip():
        raise EvalError("reason: an amendment needs a reason (--reason)", key="reason")
    author, role = store.signer_identity(author, role, key)
    with transaction(store.conn):
        state = store.state(incident_id)
        current = state.current
        names = {f.name for f in dataclasses.fields(IncidentRecord)}
        listed: list[dict[str, Any]] = []
        for name, new in changes.items():
            base = name.split(".", 1)[0] if name.startswith("measurements.") else name
            if base not in names or name == "measurements":
                raise EvalError(
                    f"field: {name!r} is not an incident field (measurements are amended "
                    "one at a time as measurements.<key>)",
                    key="field",
                )
            if base in FIXED_FIELDS:
                raise EvalError(
                    f"field: {name!r} cannot be amended (severity changes go through "
                    "`incidents review`; identity fields are fixed)",
                    key="field",
                )
            if name == "counts_toward_window" and (key is None or role != "safety_officer"):
                raise EvalError(
                    "counts_toward_window: only a safety_officer, signing with their key, "
                    "changes whether an incident counts",
                    key="role",
                )
            old = (
                current.measurements.get(name.split(".", 1)[1])
                if name.startswith("measurements.")
                else getattr(current, name)
            )
            if isinstance(old, tuple):
                old = list(old)
            if old == new:
                raise EvalError(f"{name}: already {new!r}; nothing to amend", key=name)
            listed.append({"field": name, "old": old, "new": new})
        if (
            changes.get("counts_toward_window", True) is False
            and "counts_justification" not in changes
        ):
            listed.append(
                {
                    "field": "counts_justification",
                    "old": current.counts_justification,
                    "new": reason.strip(),
                }
            )
        amended = apply_changes(current, listed)
        payload: dict[str, Any] = {
            "target": "incident",
            "incident_id": incident_id,
            "changes": listed,
            "reason": reason.strip(),
            "author": author,
            "role": role,
        }
        if any(c["field"].split(".", 1)[0] in CLASSIFIED_FIELDS for c in listed):
            payload.update(_reclassify(store, current, amended, table))
        store.append_row(
            "amendment",
            new_id("AMD"),
            payload,
            window=current.window,
            subject=incident_id,
            signing_key=key,
        )
    return payload


def _reclassify(
    store: IncidentLogCore,
    current: IncidentRecord,
    amended: IncidentRecord,
    table: ThresholdTable | None,
) -> dict[str, Any]:
    if table is None:
        table = (
            store.threshold_table(current.threshold_hash)
            if current.threshold_hash
            else default_table()
        )
    store.ensure_table(table)
    result = amended.classify(table)
    view = {
        "severity": result.severity,
        "rules_fired": [r.to_dict() for r in result.rules],
        "threshold_version": result.threshold_version,
        "threshold_hash": result.threshold_hash,
    }
    if result.severity is not None and severity_rank(result.severity) > severity_rank(
        current.provisional_severity
    ):
        return {
            "escalation": {
                "from": current.provisional_severity,
                "to": result.severity,
                "rules_fired": view["rules_fired"],
                "injury_check_required": result.injury_check_required,
                "threshold_hash": result.threshold_hash,
            }
        }
    return {"classifier": view}
