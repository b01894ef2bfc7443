"""The append-only hash chain shared by the trial ledger and the incident log.

A chain is one SQLite table. Each row holds one record's canonical JSON `body` (an envelope:
seq, kind, record_id, window, subject, source_key, signer, at, data), `prev_hash` (the previous
row's hash; 64 zeros for the first) and `hash` = SHA-256(body ‖ prev_hash). Signed records also
hold an Ed25519 `signature` of their hash, so a signature vouches for the record and, through
prev_hash, for everything before it. The query columns (kind, record_id, window, ...) are
generated from the body, so they can never disagree with what was hashed. BEFORE UPDATE / BEFORE
DELETE triggers stop honest mistakes; the walk (`walk_chain`) detects what someone who dropped
them changed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.canonical import CANONICAL_ENCODER
from embodied_eval.errors import EvalError
from embodied_eval.record_base import utc_now_iso
from embodied_eval.store import signing_keys as keylib

GENESIS_HASH = "0" * 64


def canonical_body(envelope: Mapping[str, Any]) -> str:
    """Canonical JSON of an envelope (== canonical_json for text-keyed JSON data: every
    envelope is built from record fields, so the key walk is skipped)."""
    return CANONICAL_ENCODER.encode(envelope)


def record_hash(body: str, prev_hash: str) -> str:
    """hash = SHA-256(canonical JSON ‖ previous hash), hex; both taken as UTF-8 text."""
    return hashlib.sha256((body + prev_hash).encode("utf-8")).hexdigest()


def table_sql(table: str, *, lookups: bool = True, unindexed_kind: str | None = None) -> str:
    """CREATE statements of a chain table and its indexes: a unique (kind, record_id) — over every
    kind but `unindexed_kind` (its rows are unique by other means and cost no index write) —
    and with `lookups` also by window, subject and source key (each index costs on every
    append)."""
    partial = f" WHERE kind != '{unindexed_kind}'" if unindexed_kind else ""
    return f"""
    CREATE TABLE {table} (
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
    CREATE UNIQUE INDEX {table}_record ON {table}(kind, record_id){partial};
    """ + (
        f"""
    CREATE INDEX {table}_window ON {table}(window, kind);
    CREATE INDEX {table}_subject ON {table}(subject) WHERE subject IS NOT NULL;
    CREATE UNIQUE INDEX {table}_source ON {table}(source_key) WHERE source_key IS NOT NULL;
    """
        if lookups
        else ""
    )


def append_only_triggers(table: str, what: str, names: tuple[str, str]) -> tuple[str, str]:
    """BEFORE UPDATE / BEFORE DELETE triggers refusing any change to `table`."""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {names[0]} BEFORE UPDATE ON {table} BEGIN "
        f"SELECT RAISE(ABORT, '{what} is append-only: record an amendment instead'); END",
        f"CREATE TRIGGER IF NOT EXISTS {names[1]} BEFORE DELETE ON {table} BEGIN "
        f"SELECT RAISE(ABORT, '{what} is append-only: records are never deleted'); END",
    )


def triggers_present(conn: sqlite3.Connection, table: str, names: tuple[str, ...]) -> bool:
    """True when every named trigger on `table` exists."""
    found = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,)
        )
    }
    return all(name in found for name in names)


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


def head(conn: sqlite3.Connection, table: str) -> tuple[int, str]:
    """(last seq, last hash); (0, GENESIS_HASH) for an empty chain."""
    row = conn.execute(f"SELECT seq, hash FROM {table} ORDER BY seq DESC LIMIT 1").fetchone()
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
    table: str,
    seq: int,
    body: str,
    prev_hash: str,
    digest: str,
    signature: str | None = None,
) -> None:
    """Insert one row (caller holds the transaction; seq = head + 1, digest = record_hash)."""
    try:
        conn.execute(
            f"INSERT INTO {table} (seq, body, prev_hash, hash, signature) VALUES (?,?,?,?,?)",
            (seq, body, prev_hash, digest, signature),
        )
    except sqlite3.IntegrityError as exc:
        raise EvalError(f"record already stored ({exc}); nothing was written") from None


def append(
    conn: sqlite3.Connection,
    table: str,
    kinds: tuple[str, ...],
    kind: str,
    record_id: str,
    data: Mapping[str, Any],
    *,
    window: str = "",
    subject: str | None = None,
    source_key: str | None = None,
    signing_key: Ed25519PrivateKey | None = None,
    at: str | None = None,
    head_now: tuple[int, str] | None = None,
) -> ChainRow:
    """Append one record of a kind in `kinds` (the caller holds the write transaction).

    `head_now` is the chain head when the caller already knows it (bulk appends track it instead
    of asking SQLite each time); it must be the real head.
    """
    if kind not in kinds:
        raise EvalError(f"kind: {kind!r} is not one of {', '.join(kinds)}", key="kind")
    seq, prev = head_now if head_now is not None else head(conn, table)
    seq += 1
    at = at or utc_now_iso()
    signer = keylib.fingerprint(signing_key.public_key()) if signing_key else None
    body = build_body(
        seq,
        kind,
        record_id,
        data,
        window=window,
        subject=subject,
        source_key=source_key,
        signer=signer,
        at=at,
    )
    digest = record_hash(body, prev)
    signature = keylib.sign(signing_key, digest) if signing_key else None
    insert(conn, table, seq, body, prev, digest, signature)
    return ChainRow(
        seq,
        kind,
        record_id,
        window,
        subject,
        source_key,
        signer,
        at,
        dict(data),
        prev,
        digest,
        signature,
    )


def row_from_sql(
    seq: int, body: str, prev_hash: str, digest: str, signature: str | None, *, what: str = "chain"
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
            f"{what} record seq {seq} is unreadable (run `embodied-eval store verify`)"
        ) from None


def rows(
    conn: sqlite3.Connection,
    table: str,
    where: str = "",
    params: tuple[Any, ...] = (),
    *,
    what: str = "chain",
) -> list[ChainRow]:
    """Rows matching an SQL condition on the generated columns, in chain order."""
    sql = f"SELECT seq, body, prev_hash, hash, signature FROM {table}"
    sql += (f" WHERE {where}" if where else "") + " ORDER BY seq"
    return [row_from_sql(*r, what=what) for r in conn.execute(sql, params)]


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Problem:
    """The first thing found wrong: where (sequence number, record id) and what."""

    seq: int | None
    record_id: str | None
    kind: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "record_id": self.record_id,
            "kind": self.kind,
            "message": self.message,
        }


def record_id_of(body: str) -> str | None:
    """The envelope's record id, or None when the body is not readable."""
    try:
        value = json.loads(body).get("record_id")
        return str(value) if value is not None else None
    except (ValueError, AttributeError):
        return None


def envelope(body: str) -> dict[str, Any] | None:
    """The parsed envelope, or None when the body is not one."""
    try:
        env = json.loads(body)
    except ValueError:
        return None
    return env if isinstance(env, dict) and isinstance(env.get("data"), dict) else None


# The envelope's keys are sorted and "data" (its only nested part) comes first, so the LAST
# occurrence of `"kind":`, `"seq":` or `"signer":` in a canonical body is the envelope's own: a
# quote inside a JSON string is always escaped, so the pattern cannot occur inside a value. These
# lookups replace a full JSON parse of every row (rows that need more are parsed).


def tail_seq(body: str) -> str:
    """The envelope's seq as text ("" when absent); it is always followed by "signer"."""
    i = body.rfind('"seq":')
    return body[i + 6 : body.find(",", i)] if i >= 0 else ""


def tail_kind(body: str) -> str:
    """The envelope's kind."""
    i = body.rfind('"kind":"')
    return body[i + 8 : body.find('"', i + 8)] if i >= 0 else ""


def tail_signed(body: str) -> bool:
    """True unless the envelope's signer is null."""
    i = body.rfind('"signer":')
    return i < 0 or not body.startswith("null", i + 9)


#: Called for each row that must be parsed: (seq, envelope, hash, signature, prev_hash) →
#: a Problem, or None when the row is fine.
RowCheck = Callable[[int, dict[str, Any], str, "str | None", str], "Problem | None"]


@dataclass(frozen=True)
class WalkResult:
    """How far a chain walk got: rows that checked out, the last good hash, the first problem."""

    count: int
    head_hash: str
    problem: Problem | None


def walk_chain(
    conn: sqlite3.Connection,
    table: str,
    parsed_kinds: frozenset[str],
    check: RowCheck | None = None,
    skim: Callable[[int, str], bool] | None = None,
) -> WalkResult:
    """Walk a chain in sequence order; stop at the first bad record.

    Per row: sequence contiguous (a gap → "deleted"), the body's own seq equal to its position
    ("reordered"), SHA-256(body ‖ prev_hash) equal to the stored hash ("edited"), prev_hash equal
    to the previous row's hash ("rewritten"). Rows that are signed, or of a kind in
    `parsed_kinds`, are parsed and handed to `check` — unless `skim(seq, body)` (tried first
    on unsigned rows) reads what it needs from the canonical text and returns True.
    """
    sql = f"SELECT seq, body, prev_hash, hash, signature FROM {table} ORDER BY seq"
    prev = GENESIS_HASH
    expected = 1
    count = 0
    sha256 = hashlib.sha256
    for seq, body, prev_hash, digest, sig in conn.execute(sql):
        problem: Problem | None = None
        if seq != expected:
            problem = Problem(
                expected,
                None,
                "deleted",
                f"record seq {expected} is missing (deleted); the next record is seq {seq} "
                f"({record_id_of(body) or '?'})",
            )
        elif tail_seq(body) != str(seq):
            problem = Problem(
                seq,
                record_id_of(body),
                "reordered",
                f"the record stored at position {seq} says it is seq {tail_seq(body)}: rows were "
                "reordered or replaced",
            )
        elif sha256((body + prev_hash).encode("utf-8")).hexdigest() != digest:
            problem = Problem(
                seq,
                record_id_of(body),
                "edited",
                "contents do not match the record's hash: the record was edited",
            )
        elif prev_hash != prev:
            before = conn.execute(f"SELECT body FROM {table} WHERE seq = ?", (seq - 1,)).fetchone()
            problem = Problem(
                seq - 1,
                record_id_of(before[0]) if before else None,
                "rewritten",
                f"no longer matches the hash that record seq {seq} ({record_id_of(body) or '?'}) "
                "stored for it: it was rewritten after being chained",
            )
        elif check is None or (not sig and skim is not None and skim(seq, body)):
            pass
        elif sig or tail_signed(body) or tail_kind(body) in parsed_kinds:
            env = envelope(body)
            if env is None:
                problem = Problem(seq, None, "content", "record body is not a valid envelope")
            else:
                problem = check(seq, env, digest, sig, prev_hash)
        if problem is not None:
            return WalkResult(count, prev, problem)
        prev = digest
        expected += 1
        count += 1
    return WalkResult(count, prev, None)


def hash_at(conn: sqlite3.Connection, table: str, seq: int) -> str | None:
    """The stored hash of record `seq` (None when absent)."""
    row = conn.execute(f"SELECT hash FROM {table} WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else str(row[0])
