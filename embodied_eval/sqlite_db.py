"""The SQLite plumbing under the store: opening the file (WAL, busy timeout, refusing files that
are not ours), all-or-nothing transactions and per-component schema migrations.

`embodied_eval.store` re-exports `connect`, `transaction` and `apply_migrations`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from embodied_eval.errors import EvalError
from embodied_eval.record_base import utc_now_iso
from embodied_eval.store_guard import check_is_store, memory_copy, stores_are_read_only


def connect(path: str | os.PathLike[str], *, create: bool = True) -> sqlite3.Connection:
    """Open the SQLite file in WAL mode with a generous busy timeout (several writers OK).

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
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=60000")
    except sqlite3.DatabaseError as exc:
        raise EvalError(f"store {str(p)!r} is not a usable SQLite database: {exc}") from None
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
