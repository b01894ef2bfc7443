"""One verify for the whole store (`embodied-eval store verify`).

Checks, stopping at the first failure and naming the record:

1. the trial ledger's hash chain (`hashchain.walk_chain`): a deleted, reordered, edited or
   rewritten record; each signed record (audit, seal, amendment with a key) against the key
   registry — registered, the role it claims, not revoked before it was signed; each seal naming
   the record before it as the episode chain's head;
2. the record tables against the ledger: every `episodes.record_json`, fault and safety-event row
   hashes to what was chained, none is missing, none was added outside the ledger; every
   manifest's stored JSON hashes to what was chained;
3. artifact files on disk against their chained SHA-256 (changed → fails; missing → fails for
   episodes written here, listed for imported ones whose files stayed where they were recorded);
4. the incident log's chain and signatures (exposure ledger and window closes included), reached
   through `embodied_eval.plugins.INCIDENT_LOG`;
5. the seals: each ledger seal's incident head is still that record in the incident log, and
   each window close's episode-chain head and seal are still in the ledger (a tail removed after
   a seal from either chain is detected);
6. the checkpoints (`embodied_eval.store.checkpoints`): each countersignature verifies, and every
   record a countersigned checkpoint names still hashes to what it named — a history rewritten
   before it, even re-hashed and re-signed, fails naming the checkpoint;
7. the append-only triggers on the ledger and the record tables.

What this cannot show alone: records after the last countersigned checkpoint can be removed or
rewritten together (and re-signed) by someone holding the file and the store's keys; the report
lists them as not yet anchored. A countersigned checkpoint file kept by the second party
(`store verify --checkpoint FILE`) still catches a rewrite that removed the store's own copy.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.store import hashchain, ledger
from embodied_eval.store.checkpoints import check_store_checkpoints, not_yet_anchored
from embodied_eval.store.core import Store, default_db_path
from embodied_eval.store.hashchain import Problem
from embodied_eval.store.ledger_checks import LedgerWalk, check_tables
from embodied_eval.store.verify_report import StoreReport

__all__ = ["StoreReport", "require_store_verified", "verify_store"]


def _incident_log(db: Path) -> dict[str, Any] | None:
    module = INCIDENT_LOG["integrity_state"].partition(":")[0]
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except ModuleNotFoundError:
        return None
    state: dict[str, Any] = resolve(INCIDENT_LOG["integrity_state"])(db)
    return state


def _check_seals(
    conn: sqlite3.Connection, walk: LedgerWalk, closes: list[dict[str, Any]], report: StoreReport
) -> bool:
    incident_hash = {c["seq"]: c["hash"] for c in closes}
    for seal in walk.seals:
        head = seal["incident_head"]
        at = head.get("record_count")
        if at not in incident_hash and _incident_hash_at(conn, at) != head.get("head_hash"):
            report.fail(
                "seal",
                Problem(
                    seal["seq"],
                    seal.get("window"),
                    "truncated",
                    "the seal "
                    f"names incident-log record {at} ({str(head.get('head_hash'))[:16]}…)"
                    ", which is no longer in the incident log: its tail was "
                    "removed or rewritten after the seal",
                ),
            )
            return False
        report.seals.append(
            {
                k: seal[k]
                for k in (
                    "window",
                    "seq",
                    "hash",
                    "episode_head",
                    "incident_head",
                    "episodes",
                    "exposure_h",
                )
            }
        )
    for close in closes:
        chained = close.get("episode_chain")
        if not isinstance(chained, dict):
            continue
        count, seal_seq = int(chained["record_count"]), int(chained["seal_seq"])
        problem = None
        if count and hashchain.hash_at(conn, ledger.TABLE, count) != chained["head_hash"]:
            problem = f"names trial-ledger record {count} ({str(chained['head_hash'])[:16]}…)"
        else:
            row = conn.execute(
                f"SELECT body FROM {ledger.TABLE} WHERE seq = ?", (seal_seq,)
            ).fetchone()
            if row is None or hashchain.tail_kind(row[0]) != "seal":
                problem = f"names the ledger seal at record {seal_seq}"
        if problem:
            report.fail(
                "seal",
                Problem(
                    close["seq"],
                    close.get("window"),
                    "truncated",
                    f"the signed window close {problem}, which is no longer in"
                    " the trial ledger: its tail was removed or rewritten"
                    " after the seal",
                ),
            )
            return False
    return True


def _incident_hash_at(conn: sqlite3.Connection, seq: Any) -> str | None:
    try:
        return hashchain.hash_at(conn, "incident_chain", int(seq))
    except (sqlite3.OperationalError, TypeError, ValueError):
        return None


def _signers(
    registry: dict[str, dict[str, Any]], ledger_counts: dict[str, int], log_counts: dict[str, int]
) -> list[dict[str, Any]]:
    """Each key that signed in either chain: holder, role, revocation and signatures per chain
    (`signatures` is their sum), in the order they first signed (trial ledger first)."""
    out = []
    for fp in dict.fromkeys([*ledger_counts, *log_counts]):
        info = registry.get(fp, {})
        in_ledger, in_log = ledger_counts.get(fp, 0), log_counts.get(fp, 0)
        out.append(
            {
                "fingerprint": fp,
                "holder": info.get("holder"),
                "role": info.get("role"),
                "revoked_at": info.get("revoked_at"),
                "signatures": in_ledger + in_log,
                "trial_ledger_signatures": in_ledger,
                "incident_log_signatures": in_log,
            }
        )
    return out


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cycle collector: the walk keeps ~2 objects per episode alive and makes no
    cycles, so every collection would traverse them all again for nothing (~15 % of a verify)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def verify_store(
    db: str | os.PathLike[str] | None = None,
    checkpoint_files: list[dict[str, Any]] | None = None,
) -> StoreReport:
    """Verify the whole store (see the module docstring); never raises for a bad store.

    Args:
        db: the store (None: the default path).
        checkpoint_files: countersigned checkpoints kept outside the store
            (`embodied_eval.store.checkpoints.load_checkpoint_file`), checked like its own.
    """
    with _no_cycle_collection():
        return _verify_store(db, checkpoint_files)


def _verify_store(
    db: str | os.PathLike[str] | None, checkpoint_files: list[dict[str, Any]] | None
) -> StoreReport:
    path = Path(db) if db is not None else default_db_path()
    report = StoreReport()
    incident = _incident_log(path)
    registry: dict[str, dict[str, Any]] = {}
    closes: list[dict[str, Any]] = []
    log_signatures: dict[str, int] = {}
    if incident is not None:
        registry = {k["fingerprint"]: k for k in incident["keys"]}
        closes = incident["closes"]
        log_report = incident["report"]
        report.incident_records = log_report.records
        report.incident_head = log_report.head_hash
        report.incident_summary = log_report.summary()
        log_signatures = dict(log_report.signatures_by_key)
    with Store(path, create=False) as store:
        conn = store.conn
        walk = LedgerWalk(registry)
        walked = hashchain.walk_chain(
            conn, ledger.TABLE, frozenset(ledger.KINDS), walk.check, walk.skim
        )
        report.ledger_records, report.ledger_head = walked.count, walked.head_hash
        report.signers = _signers(registry, walk.signatures, log_signatures)
        if walked.problem is not None:
            return report.fail("trial ledger", walked.problem)
        if not check_tables(conn, walk, report, path):
            return report
        if incident is not None and not log_report.ok:
            assert log_report.problem is not None
            return report.fail("incident log", log_report.problem)
        if not _check_seals(conn, walk, closes, report):
            return report
        report.checkpoints, problem = check_store_checkpoints(conn, checkpoint_files)
        if problem is not None:
            return report.fail("checkpoint", problem)
        report.anchoring = not_yet_anchored(
            report.checkpoints, report.ledger_records, report.incident_records
        )
        for table, names in ledger.ALL_TRIGGERS.items():
            if not hashchain.triggers_present(conn, table, names):
                return report.fail(
                    "triggers",
                    Problem(
                        None,
                        table,
                        "triggers",
                        f"the append-only triggers on {table} are missing (someone dropped them)",
                    ),
                )
    return report


def require_store_verified(db: str | os.PathLike[str] | None, *, what: str = "") -> StoreReport:
    """The report, or EvalError naming the first bad record (nothing is computed from it)."""
    report = verify_store(db)
    if not report.ok:
        path = Path(db) if db is not None else default_db_path()
        refused = f"; {what} refused until it does" if what else ""
        raise EvalError(
            f"store {str(path)!r} does not verify — {report.summary()}{refused} "
            "(`embodied-eval store verify` shows it)",
            key="integrity",
        )
    return report
