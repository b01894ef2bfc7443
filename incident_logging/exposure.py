"""The exposure ledger: periods of real-robot operation per window, chained like incidents.

Each entry (`embodied_eval.records.ExposureEntry`) says when, how many active hours, how they were
measured and whether a safety detector was blind. Entries of one robot may not overlap (hours
would count twice); corrections are amendment records; a closed window takes no more entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.errors import EvalError
from embodied_eval.records import ExposureEntry, parse_utc
from embodied_eval.store.core import transaction
from incident_logging import chain
from incident_logging.ids import new_id
from incident_logging.log_core import IncidentLogCore

#: Exposure-entry fields an amendment may change.
EXPOSURE_AMENDABLE = ("start", "end", "active_hours", "how_measured", "blind", "robot_id", "note")


def exposure_entries(store: IncidentLogCore, window: str | None) -> list[ExposureEntry]:
    where, params = "kind = 'exposure'", ()
    amend_where, amend_params = "kind = 'amendment'", ()
    if window is not None:
        where += " AND window = ?"
        amend_where += " AND window = ?"
        params = amend_params = (window,)  # type: ignore[assignment]
    entries = {
        r.record_id: ExposureEntry.from_dict(r.data) for r in chain.rows(store.conn, where, params)
    }
    for row in chain.rows(store.conn, amend_where, amend_params):
        if row.data.get("target") != "exposure" or row.subject not in entries:
            continue
        changes = {c["field"]: c["new"] for c in row.data["changes"]}
        entries[row.subject] = entries[row.subject].replace(**changes)
    return list(entries.values())


def check_overlap(store: IncidentLogCore, entry: ExposureEntry, ignore: str | None = None) -> None:
    start, end = parse_utc(entry.start, key="start"), parse_utc(entry.end, key="end")
    for other in exposure_entries(store, None):
        if other.entry_id in (entry.entry_id, ignore) or other.robot_id != entry.robot_id:
            continue
        o_start, o_end = parse_utc(other.start, key="start"), parse_utc(other.end, key="end")
        if start < o_end and o_start < end:
            raise EvalError(
                f"exposure {entry.entry_id}: {entry.start}–{entry.end} overlaps "
                f"{other.entry_id} ({other.start}–{other.end}) on robot "
                f"{entry.robot_id or '(unnamed)'}; hours would be counted twice",
                key="start",
            )


def add_exposure(store: IncidentLogCore, entry: ExposureEntry) -> bool:
    """Append an exposure entry; False when the identical entry is already stored."""
    with transaction(store.conn):
        existing = store.find("exposure", entry.entry_id)
        if existing is not None:
            if ExposureEntry.from_dict(existing.data) == entry:
                return False
            raise EvalError(
                f"exposure entry {entry.entry_id!r} is already stored with different values; "
                "amend it instead",
                key="entry_id",
            )
        store.require_open(entry.window)
        check_overlap(store, entry)
        store.append_row("exposure", entry.entry_id, entry.to_dict(), window=entry.window)
    return True


def amend_exposure(
    store: IncidentLogCore,
    entry_id: str,
    changes: Mapping[str, Any],
    *,
    reason: str,
    author: str,
    role: str | None,
    key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Correct an exposure entry by an amendment record (its window must still be open)."""
    if not changes:
        raise EvalError("amend: give at least one field to change", key="field")
    if not reason.strip():
        raise EvalError("reason: an amendment needs a reason (--reason)", key="reason")
    author, role = store.signer_identity(author, role, key)
    with transaction(store.conn):
        entries = {e.entry_id: e for e in exposure_entries(store, None)}
        if entry_id not in entries:
            raise EvalError(f"no exposure entry {entry_id!r}", key="entry_id")
        entry = entries[entry_id]
        store.require_open(entry.window)
        listed = []
        for name, new in changes.items():
            if name not in EXPOSURE_AMENDABLE:
                raise EvalError(
                    f"field: {name!r} (exposure fields: {', '.join(EXPOSURE_AMENDABLE)})",
                    key="field",
                )
            listed.append({"field": name, "old": getattr(entry, name), "new": new})
        amended = entry.replace(**{c["field"]: c["new"] for c in listed})
        check_overlap(store, amended)
        payload = {
            "target": "exposure",
            "entry_id": entry_id,
            "changes": listed,
            "reason": reason.strip(),
            "author": author,
            "role": role,
        }
        store.append_row(
            "amendment",
            new_id("AMD"),
            payload,
            window=entry.window,
            subject=entry_id,
            signing_key=key,
        )
    return payload
