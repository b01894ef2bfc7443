"""`IncidentStore`: incidents, amendments, signed reviews, exposure and window closes, all in one
append-only hash chain inside the harness's SQLite file.

Nothing is ever updated or deleted: a correction is an amendment record (field, old, new, reason,
author, role, time), a classification is a signed review record, and what an incident *is now* is
a fold over its records (`incident_logging.workflow`). Writes run in one transaction each
(bulk appends in one transaction for all), so a failure writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.errors import EvalError
from embodied_eval.records import ExposureEntry, Incident, utc_now_iso
from embodied_eval.store import ledger
from embodied_eval.store.core import default_db_path, transaction
from incident_logging import chain
from incident_logging.amendments import amend_incident
from incident_logging.exposure import add_exposure, amend_exposure, exposure_entries
from incident_logging.ids import new_id
from incident_logging.log_core import IncidentLogCore
from incident_logging.record import IncidentRecord
from incident_logging.thresholds import ThresholdTable, default_table
from incident_logging.verify import VerifyReport, require_verified, verify_chain
from incident_logging.workflow import IncidentState, check_review


def _comparable(record: IncidentRecord) -> dict[str, Any]:
    data = record.to_dict()
    for name in ("sequence", "recorded_at"):
        data.pop(name)
    return data


class IncidentStore(IncidentLogCore):
    """The incident log in the harness's SQLite file (`embodied_eval.store.core` path rules).

    Usable as a context manager. Every public write is one transaction.
    """

    # ------------------------------------------------------------------ incidents

    def _append_incident_locked(
        self,
        record: IncidentRecord,
        table: ThresholdTable | None,
        head: tuple[int, str],
        open_windows: set[str],
    ) -> tuple[IncidentRecord | None, tuple[int, str]]:
        """Append one classified incident; returns (stored record or None, new head)."""
        source_key = None
        if record.source == "auto" and record.episode_id and record.event_ordinal is not None:
            source_key = f"{record.episode_id}#{record.event_ordinal}"
        # One query for both duplicate checks: the same detector event, or the same id.
        hit = self.conn.execute(
            f"SELECT source_key IS ? FROM {chain.TABLE} WHERE source_key = ? "
            f"UNION ALL SELECT 0 FROM {chain.TABLE} WHERE kind = 'incident' AND record_id = ?",
            (source_key, source_key, record.incident_id),
        ).fetchone()
        if hit is not None and hit[0]:
            return None, head
        existing = self.find("incident", record.incident_id) if hit is not None else None
        if existing is not None:
            if _comparable(IncidentRecord.from_dict(existing.data)) == _comparable(record):
                return None, head
            raise EvalError(
                f"incident_id {record.incident_id!r} is already stored with different contents; "
                "correct it with `incidents amend`",
                key="incident_id",
            )
        if record.window not in open_windows:
            self.require_open(record.window)
            open_windows.add(record.window)
        if record.threshold_hash:
            if table is None:
                default = default_table()
                if record.threshold_hash == default.table_hash:
                    table = default
                elif self.find("thresholds", record.threshold_hash) is None:
                    raise EvalError(
                        f"{record.incident_id}: threshold table {record.threshold_hash[:12]}… is "
                        "not in the log; pass the table that classified it",
                        key="threshold_hash",
                    )
            if table is not None:
                if table.table_hash != record.threshold_hash:
                    raise EvalError(
                        f"{record.incident_id}: classified with threshold table "
                        f"{record.threshold_hash[:12]}…, not the one given",
                        key="threshold_hash",
                    )
                if table.table_hash not in self._stored_tables:
                    self.ensure_table(table)
                    head = chain.head(self.conn)
        seq = head[0] + 1
        at = utc_now_iso()
        data = record.to_dict()
        data["sequence"] = seq
        data["recorded_at"] = at
        row = self.append_row(
            "incident",
            record.incident_id,
            data,
            window=record.window,
            source_key=source_key,
            at=at,
            head=head,
        )
        # The record was validated when built; only the two store-assigned fields change, so
        # copy its attributes instead of re-running the validation.
        stored = object.__new__(IncidentRecord)
        stored.__dict__.update(record.__dict__, sequence=seq, recorded_at=at)
        return stored, (row.seq, row.hash)

    def ingested_event_keys(self) -> set[str]:
        """ "episode_id#ordinal" of every detector event already turned into an incident."""
        return {
            r[0]
            for r in self.conn.execute(
                f"SELECT source_key FROM {chain.TABLE} WHERE source_key IS NOT NULL"
            )
        }

    def append_incident(
        self, record: IncidentRecord, *, table: ThresholdTable | None = None
    ) -> IncidentRecord | None:
        """Append an already-classified record in one transaction.

        Returns the stored record (with `sequence` and `recorded_at`), or None when the same
        incident (same id and contents, or the same detector event) is already stored.
        """
        with transaction(self.conn):
            stored, _ = self._append_incident_locked(record, table, chain.head(self.conn), set())
        return stored

    def append_incidents(
        self, records: Iterable[IncidentRecord], *, table: ThresholdTable | None = None
    ) -> list[IncidentRecord]:
        """Append many classified records in ONE transaction (all or nothing); returns the new."""
        out = []
        open_windows: set[str] = set()
        with transaction(self.conn):
            head = chain.head(self.conn)
            for record in records:
                stored, head = self._append_incident_locked(record, table, head, open_windows)
                if stored is not None:
                    out.append(stored)
        return out

    def report(self, record: IncidentRecord, table: ThresholdTable | None = None) -> IncidentRecord:
        """Classify `record` (provisional = max(classifier, reported severity)) and append it."""
        table = table if table is not None else default_table()
        classified = record.with_classification(record.classify(table))
        stored = self.append_incident(classified, table=table)
        if stored is None:
            raise EvalError(f"incident {record.incident_id!r} is already stored", key="incident_id")
        return stored

    # ------------------------------------------------------------------ amendments

    def amend(
        self,
        incident_id: str,
        changes: Mapping[str, Any],
        *,
        reason: str,
        author: str,
        role: str | None = None,
        key: Ed25519PrivateKey | None = None,
        table: ThresholdTable | None = None,
    ) -> dict[str, Any]:
        """Record an amendment of an incident: `incident_logging.amendments.amend_incident`."""
        return amend_incident(
            self,
            incident_id,
            changes,
            reason=reason,
            author=author,
            role=role,
            key=key,
            table=table,
        )

    # ------------------------------------------------------------------ reviews

    def review(
        self,
        incident_id: str,
        key: Ed25519PrivateKey,
        *,
        decision: str,
        severity: str,
        rationale: str = "",
    ) -> dict[str, Any]:
        """Sign a review of an incident with the reviewer's key (rules: `workflow.check_review`)."""
        info = self.key_info(key)
        with transaction(self.conn):
            state = self.state(incident_id)
            notes = check_review(
                state,
                decision=decision,
                severity=severity,
                rationale=rationale,
                reviewer=info["holder"],
                role=info["role"],
            )
            payload = {
                "incident_id": incident_id,
                "incident_hash": state.record_hash,
                "decision": decision,
                "severity": severity,
                "rationale": rationale.strip(),
                "reviewer": info["holder"],
                "role": info["role"],
                **notes,
            }
            self.append_row(
                "review",
                new_id("REV"),
                payload,
                window=state.current.window,
                subject=incident_id,
                signing_key=key,
            )
        return payload

    # ------------------------------------------------------------------ exposure ledger

    def exposure(self, window: str | None = None) -> list[ExposureEntry]:
        """Exposure-ledger entries (amendments applied), in the order recorded."""
        return exposure_entries(self, window)

    def add_exposure(self, entry: ExposureEntry) -> bool:
        """Append an exposure entry; False when the identical entry is already stored."""
        return add_exposure(self, entry)

    def amend_exposure(
        self,
        entry_id: str,
        changes: Mapping[str, Any],
        *,
        reason: str,
        author: str,
        role: str | None = None,
        key: Ed25519PrivateKey | None = None,
    ) -> dict[str, Any]:
        """Correct an exposure entry by an amendment record (its window must be open)."""
        return amend_exposure(
            self, entry_id, changes, reason=reason, author=author, role=role, key=key
        )

    # ------------------------------------------------------------------ window close

    def close_window(self, window: str, key: Ed25519PrivateKey) -> dict[str, Any]:
        """The protocol owner signs the window summary: chain head, record count, exposure hours
        (watched and blind), incident counts and the fingerprints of the registered keys — and
        seals the window in the trial ledger: both chains' heads, record counts and exposure
        hours, signed in one transaction (`embodied_eval.store.ledger` `seal`). The two records name
        each other, so removing either chain's tail after the seal is detected.

        Refused when the window is already closed, has no exposure hours, or still has unreviewed
        major/critical incidents.
        """
        # Imported here: the statistics package is heavy and most commands never need it.
        from embodied_eval.embodiment.safety_metrics import counted_incidents, exposure_hours

        info = self.key_info(key)
        if info["role"] != "protocol_owner":
            raise EvalError(
                f"only the protocol_owner signs a window close ({info['holder']}'s key has role "
                f"{info['role']})",
                key="role",
            )
        with transaction(self.conn):
            self.require_open(window)
            states = self.states(window)
            pending = [s.incident_id for s in states if s.unreviewed_serious]
            if pending:
                raise EvalError(
                    f"window {window!r} has unreviewed major/critical incident(s) "
                    f"{', '.join(pending)}; a safety officer must sign them first",
                    key="window",
                )
            covered, blind = exposure_hours(exposure_entries(self, window))
            if covered <= 0:
                raise EvalError(
                    f"window {window!r} has no exposure hours; record them with "
                    "`incidents exposure add` before closing",
                    key="window",
                )
            count, head_hash = chain.head(self.conn)
            ledger_count, ledger_head = ledger.head(self.conn)
            episodes = self.conn.execute(
                "SELECT COUNT(*) FROM episodes WHERE window = ?", (window,)
            ).fetchone()[0]
            contracts = [s.to_contract() for s in states]
            payload = {
                "window": window,
                "head_hash": head_hash,
                "record_count": count,
                "incidents": len(states),
                "counted_incidents": len(counted_incidents(contracts)),
                "exposure_h": covered,
                "blind_h": blind,
                "owner": info["holder"],
                "role": info["role"],
                # Anyone holding the file can register a key; the owner certifies the set.
                "keys": [k["fingerprint"] for k in self.keys() if "revoked_at" not in k],
                "episode_chain": {
                    "head_hash": ledger_head,
                    "record_count": ledger_count,
                    "seal_seq": ledger_count + 1,
                    "episodes": episodes,
                },
            }
            row = self.append_row("window_close", window, payload, window=window, signing_key=key)
            seal = ledger.append(
                self.conn,
                "seal",
                window,
                {
                    "window": window,
                    "episode_head": {"head_hash": ledger_head, "record_count": ledger_count},
                    "incident_head": {"head_hash": row.hash, "record_count": row.seq},
                    "episodes": episodes,
                    "incidents": len(states),
                    "exposure_h": covered,
                    "blind_h": blind,
                    "owner": info["holder"],
                    "role": info["role"],
                },
                window=window,
                signing_key=key,
            )
        return {
            **payload,
            "seq": row.seq,
            "hash": row.hash,
            "signer": row.signer,
            "seal": {"seq": seal.seq, "hash": seal.hash},
        }

    # ------------------------------------------------------------------ integrity

    def verify(self) -> VerifyReport:
        """Walk the chain and the signatures (see `incident_logging.verify`)."""
        return verify_chain(self.conn)

    def require_verified(self) -> VerifyReport:
        """The verification report; EvalError naming the first bad record when it fails."""
        return require_verified(self.conn, self.path)

    def restore_triggers(self, author: str) -> bool:
        """Recreate missing append-only triggers and record that in the chain; False if present."""
        if not author.strip():
            raise EvalError("author: name who restores the triggers (--author)", key="author")
        with transaction(self.conn):
            if chain.triggers_present(self.conn):
                return False
            for statement in chain.TRIGGERS_SQL:
                self.conn.execute(statement)
            self.append_row(
                "integrity_note",
                new_id("NOTE"),
                {
                    "note": "append-only triggers were found missing and were restored",
                    "author": author.strip(),
                },
            )
        return True


# ---------------------------------------------------------------------- plugin entry points


def _db(db_path: str | os.PathLike[str] | None) -> Path:
    return Path(db_path) if db_path is not None else default_db_path()


def window_incidents(db_path: str | os.PathLike[str] | None, window: str) -> list[Incident]:
    """The window's incidents as data-contract records (final severity if reviewed).

    Refuses (EvalError naming the first bad record) when the log does not verify, so no report
    is built on a tampered log.
    """
    with IncidentStore(_db(db_path), read_only=True) as store:
        store.require_verified()
        return store.incidents(window)


def window_exposure(db_path: str | os.PathLike[str] | None, window: str) -> list[ExposureEntry]:
    """The window's exposure-ledger entries (blind periods flagged by `blind`); verified first."""
    with IncidentStore(_db(db_path), read_only=True) as store:
        store.require_verified()
        return store.exposure(window)


def integrity_state(db_path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """For the whole-store verify: the incident chain's verification report, the key registry
    (holder, role, public key, revocation) and the window closes, read from the log."""
    with IncidentStore(_db(db_path), create=False, read_only=True) as store:
        report = store.verify()
        try:
            keys = store.keys()
            closes = [
                {**r.data, "seq": r.seq, "hash": r.hash, "signer": r.signer}
                for r in chain.rows(store.conn, "kind = 'window_close'")
            ]
        except EvalError:  # unreadable rows: the report already names the first bad one
            keys, closes = [], []
    return {"report": report, "keys": keys, "closes": closes}


def states_by_id(states: Sequence[IncidentState]) -> dict[str, IncidentState]:
    """Index incident states by id."""
    return {s.incident_id: s for s in states}
