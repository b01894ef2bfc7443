"""What may be opened as a store, and opening one without writing to it.

- `check_is_store`: a `--db` path that exists must be one of our stores (an SQLite file whose
  tables are all versioned in `schema_migrations`) or empty. Anything else — a text file, someone
  else's SQLite database — is refused *before* any write, so its bytes stay unchanged.
- `read_only_stores`: inside this context every store is opened as an in-memory copy of the file
  (read through a read-only connection), so commands that only check (`verify --db`) never write.
- `discard_new_store`: a store file a refused command created is removed again when it holds no
  rows, so a refusal leaves no new file behind.
"""

from __future__ import annotations

import contextvars
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from embodied_eval.errors import EvalError

DEFAULT_DB = "embodied-eval.db"
DB_ENV_VAR = "EMBODIED_EVAL_DB"


def default_db_path() -> Path:
    """`$EMBODIED_EVAL_DB` if set, else `./embodied-eval.db`."""
    return Path(os.environ.get(DB_ENV_VAR, DEFAULT_DB))


#: Side files SQLite keeps beside a WAL database.
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")

_READ_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("read_only", default=False)


@contextmanager
def read_only_stores() -> Iterator[None]:
    """Open every store in this context as an in-memory copy: nothing is written to disk."""
    token = _READ_ONLY.set(True)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


def stores_are_read_only() -> bool:
    return _READ_ONLY.get()


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection used only to read `path` (EvalError when it is not SQLite).

    A plain connection that runs SELECTs only: it takes SQLite's shared locks like any reader,
    so it is safe while other processes write (a `mode=ro` or `immutable` connection is not:
    it can see a half-written WAL database as malformed).
    """
    try:
        conn = sqlite3.connect(str(path), timeout=60.0)
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise EvalError(f"store {str(path)!r} is not a usable SQLite database: {exc}") from None
    return conn


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]


def check_is_store(path: Path) -> bool:
    """Refuse a path that is not one of our stores; returns True when it does not exist yet.

    Raises:
        EvalError: a folder, a special file, a file that is not SQLite, or an SQLite database
            with tables of its own (one line naming the path and what to do).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise EvalError(f"store {str(path)!r} cannot be opened: {exc.strerror}", key="db") from None
    if stat.S_ISDIR(st.st_mode):
        raise EvalError(f"store {str(path)!r} is a folder; give a .db file path", key="db")
    if not stat.S_ISREG(st.st_mode):
        raise EvalError(f"store {str(path)!r} is not a regular file", key="db")
    if st.st_size == 0:
        return False
    # The file is only ever opened through SQLite: opening and closing it with open() would drop
    # the POSIX locks of this process's other connections to it (and corrupt a live store).
    try:
        conn = open_read_only(path)
    except EvalError:
        raise EvalError(
            f"store {str(path)!r} is not an SQLite database (not an embodied-eval store); "
            "give another --db path",
            key="db",
        ) from None
    try:
        tables = _tables(conn)
        if tables and "schema_migrations" not in tables:
            raise EvalError(
                f"store {str(path)!r} is an SQLite database that is not an embodied-eval store "
                f"(it has tables {', '.join(tables[:5])}); give another --db path",
                key="db",
            )
        if tables:
            columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")}
            if not {"component", "version", "applied_at"} <= columns:
                raise EvalError(
                    f"store {str(path)!r} has a schema_migrations table that is not ours; "
                    "give another --db path",
                    key="db",
                )
    finally:
        conn.close()
    return False


def memory_copy(path: Path) -> sqlite3.Connection:
    """An in-memory copy of the store at `path` (empty when it does not exist)."""
    target = sqlite3.connect(":memory:", isolation_level=None)
    if path.exists() and path.stat().st_size > 0:
        source = open_read_only(path)
        try:
            source.backup(target)
        finally:
            source.close()
    return target


def store_holds_rows(path: Path) -> bool:
    """True when any table of the store at `path` (but its schema versions) holds a row."""
    conn = open_read_only(path)
    try:
        for table in _tables(conn):
            if table == "schema_migrations":
                continue
            quoted = table.replace('"', '""')
            if conn.execute(f'SELECT 1 FROM "{quoted}" LIMIT 1').fetchone():
                return True
        return False
    finally:
        conn.close()


def discard_new_store(path: Path) -> bool:
    """Remove a store file (and its side files) that a refused command created, when it holds
    no rows. Returns True when removed."""
    if not path.is_file():
        return False
    try:
        if path.stat().st_size > 0 and store_holds_rows(path):
            return False
    except EvalError:
        return False
    for suffix in ("", *SIDE_SUFFIXES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return True
