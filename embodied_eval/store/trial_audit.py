"""Human audits and corrections of stored episodes, appended to the trial ledger as amendments.

* `audit_episode` — a technician, signing with their registered Ed25519 key, records the true
  outcome of a stored episode (did it succeed; optionally the quality they measured). The stored
  row never changes; the scored view sets `audited_success` from the audit, and the
  success-detector correction (Rogan–Gladen, `embodied_eval.embodiment.beyond`) uses it. An
  answer that contradicts itself — a measured quality at or above the episode's success threshold
  q* with "did not succeed", or below q* with "succeeded" — is refused.
* `amend_episode` — a correction of an episode's fields (field, old, new, reason, author, role),
  optionally signed; identity and provenance fields are fixed.

Signers are looked up in the key registry of the incident log (reached through
`embodied_eval.plugins.INCIDENT_LOG`): a key must be registered, not revoked, and have the role.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.records import Episode, check_autonomous_recovery
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, default_db_path, transaction

#: Roles whose signed audits the success-detector correction accepts.
AUDIT_ROLES = ("technician",)


def _registration(db: Path, key: Ed25519PrivateKey) -> dict[str, Any]:
    with resolve(INCIDENT_LOG["open"])(db) as log:
        info: dict[str, Any] = log.key_info(key)
    return info


def _current(store: Store, episode_id: str) -> tuple[Episode, ledger.ChainRow]:
    episode = store.get_episode(episode_id)
    chained = ledger.find(store.conn, "episode", episode_id)
    if episode is None or chained is None:
        raise EvalError(f"no episode {episode_id!r} in the store", key="episode_id")
    view = ledger.scored_view(store.conn, [episode])
    return view.episodes[0], chained


def _append(
    store: Store,
    kind: str,
    prefix: str,
    payload: dict[str, Any],
    current: Episode,
    episode_id: str,
    key: Ed25519PrivateKey | None,
) -> dict[str, Any]:
    """Chain one audit or amendment of episode `current` (the caller holds the transaction);
    returns the payload with its record id, sequence number and signer."""
    row = ledger.append(
        store.conn,
        kind,
        ledger.new_record_id(prefix),
        payload,
        window=current.window,
        subject=episode_id,
        signing_key=key,
    )
    return {**payload, "record_id": row.record_id, "seq": row.seq, "signer": row.signer}


def check_audit_answer(succeeded: bool, quality: float | None, target_quality: float) -> None:
    """Refuse an audit whose measured quality and success answer contradict each other."""
    if quality is None:
        return
    if not 0.0 <= quality <= 1.0:
        raise EvalError(f"--quality {quality}: expected a value in [0, 1]", key="quality")
    if quality >= target_quality and not succeeded:
        raise EvalError(
            f"contradictory audit: quality {quality:g} is at or above the success threshold "
            f"q* = {target_quality:g} but the answer is 'did not succeed'; correct one of them",
            key="quality",
        )
    if quality < target_quality and succeeded:
        raise EvalError(
            f"contradictory audit: quality {quality:g} is below the success threshold "
            f"q* = {target_quality:g} but the answer is 'succeeded'; correct one of them",
            key="quality",
        )


def audit_episode(
    db: str | os.PathLike[str] | None,
    episode_id: str,
    key: Ed25519PrivateKey,
    *,
    succeeded: bool,
    quality: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    """Append a technician-signed audit of a stored episode; returns the audit payload."""
    path = Path(db) if db is not None else default_db_path()
    info = _registration(path, key)
    if info["role"] not in AUDIT_ROLES:
        raise EvalError(
            f"an audit is signed by a technician's key ({info['holder']}'s key has role "
            f"{info['role']})",
            key="role",
        )
    with Store(path, create=False) as store, transaction(store.conn):
        current, chained = _current(store, episode_id)
        check_audit_answer(succeeded, quality, current.target_quality)
        payload = {
            "episode_id": episode_id,
            "episode_hash": chained.hash,
            "succeeded": bool(succeeded),
            "quality": quality,
            "detector_success": current.success,
            "target_quality": current.target_quality,
            "auditor": info["holder"],
            "role": info["role"],
            "note": note.strip(),
        }
        return _append(store, "audit", "AUD", payload, current, episode_id, key)


def amend_episode(
    db: str | os.PathLike[str] | None,
    episode_id: str,
    changes: Mapping[str, Any],
    *,
    reason: str,
    author: str,
    role: str,
    key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Append a correction of a stored episode's fields; the stored row never changes."""
    if not changes:
        raise EvalError("amend: give at least one field to change (--set FIELD=VALUE)", key="field")
    if not reason.strip():
        raise EvalError("reason: a correction needs a reason (--reason)", key="reason")
    path = Path(db) if db is not None else default_db_path()
    if key is not None:
        info = _registration(path, key)
        if author.strip() and author.strip() != info["holder"]:
            raise EvalError(f"author: {author!r} but the key belongs to {info['holder']!r}")
        author, role = info["holder"], info["role"]
    if not author.strip():
        raise EvalError("author: name who makes the correction (--author)", key="author")
    # dataclasses.fields: the record's fields only, not its class-level bookkeeping.
    names = {f.name for f in dataclasses.fields(Episode)} - ledger.FIXED_FIELDS
    with Store(path, create=False) as store, transaction(store.conn):
        current, chained = _current(store, episode_id)
        listed = []
        for name, new in changes.items():
            if name not in names:
                raise EvalError(
                    f"field: {name!r} cannot be corrected (fields: {', '.join(sorted(names))})",
                    key="field",
                )
            old = current.to_dict()[name]
            if old == new:
                raise EvalError(f"{name}: already {new!r}; nothing to correct", key=name)
            listed.append({"field": name, "old": old, "new": new})
        amended = current.replace(**{c["field"]: c["new"] for c in listed})  # validates them
        for fault in amended.faults:
            # A shorter duration may not leave an autonomous recovery longer than the episode.
            check_autonomous_recovery(fault, amended.duration_s)
        payload = {
            "episode_id": episode_id,
            "episode_hash": chained.hash,
            "changes": listed,
            "reason": reason.strip(),
            "author": author.strip(),
            "role": role,
        }
        return _append(store, "amendment", "AMD", payload, current, episode_id, key)
