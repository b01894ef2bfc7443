"""The incident log's core: the chain table in the harness's SQLite file, lookups, key registry
and the fold of an incident's records into its current state.

`IncidentLogCore` is what the record-writing modules (`amendments`, `exposure`, `store`) work
on; `incident_logging.store.IncidentStore` adds the incident, review, exposure and window-close
writes. Imports run one way: store → amendments/exposure → log_core.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.errors import EvalError
from embodied_eval.records import Incident
from embodied_eval.store import hashchain, ledger
from embodied_eval.store import signing_keys as keylib
from embodied_eval.store.core import (
    CORE_MIGRATIONS,
    apply_migrations,
    connect,
    default_db_path,
    transaction,
)
from embodied_eval.store.guard import read_only_stores
from embodied_eval.store.sqlite import schema_is_current
from incident_logging import chain
from incident_logging.record import IncidentRecord
from incident_logging.taxonomy import check_role
from incident_logging.thresholds import ThresholdTable, table_from_dict
from incident_logging.workflow import IncidentState, fold_state


class IncidentLogCore:
    """The incident log in the harness's SQLite file (`embodied_eval.store.core` path rules).

    Usable as a context manager. Every public write is one transaction.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        """Open the log; `read_only` (for commands that only read) never adds tables to the
        file: a store without the incident log's tables is read as an in-memory copy with them."""
        self.path = Path(path) if path is not None else default_db_path()
        versions = {
            "core": len(CORE_MIGRATIONS),
            ledger.COMPONENT: len(ledger.MIGRATIONS),
            chain.COMPONENT: len(chain.MIGRATIONS),
        }
        if read_only and not schema_is_current(self.path, versions):
            with read_only_stores():
                self.conn = connect(self.path, create=False)
        else:
            self.conn = connect(self.path, create=create)
        # The trial ledger lives in the same file (a window close seals both chains).
        apply_migrations(self.conn, "core", CORE_MIGRATIONS)
        apply_migrations(self.conn, ledger.COMPONENT, ledger.MIGRATIONS)
        self.schema_version = apply_migrations(self.conn, chain.COMPONENT, chain.MIGRATIONS)
        self._stored_tables: set[str] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ chain primitives

    def append_row(
        self,
        kind: str,
        record_id: str,
        data: Mapping[str, Any],
        *,
        window: str = "",
        subject: str | None = None,
        source_key: str | None = None,
        signing_key: Ed25519PrivateKey | None = None,
        at: str | None = None,
        head: tuple[int, str] | None = None,
    ) -> chain.ChainRow:
        """Append one record (caller holds the transaction).

        `head` is the chain head when the caller already knows it (bulk appends track it instead
        of asking SQLite each time); it must be the real head.
        """
        return hashchain.append(
            self.conn,
            chain.TABLE,
            chain.KINDS,
            kind,
            record_id,
            data,
            window=window,
            subject=subject,
            source_key=source_key,
            signing_key=signing_key,
            at=at,
            head_now=head,
        )

    def find(self, kind: str, record_id: str) -> chain.ChainRow | None:
        found = chain.rows(self.conn, "kind = ? AND record_id = ?", (kind, record_id))
        return found[0] if found else None

    def head(self) -> tuple[int, str]:
        """(record count, head hash) of the chain."""
        return chain.head(self.conn)

    # ------------------------------------------------------------------ thresholds

    def ensure_table(self, table: ThresholdTable) -> None:
        digest = table.table_hash
        if digest in self._stored_tables:
            return
        if self.find("thresholds", digest) is None:
            self.append_row("thresholds", digest, table.to_dict())
        self._stored_tables.add(digest)

    def threshold_table(self, table_hash: str) -> ThresholdTable:
        """A threshold table stored in the log, by hash."""
        row = self.find("thresholds", table_hash)
        if row is None:
            raise EvalError(f"threshold table {table_hash[:12]}… is not in the incident log")
        return table_from_dict(row.data)

    # ------------------------------------------------------------------ windows

    def window_close(self, window: str) -> dict[str, Any] | None:
        """The signed close of `window` (payload plus seq, signer, hash), or None when open."""
        row = self.find("window_close", window)
        if row is None:
            return None
        return {**row.data, "seq": row.seq, "signer": row.signer, "hash": row.hash, "at": row.at}

    def require_open(self, window: str) -> None:
        if self.find("window_close", window) is not None:
            raise EvalError(
                f"window {window!r} is closed (its summary is signed); record this in an open "
                "window",
                key="window",
            )

    def incident(self, incident_id: str) -> IncidentRecord:
        """The original record (EvalError when unknown)."""
        row = self.find("incident", incident_id)
        if row is None:
            raise EvalError(f"no incident {incident_id!r} in the log", key="incident_id")
        return IncidentRecord.from_dict(row.data)

    def _events(self, where: str, params: tuple[Any, ...]) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in chain.rows(self.conn, where, params):
            event = {**row.data, "kind": row.kind, "seq": row.seq, "at": row.at}
            if row.kind == "review":
                event["signer"] = row.signer
            grouped.setdefault(row.subject or "", []).append(event)
        return grouped

    def state(self, incident_id: str) -> IncidentState:
        """The incident now: original, amendments and reviews applied."""
        row = self.find("incident", incident_id)
        if row is None:
            raise EvalError(f"no incident {incident_id!r} in the log", key="incident_id")
        events = self._events(
            "kind IN ('amendment', 'review') AND subject = ?", (incident_id,)
        ).get(incident_id, [])
        return fold_state(IncidentRecord.from_dict(row.data), row.hash, events)

    def states(self, window: str | None = None) -> list[IncidentState]:
        """Every incident (of one window) as it stands now, in chain order."""
        if window is None:
            rows = chain.rows(self.conn, "kind = 'incident'")
            events = self._events("kind IN ('amendment', 'review')", ())
        else:
            rows = chain.rows(self.conn, "kind = 'incident' AND window = ?", (window,))
            events = self._events("kind IN ('amendment', 'review') AND window = ?", (window,))
        return [
            fold_state(IncidentRecord.from_dict(r.data), r.hash, events.get(r.record_id, []))
            for r in rows
        ]

    def incidents(self, window: str | None = None) -> list[Incident]:
        """Data-contract incidents (final severity if reviewed, else provisional)."""
        return [s.to_contract() for s in self.states(window)]

    # ------------------------------------------------------------------ keys

    def register_key(self, key: Ed25519PrivateKey, holder: str, role: str) -> dict[str, Any]:
        """Register a key's public half with its holder and role (signed by the key itself)."""
        check_role(role)
        if not holder.strip():
            raise EvalError("holder: name the person who holds the key", key="holder")
        public = keylib.public_key_hex(key.public_key())
        fp = keylib.fingerprint(public)
        with transaction(self.conn):
            if self.find("key", fp) is not None:
                raise EvalError(f"key {fp[:16]} is already registered", key="key")
            data = {"holder": holder.strip(), "role": role, "public_key": public, "fingerprint": fp}
            self.append_row("key", fp, data, signing_key=key)
        return data

    def keys(self) -> list[dict[str, Any]]:
        """Registered keys: holder, role, public_key, fingerprint, registered_at, and — for a
        revoked key — revoked_at, revoked_by and revocation_reason."""
        revoked = {r.record_id: r for r in chain.rows(self.conn, "kind = 'revocation'")}
        out = []
        for r in chain.rows(self.conn, "kind = 'key'"):
            info = {**r.data, "registered_at": r.at}
            rev = revoked.get(r.record_id)
            if rev is not None:
                info.update(
                    revoked_at=rev.at,
                    revoked_seq=rev.seq,
                    revoked_by=rev.data.get("revoked_by"),
                    revocation_reason=rev.data.get("reason"),
                )
            out.append(info)
        return out

    def key_info(
        self, key: Ed25519PrivateKey | str, *, allow_revoked: bool = False
    ) -> dict[str, Any]:
        """The registration of a key (or fingerprint); EvalError when not registered, or revoked
        (unless `allow_revoked`: a revoked key signs nothing new)."""
        fp = key if isinstance(key, str) else keylib.fingerprint(key.public_key())
        row = self.find("key", fp)
        if row is None:
            raise EvalError(
                f"key {fp[:16]} is not registered in this log (create one with `keys create`)",
                key="key",
            )
        revocation = self.find("revocation", fp)
        if revocation is not None and not allow_revoked:
            raise EvalError(
                f"key {fp[:16]} ({row.data['holder']}, {row.data['role']}) was revoked at "
                f"{revocation.at}; sign with a current key",
                key="key",
            )
        info = dict(row.data)
        if revocation is not None:
            info["revoked_at"] = revocation.at
        return info

    def revoke_key(
        self, fingerprint: str, key: Ed25519PrivateKey, *, reason: str
    ) -> dict[str, Any]:
        """Revoke a registered key: signatures it makes on records chained after this one fail
        verification. Signed by the key itself, a protocol_owner or a safety_officer."""
        if not reason.strip():
            raise EvalError("reason: say why the key is revoked (--reason)", key="reason")
        matches = [k for k in self.keys() if k["fingerprint"].startswith(fingerprint.lower())]
        if len(matches) != 1:
            raise EvalError(
                f"key {fingerprint!r}: {'no' if not matches else 'more than one'} registered key "
                "has this fingerprint (prefix)",
                key="fingerprint",
            )
        target = matches[0]
        if "revoked_at" in target:
            raise EvalError(f"key {target['fingerprint'][:16]} is already revoked", key="key")
        signer = self.key_info(key)
        own = signer["fingerprint"] == target["fingerprint"]
        if not own and signer["role"] not in ("protocol_owner", "safety_officer"):
            raise EvalError(
                "a key is revoked by its holder, a protocol_owner or a safety_officer "
                f"({signer['holder']}'s key has role {signer['role']})",
                key="role",
            )
        payload = {
            "fingerprint": target["fingerprint"],
            "holder": target["holder"],
            "role": signer["role"],
            "revoked_by": signer["holder"],
            "reason": reason.strip(),
        }
        with transaction(self.conn):
            row = self.append_row(
                "revocation",
                target["fingerprint"],
                payload,
                subject=target["fingerprint"],
                signing_key=key,
            )
            # The trial ledger orders its own signed records against the revocation.
            ledger.append(
                self.conn,
                "revocation",
                target["fingerprint"],
                {**payload, "incident_log_seq": row.seq},
                subject=target["fingerprint"],
                signing_key=key,
            )
        return payload

    def signer_identity(
        self, author: str, role: str | None, key: Ed25519PrivateKey | None
    ) -> tuple[str, str]:
        """(author, role) of a change; with a key they must match its registration.

        `role` None means: the key's registered role when a key signs, else `technician`.
        """
        if key is None:
            if not author.strip():
                raise EvalError("author: name who makes the amendment (--author)", key="author")
            return author.strip(), check_role(role if role is not None else "technician")
        info = self.key_info(key)
        registered = str(info["role"])
        role = check_role(role if role is not None else registered)
        if author and author.strip() and author.strip() != info["holder"]:
            raise EvalError(
                f"author: {author!r} but the key belongs to {info['holder']!r}", key="author"
            )
        if role != registered:
            raise EvalError(
                f"role: {role!r} but the key is registered as {registered!r} (leave out --role "
                "to sign in the key's role)",
                key="role",
            )
        return info["holder"], role
