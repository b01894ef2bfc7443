"""The append-only hash chain every incident-log record lives in (one table, one chain).

Each row holds one record's canonical JSON `body` (an envelope: seq, kind, record_id, window,
subject, source_key, signer, at, data), `prev_hash` (the previous row's hash; 64 zeros for the
first) and `hash` = SHA-256(body ‖ prev_hash). Signed records also hold an Ed25519 `signature` of
their hash, so a signature vouches for the record and, through prev_hash, for everything before it.

Integrity rests on the chain and the signatures. The BEFORE UPDATE / BEFORE DELETE triggers stop
honest mistakes, but anyone holding the file can drop them; `incident_logging.verify` detects what
such a person then changes. The query columns (kind, record_id, window, ...) are generated from the
body, so they can never disagree with what was hashed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import utc_now_iso

COMPONENT = "incident_log"
GENESIS_HASH = "0" * 64
TABLE = "incident_chain"
KINDS = (
    "incident",
    "amendment",
    "review",
    "exposure",
    "key",
    "thresholds",
    "window_close",
    "integrity_note",
)
TRIGGER_NAMES = ("incident_chain_no_update", "incident_chain_no_delete")

TRIGGERS_SQL = (
    f"CREATE TRIGGER IF NOT EXISTS {TRIGGER_NAMES[0]} BEFORE UPDATE ON {TABLE} BEGIN "
    "SELECT RAISE(ABORT, 'incident log is append-only: record an amendment instead'); END",
    f"CREATE TRIGGER IF NOT EXISTS {TRIGGER_NAMES[1]} BEFORE DELETE ON {TABLE} BEGIN "
    "SELECT RAISE(ABORT, 'incident log is append-only: records are never deleted'); END",
)

#: Schema migrations of the incident log (index + 1 = version).
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE {TABLE} (
        seq        INTEGER PRIMARY KEY,
        body       TEXT NOT NULL,
        prev_hash  TEXT NOT NULL,
        hash       TEXT NOT NULL,
        signature  TEXT,
        kind       TEXT GENERATED ALWAYS AS (json_extract(body, '$.kind')) VIRTUAL,
        record_id  TEXT GENERATED ALWAYS AS (json_extract(body, '$.record_id')) VIRTUAL,
        window     TEXT GENERATED ALWAYS AS (json_extract(body, '$.window')) VIRTUAL,
        subject    TEXT GENERATED ALWAYS AS (json_extract(body, '$.subject')) VIRTUAL,
        source_key TEXT GENERATED ALWAYS AS (json_extract(body, '$.source_key')) VIRTUAL
    );
    CREATE UNIQUE INDEX incident_chain_record ON {TABLE}(kind, record_id);
    CREATE INDEX incident_chain_window ON {TABLE}(window, kind);
    CREATE INDEX incident_chain_subject ON {TABLE}(subject) WHERE subject IS NOT NULL;
    CREATE UNIQUE INDEX incident_chain_source ON {TABLE}(source_key)
        WHERE source_key IS NOT NULL;
    {TRIGGERS_SQL[0]};
    {TRIGGERS_SQL[1]};
    """,
)


#: The C JSON encoder set up exactly as `embodied_eval.canonical.canonical_json` (sorted keys, no
#: spaces, UTF-8, NaN/inf refused). For JSON data with text keys — every envelope is built from
#: record fields — it gives the same text without canonical_json's Python pre-walk, which cost
#: most of an append (tests pin the equality).
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_body(envelope: Mapping[str, Any]) -> str:
    """Canonical JSON of an envelope (== canonical_json for text-keyed JSON data)."""
    return _ENCODER.encode(envelope)


def record_hash(body: str, prev_hash: str) -> str:
    """hash = SHA-256(canonical JSON ‖ previous hash), hex; both taken as UTF-8 text."""
    return hashlib.sha256((body + prev_hash).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ChainRow:
    """One stored record: its position, envelope fields, payload and chain hashes."""

    seq: int
    kind: str
    record_id: str
    window: str
    subject: str | None
    source_key: str | None
    signer: str | None
    at: str
    data: dict[str, Any]
    prev_hash: str
    hash: str
    signature: str | None


def head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(last seq, last hash); (0, GENESIS_HASH) for an empty chain."""
    row = conn.execute(f"SELECT seq, hash FROM {TABLE} ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


def build_body(
    seq: int,
    kind: str,
    record_id: str,
    data: Mapping[str, Any],
    *,
    window: str = "",
    subject: str | None = None,
    source_key: str | None = None,
    signer: str | None = None,
    at: str | None = None,
) -> str:
    """The canonical JSON envelope of one record (what is hashed)."""
    if kind not in KINDS:
        raise EvalError(f"kind: {kind!r} is not one of {', '.join(KINDS)}", key="kind")
    try:
        return canonical_body(
            {
                "seq": seq,
                "kind": kind,
                "record_id": record_id,
                "window": window,
                "subject": subject,
                "source_key": source_key,
                "signer": signer,
                "at": at or utc_now_iso(),
                "data": dict(data),
            }
        )
    except (TypeError, ValueError) as exc:
        raise EvalError(f"{kind} {record_id}: not storable as JSON ({exc})") from None


def insert(
    conn: sqlite3.Connection,
    seq: int,
    body: str,
    prev_hash: str,
    digest: str,
    signature: str | None = None,
) -> None:
    """Insert one row (caller holds the transaction; seq = head + 1, digest = record_hash)."""
    try:
        conn.execute(
            f"INSERT INTO {TABLE} (seq, body, prev_hash, hash, signature) VALUES (?,?,?,?,?)",
            (seq, body, prev_hash, digest, signature),
        )
    except sqlite3.IntegrityError as exc:
        raise EvalError(f"record already stored ({exc}); nothing was written") from None


def row_from_sql(
    seq: int, body: str, prev_hash: str, digest: str, signature: str | None
) -> ChainRow:
    """Parse one stored row (EvalError when its body is not a valid envelope)."""
    try:
        env = json.loads(body)
        return ChainRow(
            seq=int(seq),
            kind=env["kind"],
            record_id=env["record_id"],
            window=env["window"],
            subject=env.get("subject"),
            source_key=env.get("source_key"),
            signer=env.get("signer"),
            at=env["at"],
            data=env["data"],
            prev_hash=prev_hash,
            hash=digest,
            signature=signature,
        )
    except (ValueError, KeyError, TypeError):
        raise EvalError(
            f"incident log record seq {seq} is unreadable (run `embodied-eval incidents verify`)"
        ) from None


SELECT_ROWS = f"SELECT seq, body, prev_hash, hash, signature FROM {TABLE}"


def rows(conn: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[ChainRow]:
    """Rows matching an SQL condition on the generated columns, in chain order."""
    sql = SELECT_ROWS + (f" WHERE {where}" if where else "") + " ORDER BY seq"
    return [row_from_sql(*r) for r in conn.execute(sql, params)]


def triggers_present(conn: sqlite3.Connection) -> bool:
    """True when both append-only triggers exist."""
    names = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (TABLE,)
        )
    }
    return all(name in names for name in TRIGGER_NAMES)
