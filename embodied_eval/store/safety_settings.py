"""The robot's safety settings in the trial ledger: every change the harness runs with is a record.

A robot's safety settings are what its profile sets for the harness to keep it safe: joint
position, velocity and acceleration limits, the Cartesian workspace, the deadman, the safe stop,
the stale-state and episode deadlines and the heartbeat rate (`RobotBackend.safety_settings`). The
monitor thresholds of the sim side are the protocol's `[incidents.thresholds]` and change with the
protocol hash; these are the robot's own.

Each real run reads them from its backend when it connects. `note_safety_settings` compares them
with the robot's last `safety_settings` ledger record and appends a new record when they differ
(the first run of a robot records them all), naming each changed setting with its old and new value
— so no run can use settings the ledger does not hold, and a change made between two runs is on
record before the first episode that runs with it.

The certificate's `validity.safety_settings` names the record in force at certification; a later
record of the same robot with other settings voids it (`embodied_eval.certificate.validity.
void_since`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.store import ledger

#: Ledger record kind of a robot's safety settings as a run used them.
KIND = "safety_settings"


def settings_digest(settings: Mapping[str, Any]) -> str:
    """SHA-256 of the settings' canonical JSON (what a certificate names)."""
    return ledger.sha256_text(canonical_json(dict(settings)))


def changed_settings(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> dict[str, list[Any]]:
    """{setting: [old, new]} for every setting whose value differs, appears or disappears
    (None stands for absent)."""
    return {
        key: [before.get(key), after.get(key)]
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    }


def last_record(
    conn: sqlite3.Connection, robot_id: str, up_to_seq: int | None = None
) -> ledger.ChainRow | None:
    """The robot's last safety-settings record (at or before ledger seq `up_to_seq`), or None."""
    found = None
    for row in ledger.rows(conn, "kind = ?", (KIND,)):
        if up_to_seq is not None and row.seq > up_to_seq:
            break
        if row.data.get("robot_id") == robot_id:
            found = row
    return found


def note_safety_settings(
    conn: sqlite3.Connection, robot_id: str, settings: Mapping[str, Any]
) -> ledger.ChainRow | None:
    """Append a safety-settings record for `robot_id` when `settings` differ from its last one
    (the caller holds the write transaction); returns the new record, or None when unchanged.

    Raises:
        EvalError: no robot id, or a setting that is not a JSON number, text, flag or list.
    """
    if not robot_id:
        raise EvalError(
            "robot_id: the protocol's [real] robot_id names whose safety settings these are",
            key="robot_id",
        )
    plain = dict(settings)
    try:
        digest = settings_digest(plain)
    except (TypeError, ValueError) as exc:
        raise EvalError(f"safety settings of {robot_id}: not plain values ({exc})") from exc
    last = last_record(conn, robot_id)
    if last is not None and last.data.get("digest") == digest:
        return None
    before: Mapping[str, Any] = {} if last is None else last.data.get("settings") or {}
    data = {
        "robot_id": robot_id,
        "settings": plain,
        "digest": digest,
        "previous": None if last is None else last.record_id,
        "changed": changed_settings(before, plain),
    }
    return ledger.append(conn, KIND, ledger.new_record_id("SAF"), data, subject=robot_id)


def describe_change(row: ledger.ChainRow, limit: int = 3) -> str:
    """The record's changed settings as "name old → new" (at most `limit`, then "… and N more")."""
    changed = row.data.get("changed") or {}
    parts = [f"{k} {v[0]!r} → {v[1]!r}" for k, v in list(changed.items())[:limit]]
    if len(changed) > limit:
        parts.append(f"… and {len(changed) - limit} more")
    return ", ".join(parts) or "settings changed"


def certified_entry(conn: sqlite3.Connection, robot_id: str, head: int) -> dict[str, Any] | None:
    """The certificate's `validity.safety_settings`: the record in force at ledger seq `head`."""
    row = last_record(conn, robot_id, head)
    if row is None:
        return None
    return {"record": row.record_id, "seq": row.seq, "digest": row.data.get("digest")}


def voided_by(
    conn: sqlite3.Connection, robot_id: str, head: int, certified: Mapping[str, Any] | None
) -> tuple[int, str] | None:
    """(seq, reason) of the first record after `head` that sets other safety settings than the
    certified ones (any record, when none were recorded at certification); None otherwise."""
    digest = None if certified is None else certified.get("digest")
    for row in ledger.rows(conn, "kind = ?", (KIND,)):
        if row.seq <= head or row.data.get("robot_id") != robot_id:
            continue
        if row.data.get("digest") != digest:
            return (
                row.seq,
                f"safety-settings record {row.record_id} (ledger seq {row.seq}, {row.at}): "
                f"{describe_change(row)}",
            )
    return None
