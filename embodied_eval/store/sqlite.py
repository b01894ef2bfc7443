"""The SQLite plumbing under the store: opening the file (WAL, busy timeout, refusing files that
are not ours), all-or-nothing transactions and per-component schema migrations.

`embodied_eval.store.core` re-exports `connect`, `transaction` and `apply_migrations`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from embodied_eval.errors import EvalError
from embodied_eval.record_base import utc_now_iso
from embodied_eval.store.guard import (
    check_is_store,
    memory_copy,
    open_read_only,
    stores_are_read_only,
)

#: WAL pages between automatic checkpoints (SQLite's default is 1 000). A checkpoint fsyncs the
#: WAL and the database and writes each changed page once; an episode changes ~9 pages, so at the
#: default every ~110 episodes paid two fsyncs and rewrote the same index pages — most of a
#: single-episode write's wall time. 10 000 pages (~40 MB of WAL) amortizes that over ~1 100.
WAL_CHECKPOINT_PAGES = 10_000


def connect(path: str | os.PathLike[str], *, create: bool = True) -> sqlite3.Connection:
    """Open the SQLite file in WAL mode with a generous busy timeout (several writers OK).

    Durability: WAL with `synchronous=NORMAL`. A committed transaction is in the WAL file before
    COMMIT returns, so killing the process (SIGKILL, a crash) loses nothing committed and never
    half of a transaction — an episode and its ledger record are both there or both absent.
    The WAL is fsynced at checkpoints, not at every commit: a power cut or OS crash may roll back
    the transactions since the last checkpoint (recovery keeps a checksummed prefix of the WAL,
    so the chain stays valid and merely shorter; a resumed run re-runs what is missing).
    `synchronous=FULL` (an fsync per episode) would close that window at several milliseconds
    per write.

    A path that is not one of our stores is refused before anything is written to it; inside
    `store_guard.read_only_stores()` the store is opened as an in-memory copy instead.
    """
    p = Path(path)
    is_new = check_is_store(p)
    if stores_are_read_only():
        if is_new:
            raise EvalError(f"store {str(p)!r} does not exist", key="db")
        conn = memory_copy(p)
        conn.execute("PRAGMA foreign_keys=ON")
        return conn
    if not create and is_new:
        raise EvalError(
            f"store {str(p)!r} does not exist (run a trial or import episodes first, or pass --db)",
            key="db",
        )
    if create:
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(str(p), timeout=60.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=60000")
    except sqlite3.DatabaseError as exc:
        raise EvalError(f"store {str(p)!r} is not a usable SQLite database: {exc}") from None
    return conn


def connect_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open an existing store for reading only: an SQLite `mode=ro` URI connection with
    `query_only` on, so nothing this connection runs can write (a live console beside a run).

    Raises:
        EvalError: the file does not exist or is not one of our stores.
    """
    p = Path(path)
    if check_is_store(p):
        raise EvalError(f"store {str(p)!r} does not exist (pass the run's --db)", key="db")
    try:
        conn = sqlite3.connect(
            f"{p.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0, isolation_level=None
        )
        conn.execute("PRAGMA query_only=ON")
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise EvalError(f"store {str(p)!r} cannot be read: {exc}", key="db") from None
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any exception (all or nothing)."""
    for attempt in range(50):
        try:
            conn.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.05 * (attempt + 1))
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def _sql_statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (a `;` inside CREATE TRIGGER ... END or a
    string literal does not end a statement)."""
    out: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                out.append(pending)
            pending = ""
    if pending.strip(" \t\r\n;"):
        out.append(pending)
    return out


def apply_migrations(conn: sqlite3.Connection, component: str, migrations: Sequence[str]) -> int:
    """Bring `component`'s tables up to `len(migrations)`; returns the schema version.

    Each migration runs in its own transaction together with its version bump, so a crash leaves
    the schema at a consistent version.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " component TEXT NOT NULL, version INTEGER NOT NULL, applied_at TEXT NOT NULL,"
        " PRIMARY KEY (component, version))"
    )
    with transaction(conn):
        row = conn.execute(
            "SELECT MAX(version) FROM schema_migrations WHERE component = ?", (component,)
        ).fetchone()
    current = int(row[0] or 0)
    if current > len(migrations):
        raise EvalError(
            f"store schema for {component} is version {current}, newer than this embodied-eval "
            f"understands ({len(migrations)}); upgrade embodied-eval",
            key="db",
        )
    for version in range(current + 1, len(migrations) + 1):
        with transaction(conn):
            again = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE component = ? AND version = ?",
                (component, version),
            ).fetchone()
            if again:  # another process migrated meanwhile
                continue
            for statement in _sql_statements(migrations[version - 1]):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (component, version, utc_now_iso()),
            )
    return len(migrations)


def schema_is_current(path: str | os.PathLike[str], versions: Mapping[str, int]) -> bool:
    """True when the store at `path` has every component at least at its version (so opening it
    adds no tables); also True when there is no store there (opening it then says so)."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return True
    conn = open_read_only(p)
    try:
        found = dict(
            conn.execute("SELECT component, MAX(version) FROM schema_migrations GROUP BY component")
        )
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()
    return all(int(found.get(c) or 0) >= v for c, v in versions.items())
