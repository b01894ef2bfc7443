"""Human patches: technician-entered interventions on the robot's software or calibration.

A maintenance closure (seed §3.4) requires *zero human patches* over the audit. A patch is what a
technician does to keep the robot working that the system did not do itself: re-teaching a
waypoint or grasp, recalibrating (camera, hand-eye, force sensor, joint offsets), or changing a
parameter (gains, speeds, thresholds, firmware settings). Each is recorded with who did it, when,
the window, and the episode or drift-calendar day it belongs to, as a `patch` record of the
store's trial ledger (`embodied_eval.store.ledger`): chained like every episode, so a patch cannot be
edited or deleted without `store verify` saying so.

Record one with `embodied-eval trial patch --kind recalibration --episode-id ID --text "..."`.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.record_base import parse_utc
from embodied_eval.records import utc_now_iso
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, transaction

#: Kinds of human patch (anything else is `other`, with the text saying what).
PATCH_KINDS = ("reteach", "recalibration", "parameter_change", "other")


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
    with Store(Path(db), create=False) as store:
        if episode_id and store.get_episode(episode_id) is None:
            raise EvalError(
                f"episode: {episode_id!r} is not in the store {str(db)!r}", key="episode"
            )
        data = {k: v for k, v in patch.to_dict().items() if k not in ("patch_id", "window")}
        with transaction(store.conn):
            ledger.append(
                store.conn,
                "patch",
                patch.patch_id,
                data,
                window=window,
                subject=patch.episode_id,
                at=patch.recorded_at,
            )
    return patch


def window_patches(db: str | os.PathLike[str], window: str) -> list[HumanPatch]:
    """The window's human patches from the trial ledger, in chain order."""
    with Store(Path(db), create=False) as store:
        found = ledger.rows(store.conn, "kind != 'episode' AND kind = 'patch'")
    return [
        HumanPatch(
            patch_id=row.record_id,
            window=row.window,
            recorded_at=str(row.data["recorded_at"]),
            kind=str(row.data["kind"]),
            technician=str(row.data["technician"]),
            episode_id=row.data.get("episode_id"),
            drift=row.data.get("drift"),
            text=str(row.data["text"]),
        )
        for row in found
        if row.window == window
    ]
