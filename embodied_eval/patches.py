"""Human patches: technician-entered interventions on the robot's software or calibration.

A maintenance closure (seed §3.4) requires *zero human patches* over the audit. A patch is what a
technician does to keep the robot working that the system did not do itself: re-teaching a
waypoint or grasp, recalibrating (camera, hand-eye, force sensor, joint offsets), or changing a
parameter (gains, speeds, thresholds, firmware settings). Each is recorded with who did it, when,
the window, and the episode or drift-calendar day it belongs to, in the store's
`human_patches` table (append-only: a patch cannot be edited or deleted through the harness).

Record one with `embodied-eval trial patch --kind recalibration --episode ID --text "..."`.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.record_base import parse_utc
from embodied_eval.records import utc_now_iso
from embodied_eval.store import apply_migrations, connect, transaction

#: Kinds of human patch (anything else is `other`, with the text saying what).
PATCH_KINDS = ("reteach", "recalibration", "parameter_change", "other")

MIGRATIONS = (
    """
    CREATE TABLE human_patches (
        patch_id TEXT PRIMARY KEY,
        window TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        kind TEXT NOT NULL,
        technician TEXT NOT NULL,
        episode_id TEXT,
        drift TEXT,
        text TEXT NOT NULL
    );
    CREATE TRIGGER human_patches_no_update BEFORE UPDATE ON human_patches
    BEGIN SELECT RAISE(ABORT, 'human patches are append-only'); END;
    CREATE TRIGGER human_patches_no_delete BEFORE DELETE ON human_patches
    BEGIN SELECT RAISE(ABORT, 'human patches are append-only'); END;
    """,
)


@dataclass(frozen=True)
class HumanPatch:
    """One technician-entered patch (see the module docstring)."""

    patch_id: str
    window: str
    recorded_at: str
    kind: str
    technician: str
    episode_id: str | None
    drift: str | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _open(db: str | os.PathLike[str], *, create: bool) -> sqlite3.Connection:
    conn = connect(Path(db), create=create)
    apply_migrations(conn, "human_patches", MIGRATIONS)
    return conn


def record_patch(
    db: str | os.PathLike[str],
    *,
    window: str,
    kind: str,
    technician: str,
    text: str,
    episode_id: str | None = None,
    drift: str | None = None,
    recorded_at: str | None = None,
) -> HumanPatch:
    """Append a human patch to the store; returns it.

    Args:
        db: the store. window: the reporting window.
        kind: one of PATCH_KINDS. technician: who did it. text: what was done and why.
        episode_id: the real episode it was made before or during (its drift day follows), or
        drift: the drift-calendar setting (day) it was made on, when not tied to an episode.
        recorded_at: ISO-8601 UTC time (default now).

    Raises:
        EvalError: an unknown kind, empty technician/text, or neither episode nor drift given.
    """
    if kind not in PATCH_KINDS:
        raise EvalError(f"kind: {kind!r} is not one of {', '.join(PATCH_KINDS)}", key="kind")
    for name, value in (("technician", technician), ("text", text), ("window", window)):
        if not value or not value.strip():
            raise EvalError(f"{name}: required (who patched, and what was done)", key=name)
    if not episode_id and not drift:
        raise EvalError(
            "episode: name the episode (or the drift day with --drift) the patch belongs to",
            key="episode",
        )
    when = recorded_at or utc_now_iso()
    parse_utc(when, key="recorded_at")
    patch = HumanPatch(
        f"patch-{uuid.uuid4().hex[:12]}",
        window,
        when,
        kind,
        technician.strip(),
        episode_id or None,
        drift or None,
        text.strip(),
    )
    conn = _open(db, create=False)
    try:
        if episode_id:
            row = conn.execute(
                "SELECT 1 FROM episodes WHERE episode_id = ?", (episode_id,)
            ).fetchone()
            if row is None:
                raise EvalError(
                    f"episode: {episode_id!r} is not in the store {str(db)!r}", key="episode"
                )
        with transaction(conn):
            conn.execute(
                "INSERT INTO human_patches VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    patch.patch_id,
                    patch.window,
                    patch.recorded_at,
                    patch.kind,
                    patch.technician,
                    patch.episode_id,
                    patch.drift,
                    patch.text,
                ),
            )
    finally:
        conn.close()
    return patch


def window_patches(db: str | os.PathLike[str], window: str) -> list[HumanPatch]:
    """The window's human patches in the order recorded (none when the store has no table)."""
    conn = connect(Path(db), create=False)
    try:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'human_patches'"
        ).fetchone()
        if exists is None:
            return []
        rows = conn.execute(
            "SELECT patch_id, window, recorded_at, kind, technician, episode_id, drift, text "
            "FROM human_patches WHERE window = ? ORDER BY recorded_at, patch_id",
            (window,),
        ).fetchall()
    finally:
        conn.close()
    return [HumanPatch(*row) for row in rows]
