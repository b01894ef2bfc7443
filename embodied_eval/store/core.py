"""The embedded store: one SQLite file (WAL) holding episodes, faults, manifests and safety events.

Every write also appends to the trial ledger (`embodied_eval.store.ledger`), the hash chain that vouches
for each stored row, in the same transaction: an episode is either stored and chained, or absent.

Writing an episode is one transaction and idempotent by `episode_id`: writing the same episode
twice stores it once; writing a *different* episode under an existing id is an error. The schema is
versioned per component (`schema_migrations`), so other packages (the incident log) keep their
tables in the same file with their own migrations (`apply_migrations`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.records import Episode, Fault, check_autonomous_recovery, utc_now_iso
from embodied_eval.store import ledger
from embodied_eval.store.artifacts import stored_artifact_path
from embodied_eval.store.guard import DB_ENV_VAR as DB_ENV_VAR
from embodied_eval.store.guard import DEFAULT_DB as DEFAULT_DB
from embodied_eval.store.guard import default_db_path as default_db_path
from embodied_eval.store.sqlite import apply_migrations as apply_migrations
from embodied_eval.store.sqlite import connect as connect
from embodied_eval.store.sqlite import connect_read_only as connect_read_only
from embodied_eval.store.sqlite import transaction as transaction

#: Window id of records stored without one (e.g. imported from a file without a `window` column).
UNASSIGNED_WINDOW = ""

#: Migrations of the core tables, in order; index + 1 is the schema version.
CORE_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE episodes (
        episode_id    TEXT PRIMARY KEY,
        pair_id       TEXT NOT NULL,
        side          TEXT NOT NULL,
        family        TEXT NOT NULL,
        task_id       TEXT NOT NULL,
        seed          INTEGER NOT NULL,
        policy        TEXT NOT NULL,
        engine        TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempt       INTEGER NOT NULL,
        window        TEXT NOT NULL,
        protocol_hash TEXT NOT NULL,
        started_at    TEXT NOT NULL,
        record_json   TEXT NOT NULL,
        written_at    TEXT NOT NULL
    );
    CREATE INDEX episodes_by_window ON episodes(window, side, family);
    CREATE INDEX episodes_by_pair ON episodes(pair_id, side, attempt);
    CREATE TABLE faults (
        episode_id TEXT NOT NULL REFERENCES episodes(episode_id),
        ordinal    INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        recovered  INTEGER NOT NULL,
        repair_s   REAL NOT NULL,
        fault_json TEXT NOT NULL,
        PRIMARY KEY (episode_id, ordinal)
    );
    CREATE TABLE safety_events (
        episode_id  TEXT NOT NULL REFERENCES episodes(episode_id),
        ordinal     INTEGER NOT NULL,
        event_json  TEXT NOT NULL,
        PRIMARY KEY (episode_id, ordinal)
    );
    CREATE TABLE manifests (
        manifest_hash TEXT PRIMARY KEY,
        protocol_hash TEXT NOT NULL,
        window        TEXT NOT NULL,
        manifest_json TEXT NOT NULL,
        created_at    TEXT NOT NULL
    );
    """,
)


#: Stores an episode row unless its id is already stored (then changes nothing).
_INSERT_EPISODE = "INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (episode_id) DO NOTHING"


def first_difference(stored: Episode, given: Episode) -> str:
    """The name of the first field in which two episodes with one id differ."""
    a, b = stored.to_dict(), given.to_dict()
    return next((k for k in a if a[k] != b.get(k)), "episode_id")


def _episode_body(ep: Episode) -> str:
    data = ep.to_dict()
    data.pop("faults")
    return canonical_json(data)


class Store:
    """Episodes, faults, safety events and manifests in one SQLite file.

    Usable as a context manager. Safe to open from several processes at once (WAL). With
    `read_only` the file is opened through a read-only connection (`connect_read_only`) and
    nothing is migrated or written: for readers beside a running harness (the live console).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        if read_only:
            self.conn = connect_read_only(self.path)
            self.schema_version = len(CORE_MIGRATIONS)
            return
        self.conn = connect(self.path, create=create)
        self.schema_version = apply_migrations(self.conn, "core", CORE_MIGRATIONS)
        apply_migrations(self.conn, ledger.COMPONENT, ledger.MIGRATIONS)
        if (
            ledger.head(self.conn)[0] == 0
            and self.conn.execute("SELECT 1 FROM episodes LIMIT 1").fetchone()
        ):
            with transaction(self.conn):  # a store written before the ledger: chain it once
                ledger.chain_unchained(self.conn, self._load_episode)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ episodes

    def _travelling(self, episode: Episode) -> Episode:
        """`episode` with its artifact paths recorded relative to the store's folder (see
        `artifact_files`), so the store and its folder can be moved together."""
        if not episode.artifacts:
            return episode
        artifacts = tuple(
            dataclasses.replace(a, path=stored_artifact_path(a.path, self.path))
            for a in episode.artifacts
        )
        return dataclasses.replace(episode, artifacts=artifacts)

    def write_episode(
        self, episode: Episode, safety_events: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """Store one episode with its faults and safety events in one transaction.

        Returns True when stored, False when the identical episode was already there. Raises
        `EvalError` when a different episode already has this `episode_id`.
        """
        with transaction(self.conn):
            return self._write_episode_locked(episode, safety_events)

    def write_episodes(
        self,
        episodes: Iterable[Episode],
        *,
        source: Mapping[str, Any] | None = None,
        labels: Sequence[str] | None = None,
    ) -> tuple[int, int]:
        """Store many episodes all-or-nothing; returns (new, already present).

        `source` describes an import — {"importer", "source_file", "source_sha256"}: the new
        episodes are chained naming an `import` record that holds it (none when nothing is new).
        `labels` name each episode's origin (e.g. "row 7") in a refusal.
        """
        new = same = 0
        import_id = None
        if source is not None:
            import_id = ledger.new_record_id("IMP")
        with transaction(self.conn):
            for i, ep in enumerate(episodes):
                try:
                    stored = self._write_episode_locked(ep, (), import_id)
                except EvalError as exc:
                    if labels is None:
                        raise
                    raise EvalError(f"{labels[i]}: {exc}", key=exc.key) from None
                if stored:
                    new += 1
                else:
                    same += 1
            if source is not None and import_id is not None and new:
                ledger.append(
                    self.conn,
                    "import",
                    import_id,
                    {**dict(source), "episodes": new, "already_present": same},
                )
        return new, same

    def _write_episode_locked(
        self,
        episode: Episode,
        safety_events: Sequence[Mapping[str, Any]],
        import_id: str | None = None,
    ) -> bool:
        for fault in episode.faults:
            check_autonomous_recovery(fault, episode.duration_s)
        episode = self._travelling(episode)
        body = _episode_body(episode)
        events_json = [canonical_json(dict(ev)) for ev in safety_events]
        now = utc_now_iso()
        # One statement both checks the id and stores the row: a stored id inserts nothing.
        inserted = self.conn.execute(
            _INSERT_EPISODE,
            (
                episode.episode_id,
                episode.pair_id,
                episode.side,
                episode.family,
                episode.task_id,
                episode.seed,
                episode.policy,
                episode.engine,
                episode.status,
                episode.attempt,
                episode.window,
                episode.protocol_hash,
                episode.started_at,
                body,
                now,
            ),
        ).rowcount
        if not inserted:
            row = self.conn.execute(
                "SELECT record_json FROM episodes WHERE episode_id = ?", (episode.episode_id,)
            ).fetchone()
            stored = self._load_episode(episode.episode_id, row[0])
            if not episode.faults:  # an episodes file carries no faults: they come separately
                stored = stored.replace(faults=())
            if stored != episode:
                field = first_difference(stored, episode)
                raise EvalError(
                    f"episode_id {episode.episode_id!r} is already stored with a different "
                    f"{field} (stored {getattr(stored, field)!r:.60}, given "
                    f"{getattr(episode, field)!r:.60}); a retry must use a new attempt number "
                    "and episode id",
                    key=field,
                )
            return False
        faults_json = [
            self._insert_fault(episode.episode_id, i, fault)
            for i, fault in enumerate(episode.faults)
        ]
        if events_json:
            self.conn.executemany(
                "INSERT INTO safety_events VALUES (?,?,?)",
                [(episode.episode_id, i, ev) for i, ev in enumerate(events_json)],
            )
        ledger.append_episode(self.conn, episode, body, faults_json, events_json, import_id, at=now)
        return True

    def _insert_fault(self, episode_id: str, ordinal: int, fault: Fault) -> str:
        """Insert one fault row; returns its stored JSON."""
        data = fault.to_dict()
        data["episode_id"] = episode_id
        text = canonical_json(data)
        self.conn.execute(
            "INSERT INTO faults VALUES (?,?,?,?,?,?)",
            (
                episode_id,
                ordinal,
                fault.kind,
                int(fault.recovered_autonomously),
                fault.repair_s,
                text,
            ),
        )
        return text

    def _scored_duration(self, episode_id: str, record_json: str) -> float:
        """The episode's duration as scored (s): the stored one, or a chained correction's."""
        stored = float(json.loads(record_json)["duration_s"])
        episode = self.get_episode(episode_id)
        if episode is None:
            return stored
        return float(ledger.scored_view(self.conn, [episode]).episodes[0].duration_s)

    def write_faults(self, faults: Sequence[Fault]) -> tuple[int, int]:
        """Attach faults (each naming its `episode_id`) to stored episodes, all-or-nothing.

        Faults of one episode are keyed by their order in `faults`, so importing the same file
        twice stores them once. Returns (new, already present).
        """
        new = same = 0
        ordinals: dict[str, int] = {}
        durations: dict[str, float] = {}
        chained: list[dict[str, Any]] = []
        with transaction(self.conn):
            for fault in faults:
                if not fault.episode_id:
                    raise EvalError("faults: every fault needs an episode_id", key="episode_id")
                exists = self.conn.execute(
                    "SELECT record_json FROM episodes WHERE episode_id = ?", (fault.episode_id,)
                ).fetchone()
                if not exists:
                    raise EvalError(
                        f"episode_id {fault.episode_id!r}: no such episode in the store "
                        "(import the episodes first)",
                        key="episode_id",
                    )
                if fault.episode_id not in durations:
                    durations[fault.episode_id] = self._scored_duration(fault.episode_id, exists[0])
                check_autonomous_recovery(fault, durations[fault.episode_id])
                ordinal = ordinals.get(fault.episode_id, 0)
                ordinals[fault.episode_id] = ordinal + 1
                row = self.conn.execute(
                    "SELECT fault_json FROM faults WHERE episode_id = ? AND ordinal = ?",
                    (fault.episode_id, ordinal),
                ).fetchone()
                if row is None:
                    text = self._insert_fault(fault.episode_id, ordinal, fault)
                    chained.append(
                        {
                            "episode_id": fault.episode_id,
                            "ordinal": ordinal,
                            "sha256": ledger.sha256_text(text),
                        }
                    )
                    new += 1
                elif Fault.from_json(row[0]) == fault:
                    same += 1
                else:
                    raise EvalError(
                        f"episode_id {fault.episode_id!r}: fault #{ordinal + 1} differs from the "
                        "one already stored",
                        key="episode_id",
                    )
            if chained:
                ledger.append(self.conn, "faults", ledger.new_record_id("FLT"), {"faults": chained})
        return new, same

    def _load_episode(self, episode_id: str, body: str) -> Episode:
        data = json.loads(body)
        data["faults"] = [
            json.loads(r[0])
            for r in self.conn.execute(
                "SELECT fault_json FROM faults WHERE episode_id = ? ORDER BY ordinal",
                (episode_id,),
            )
        ]
        return Episode.from_dict(data)

    def get_episode(self, episode_id: str) -> Episode | None:
        row = self.conn.execute(
            "SELECT record_json FROM episodes WHERE episode_id = ?", (episode_id,)
        ).fetchone()
        return None if row is None else self._load_episode(episode_id, row[0])

    def episode_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])

    def episode_ids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT episode_id FROM episodes")}

    def window_scope(self, window: str) -> tuple[str, ...]:
        """The window ids to read for `window`.

        `(window,)` when episodes are stored under it. Otherwise `(window, UNASSIGNED_WINDOW)`:
        records stored without a window id (a CSV imported without a `window` column) are read
        as this window's, so importing a file and asking for the protocol's window just works.

        Args:
            window: the window id asked for.

        Returns:
            One or two window ids; the caller says in its notes when the second one was used.
        """
        if window == UNASSIGNED_WINDOW:
            return (window,)
        row = self.conn.execute("SELECT 1 FROM episodes WHERE window = ? LIMIT 1", (window,))
        return (window,) if row.fetchone() is not None else (window, UNASSIGNED_WINDOW)

    def episodes(
        self,
        *,
        window: str | None = None,
        protocol_hash: str | None = None,
        side: str | None = None,
        family: str | None = None,
    ) -> list[Episode]:
        """Episodes matching every filter given, ordered by (started_at, episode_id)."""
        clauses, params = [], []
        for column, value in (
            ("window", window),
            ("protocol_hash", protocol_hash),
            ("side", side),
            ("family", family),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.conn.execute(
            f"SELECT episode_id, record_json FROM episodes {where} ORDER BY started_at, episode_id",
            params,
        ).fetchall()
        return [self._load_episode(eid, body) for eid, body in rows]

    def scored_episodes(self, **filters: str | None) -> ledger.ScoredView:
        """Episodes matching the filters (as `episodes`) with every chained audit and correction
        applied, and the list of those used; the stored rows never change."""
        return ledger.scored_view(self.conn, self.episodes(**filters))

    def faults(self, *, window: str | None = None) -> list[Fault]:
        sql = "SELECT f.fault_json FROM faults f JOIN episodes e USING (episode_id)"
        params: list[str] = []
        if window is not None:
            sql += " WHERE e.window = ?"
            params.append(window)
        sql += " ORDER BY f.episode_id, f.ordinal"
        return [Fault.from_json(r[0]) for r in self.conn.execute(sql, params)]

    def safety_events(self, episode_id: str | None = None) -> list[dict[str, Any]]:
        """Safety measurement events recorded with episodes, each with its `episode_id`."""
        sql = "SELECT episode_id, ordinal, event_json FROM safety_events"
        params: list[str] = []
        if episode_id is not None:
            sql += " WHERE episode_id = ?"
            params.append(episode_id)
        sql += " ORDER BY episode_id, ordinal"
        out = []
        for eid, ordinal, body in self.conn.execute(sql, params):
            event = json.loads(body)
            event.setdefault("episode_id", eid)
            event["ordinal"] = ordinal
            out.append(event)
        return out

    # ------------------------------------------------------------------ manifests

    def write_manifest(
        self, manifest_hash: str, protocol_hash: str, window: str, manifest: Any
    ) -> bool:
        """Escrow a manifest; idempotent by its hash. Returns True when newly stored."""
        with transaction(self.conn):
            row = self.conn.execute(
                "SELECT 1 FROM manifests WHERE manifest_hash = ?", (manifest_hash,)
            ).fetchone()
            if row:
                return False
            self.conn.execute(
                "INSERT INTO manifests VALUES (?,?,?,?,?)",
                (manifest_hash, protocol_hash, window, canonical_json(manifest), utc_now_iso()),
            )
            ledger.append_manifest(self.conn, manifest_hash)
            return True

    def manifest(self, manifest_hash: str) -> Any | None:
        row = self.conn.execute(
            "SELECT manifest_json FROM manifests WHERE manifest_hash = ?", (manifest_hash,)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def manifests(self, *, protocol_hash: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT manifest_hash, protocol_hash, window, created_at FROM manifests"
        params: list[str] = []
        if protocol_hash is not None:
            sql += " WHERE protocol_hash = ?"
            params.append(protocol_hash)
        return [
            {"manifest_hash": h, "protocol_hash": p, "window": w, "created_at": c}
            for h, p, w, c in self.conn.execute(sql + " ORDER BY created_at", params)
        ]
