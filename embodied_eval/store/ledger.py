"""The trial ledger: every stored episode, fault, manifest, import, audit, correction and window
seal, appended to a hash chain (`episode_chain`) in the same transaction as the row it vouches for.

The construction is the incident log's (`embodied_eval.store.hashchain`: canonical JSON ‖ previous hash,
BEFORE UPDATE/DELETE triggers). An `episode` record holds the SHA-256 of the episode's stored
`record_json` (the whole record: quality, status, judge fields, artifacts), of each fault and of
its safety events, and each artifact's path and SHA-256; so editing, deleting or adding a row in
the `episodes`, `faults` or `safety_events` tables outside the ledger is caught by
`embodied_eval.store.verify_store`. Kinds:

* `episode`  — written by a run or an import (`import` names the import record);
* `faults`   — faults attached to stored episodes later (`Store.write_faults`);
* `manifest` — an escrowed manifest's hash and the SHA-256 of its stored JSON;
* `import`   — who imported which file (its SHA-256) and how many episodes it added;
* `audit`    — a technician's signed human audit of an episode (true outcome, optional quality);
* `amendment`— a correction of an episode's fields (field, old, new, reason, author, role);
* `seal`     — the protocol owner's signed close of a window: heads of both chains, counts and
  exposure hours (written together with the incident log's `window_close`);
* `patch`    — a technician-entered human patch of the robot (re-teaching, recalibration,
  parameter change) during a maintenance audit (`embodied_eval.store.patches`);
* `calibration` — one drift day's calibration measured by `embodied-eval calibrate --by-drift`
  (`embodied_eval.embodiment.calibration_days`);
* `revocation` — a key revoked in the key registry (written together with the incident log's
  `revocation`), so the ledger's own order says which signatures came after it;
* `version` — a robot's firmware or software, or a policy, now at a new version (who recorded
  it): what a certificate's validity conditions are checked against
  (`embodied_eval.certificate.validity`);
* `analysis` — a stored-data `compare` or a `rank` run: its seed and outcome, so re-running a
  decision with new seeds stays visible (`embodied_eval.certificate.analyses`);
* `checkpoint` — the heads of both chains (sequence, hash, time), signed by the writer, and
* `countersignature` — a second party's signature (or RFC 3161 token) of a checkpoint's digest:
  the anchor outside the writer's reach (`embodied_eval.store.checkpoints`);
* `operator` — a stop, pause or resume of a running run asked for from its console (or the
  console's API): who asked, how, when, and the real episode in progress then.

The original rows never change; the scored view (`scored_view`) applies audits and amendments in
chain order and lists the ones it used.
"""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.records import Episode
from embodied_eval.store import hashchain
from embodied_eval.store.hashchain import ChainRow

COMPONENT = "ledger"
TABLE = "episode_chain"
KINDS = (
    "episode", "faults", "manifest", "import", "audit", "amendment", "seal", "revocation", "patch",
    "calibration",
    "operator",
    "version",
    "analysis",
    "checkpoint", "countersignature",
    "audit_draw",
    "audit_label",
    "judge_accuracy",
    "safety_settings",
)  # fmt: skip
#: Kinds that must carry a signature.
SIGNED_KINDS = frozenset({"audit", "seal", "revocation", "checkpoint"})
TRIGGER_NAMES = ("episode_chain_no_update", "episode_chain_no_delete")
#: The record tables the ledger vouches for, each with its append-only triggers.
RECORD_TABLES = ("episodes", "faults", "safety_events", "manifests")


def _record_table_triggers() -> str:
    out: list[str] = []
    for table in RECORD_TABLES:
        out += hashchain.append_only_triggers(
            table, f"the {table} table", (f"{table}_no_update", f"{table}_no_delete")
        )
    return ";\n".join(out) + ";\n"


LEDGER_TRIGGERS = hashchain.append_only_triggers(TABLE, "the trial ledger", TRIGGER_NAMES)

#: Schema migrations of the ledger (index + 1 = version); runs after the core tables exist.
MIGRATIONS: tuple[str, ...] = (
    hashchain.table_sql(TABLE, lookups=False, unindexed_kind="episode")
    + f"{LEDGER_TRIGGERS[0]};\n{LEDGER_TRIGGERS[1]};\n"
    + _record_table_triggers(),
)

#: Every trigger the ledger relies on, by table.
ALL_TRIGGERS: dict[str, tuple[str, ...]] = {
    TABLE: TRIGGER_NAMES,
    **{t: (f"{t}_no_update", f"{t}_no_delete") for t in RECORD_TABLES},
}

#: Episode fields a correction may change (identity and provenance fields are fixed).
FIXED_FIELDS = frozenset(
    {
        "episode_id",
        "pair_id",
        "side",
        "family",
        "task_id",
        "seed",
        "policy",
        "engine",
        "attempt",
        "window",
        "protocol_hash",
        "started_at",
        "faults",
        "artifacts",
    }
)


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def events_digest(events_json: Sequence[str]) -> str | None:
    """SHA-256 of an episode's safety events (their canonical JSON, one per line); None if none."""
    return sha256_text("\n".join(events_json)) if events_json else None


def new_record_id(prefix: str) -> str:
    """A fresh ledger record id, e.g. "AUD-3f9a2c1b7d4e"."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(record count, head hash) of the ledger."""
    return hashchain.head(conn, TABLE)


def append(
    conn: sqlite3.Connection,
    kind: str,
    record_id: str,
    data: Mapping[str, Any],
    *,
    window: str = "",
    subject: str | None = None,
    signing_key: Ed25519PrivateKey | None = None,
    at: str | None = None,
) -> ChainRow:
    """Append one record to the ledger (the caller holds the write transaction)."""
    return hashchain.append(
        conn,
        TABLE,
        KINDS,
        kind,
        record_id,
        data,
        window=window,
        subject=subject,
        signing_key=signing_key,
        at=at,
    )


def chain_unchained(conn: sqlite3.Connection, load: Any) -> None:
    """Chain the rows of a store written before the ledger existed (when its ledger is empty
    and it holds episodes); `load(episode_id, record_json)` gives the Episode. The caller holds
    the write transaction."""
    if head(conn)[0] > 0 or not conn.execute("SELECT 1 FROM episodes LIMIT 1").fetchone():
        return
    for (manifest_hash,) in conn.execute(
        "SELECT manifest_hash FROM manifests ORDER BY created_at"
    ).fetchall():
        append_manifest(conn, manifest_hash)
    for eid, body in conn.execute(
        "SELECT episode_id, record_json FROM episodes ORDER BY written_at, episode_id"
    ).fetchall():
        faults = [
            r[0]
            for r in conn.execute(
                "SELECT fault_json FROM faults WHERE episode_id = ? ORDER BY ordinal", (eid,)
            )
        ]
        events = [
            r[0]
            for r in conn.execute(
                "SELECT event_json FROM safety_events WHERE episode_id = ? ORDER BY ordinal",
                (eid,),
            )
        ]
        append_episode(conn, load(eid, body), body, faults, events)


def append_manifest(conn: sqlite3.Connection, manifest_hash: str) -> ChainRow:
    """Chain a stored manifest: its hash and the SHA-256 of its stored JSON."""
    window, text = conn.execute(
        "SELECT window, manifest_json FROM manifests WHERE manifest_hash = ?", (manifest_hash,)
    ).fetchone()
    data = {"manifest_hash": manifest_hash, "json_sha256": sha256_text(text)}
    return append(conn, "manifest", manifest_hash, data, window=window)


def append_episode(
    conn: sqlite3.Connection,
    episode: Episode,
    record_json: str,
    faults_json: Sequence[str],
    events_json: Sequence[str],
    import_id: str | None = None,
    *,
    at: str | None = None,
) -> ChainRow:
    """Chain one stored episode: the hashes of its stored rows and of its artifacts."""
    data: dict[str, Any] = {
        "episode_id": episode.episode_id,
        "record_sha256": sha256_text(record_json),
        "faults": [sha256_text(f) for f in faults_json],
        "safety_events_sha256": events_digest(events_json),
        "artifacts": [{"path": a.path, "sha256": a.sha256} for a in episode.artifacts],
        "import": import_id,
    }
    return append(conn, "episode", episode.episode_id, data, window=episode.window, at=at)


def find(conn: sqlite3.Connection, kind: str, record_id: str) -> ChainRow | None:
    """The record of `kind` with `record_id`, or None.

    Episode records are unique through the episodes table's key and are not indexed here (an
    index write per episode would slow the runner's write path), so finding one scans the
    ledger; every other kind is found through the (kind, record_id) index."""
    where = "kind = ? AND record_id = ?"
    if kind != "episode":
        where = "kind != 'episode' AND " + where  # lets SQLite use the partial index
    found = hashchain.rows(conn, TABLE, where, (kind, record_id))
    return found[0] if found else None


def rows(conn: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[ChainRow]:
    """Ledger records matching an SQL condition on the generated columns, in chain order."""
    return hashchain.rows(conn, TABLE, where, params, what="trial ledger")


def table_exists(conn: sqlite3.Connection) -> bool:
    """True when the store has a ledger table (stores written before it have none)."""
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
        is not None
    )


# --------------------------------------------------------------------------- the scored view


@dataclass(frozen=True)
class ScoredView:
    """Episodes as they are scored: originals with audits and corrections applied.

    Attributes:
        episodes: the episodes, in the order given, with changes applied.
        used: one entry per audit or amendment applied: kind, record_id, seq, episode_id,
            changes ({field: new}), by (holder/author), role, signer fingerprint, at.
    """

    episodes: list[Episode]
    used: list[dict[str, Any]]


def changes_of(row: ChainRow) -> dict[str, Any]:
    """The field changes an audit or amendment record makes to the scored episode."""
    if row.kind == "audit":
        return {"audited_success": bool(row.data["succeeded"])}
    if row.kind == "audit_label":  # a window audit's label; "cannot_tell" changes nothing
        label = row.data["label"]
        return {} if label == "cannot_tell" else {"audited_success": label == "success"}
    return {c["field"]: c["new"] for c in row.data.get("changes", [])}


def scored_view(conn: sqlite3.Connection, episodes: Iterable[Episode]) -> ScoredView:
    """Apply every audit and amendment of these episodes (chain order); the rows never change."""
    originals = list(episodes)
    if not originals or not table_exists(conn):
        return ScoredView(originals, [])
    by_id: dict[str, list[ChainRow]] = {}
    for row in rows(conn, "kind != 'episode' AND kind IN ('audit', 'amendment', 'audit_label')"):
        by_id.setdefault(row.subject or "", []).append(row)
    out: list[Episode] = []
    used: list[dict[str, Any]] = []
    for ep in originals:
        for row in by_id.get(ep.episode_id, ()):
            changes = changes_of(row)
            ep = ep.replace(**changes)
            used.append(
                {
                    "kind": row.kind,
                    "record_id": row.record_id,
                    "seq": row.seq,
                    "episode_id": row.subject,
                    "changes": changes,
                    "by": row.data.get("auditor") or row.data.get("author") or row.data.get("by"),
                    "role": row.data.get("role"),
                    "signer": row.signer,
                    "at": row.at,
                }
            )
        out.append(ep)
    return ScoredView(out, used)
