"""The incident log's hash chain: one table (`incident_chain`) built with `embodied_eval.store.hashchain`.

Each row holds one record's canonical JSON `body` (an envelope: seq, kind, record_id, window,
subject, source_key, signer, at, data), `prev_hash` and `hash` = SHA-256(body ‖ prev_hash); signed
records hold an Ed25519 signature of their hash. The construction, the triggers and the walk are
shared with the trial ledger (`embodied_eval.store.ledger`); this module names the incident log's table
and record kinds.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from embodied_eval.store import hashchain
from embodied_eval.store.hashchain import GENESIS_HASH, ChainRow, canonical_body, record_hash

__all__ = [
    "COMPONENT",
    "GENESIS_HASH",
    "KINDS",
    "MIGRATIONS",
    "TABLE",
    "TRIGGERS_SQL",
    "TRIGGER_NAMES",
    "ChainRow",
    "canonical_body",
    "head",
    "record_hash",
    "row_from_sql",
    "rows",
    "triggers_present",
]

COMPONENT = "incident_log"
TABLE = "incident_chain"
KINDS = (
    "incident",
    "amendment",
    "review",
    "exposure",
    "key",
    "revocation",
    "thresholds",
    "window_close",
    "integrity_note",
)
TRIGGER_NAMES = ("incident_chain_no_update", "incident_chain_no_delete")
TRIGGERS_SQL = hashchain.append_only_triggers(TABLE, "incident log", TRIGGER_NAMES)

#: Schema migrations of the incident log (index + 1 = version).
MIGRATIONS: tuple[str, ...] = (
    hashchain.table_sql(TABLE) + f"{TRIGGERS_SQL[0]};\n{TRIGGERS_SQL[1]};\n",
)


def head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(last seq, last hash); (0, GENESIS_HASH) for an empty chain."""
    return hashchain.head(conn, TABLE)


def row_from_sql(
    seq: int, body: str, prev_hash: str, digest: str, signature: str | None
) -> ChainRow:
    """Parse one stored row (EvalError when its body is not a valid envelope)."""
    return hashchain.row_from_sql(seq, body, prev_hash, digest, signature, what="incident log")


def rows(conn: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[ChainRow]:
    """Rows matching an SQL condition on the generated columns, in chain order."""
    return hashchain.rows(conn, TABLE, where, params, what="incident log")


def triggers_present(conn: sqlite3.Connection) -> bool:
    """True when both append-only triggers exist."""
    return hashchain.triggers_present(conn, TABLE, TRIGGER_NAMES)
