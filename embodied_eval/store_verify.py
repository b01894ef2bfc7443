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
6. the append-only triggers on the ledger and the record tables.

What this cannot show alone: records appended after the last signed record (a seal, an audit, a
signed review) can be removed or rewritten together by someone holding the file. A seal, a
certificate (which binds both heads) or a copy of a head kept elsewhere anchors them.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_eval import hashchain, ledger
from embodied_eval.canonical import file_sha256
from embodied_eval.errors import EvalError
from embodied_eval.hashchain import Problem
from embodied_eval.keys import verify_signature
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.store import Store, default_db_path

#: Roles that must sign each kind of ledger record.
SIGNER_ROLES = {"audit": ("technician",), "seal": ("protocol_owner",)}


@dataclass
class StoreReport:
    """Result of `verify_store`.

    Attributes:
        ok: everything checked out.
        section: where the first problem is ("trial ledger", "episodes table", "artifacts",
            "incident log", "seal", "triggers"), None when ok.
        problem: the first problem, None when ok.
        ledger_records, ledger_head: records walked and the last good hash of the trial ledger.
        incident_records, incident_head, incident_summary: the same for the incident log.
        counts: rows checked per table, and artifacts re-hashed.
        signers: each key that signed something in either chain: fingerprint, holder, role,
            revoked_at (or None), signatures.
        seals: window, seq, hash, episode and incident heads of each seal.
        notes: what the verify has to say besides problems (imported artifacts not on this disk).
    """

    ok: bool = True
    section: str | None = None
    problem: Problem | None = None
    ledger_records: int = 0
    ledger_head: str = hashchain.GENESIS_HASH
    incident_records: int = 0
    incident_head: str = hashchain.GENESIS_HASH
    incident_summary: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    signers: list[dict[str, Any]] = field(default_factory=list)
    seals: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, section: str, problem: Problem) -> StoreReport:
        self.ok, self.section, self.problem = False, section, problem
        return self

    def summary(self) -> str:
        """One line: what verified, or the first problem with the record it names."""
        if self.ok:
            return (
                f"verified trial ledger ({self.ledger_records} records, head "
                f"{self.ledger_head[:16]}…) and incident log ({self.incident_records} records, "
                f"head {self.incident_head[:16]}…); {self.counts.get('episodes', 0)} episode(s), "
                f"{self.counts.get('artifacts', 0)} artifact file(s) re-hashed"
            )
        assert self.problem is not None
        where = (
            f"record seq {self.problem.seq} ({self.problem.record_id or '?'})"
            if self.problem.seq is not None
            else (self.problem.record_id or "store")
        )
        return f"{self.section}: {where}: {self.problem.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "section": self.section,
            "problem": None if self.problem is None else self.problem.to_json(),
            "summary": self.summary(),
            "trial_ledger": {"records": self.ledger_records, "head_hash": self.ledger_head},
            "incident_log": {
                "records": self.incident_records,
                "head_hash": self.incident_head,
                "verification": self.incident_summary,
            },
            "counts": dict(self.counts),
            "signers": list(self.signers),
            "seals": list(self.seals),
            "notes": list(self.notes),
        }


class _LedgerWalk:
    """What the ledger's records promise, collected while walking it."""

    def __init__(self, registry: dict[str, dict[str, Any]]) -> None:
        self.registry = registry
        self.episodes: dict[str, tuple[int, dict[str, Any]]] = {}
        self.late_faults: dict[tuple[str, int], tuple[int, str]] = {}
        self.manifests: dict[str, tuple[int, str]] = {}
        self.imports: set[str] = set()
        self.seals: list[dict[str, Any]] = []
        self.signatures: dict[str, int] = {}
        self.revoked: dict[str, int] = {}

    def check(
        self, seq: int, env: dict[str, Any], digest: str, sig: str | None, prev: str
    ) -> Problem | None:
        kind, rid, data = env["kind"], env.get("record_id"), env["data"]
        try:
            found = self._signed(seq, env, digest, sig)
            if found is not None:
                return found
            if kind == "episode":
                self.episodes[data["episode_id"]] = (seq, data)
            elif kind == "faults":
                for f in data["faults"]:
                    self.late_faults[(f["episode_id"], int(f["ordinal"]))] = (seq, f["sha256"])
            elif kind == "manifest":
                self.manifests[data["manifest_hash"]] = (seq, data["json_sha256"])
            elif kind == "import":
                self.imports.add(str(rid))
            elif kind in ("audit", "amendment") and env.get("subject") not in self.episodes:
                return Problem(seq, rid, "content", f"{kind} of an episode not chained before it")
            elif kind == "revocation":
                self.revoked[str(data["fingerprint"])] = seq
            elif kind == "seal":
                head = data["episode_head"]
                if head.get("head_hash") != prev or head.get("record_count") != seq - 1:
                    return Problem(
                        seq,
                        rid,
                        "seal",
                        "seal names an episode-chain head that is not the record before it",
                    )
                self.seals.append({**data, "seq": seq, "hash": digest})
        except (KeyError, TypeError, ValueError) as exc:
            return Problem(seq, rid, "content", f"unreadable {kind} record ({exc})")
        return None

    def skim(self, seq: int, body: str) -> bool:
        """Read a plain episode record (no faults, artifacts or import) from its canonical text
        without parsing it; False for anything else (then it is parsed)."""
        if (
            hashchain.tail_kind(body) != "episode"
            or '"artifacts":[],' not in body
            or '"faults":[],' not in body
            or '"import":null,' not in body
        ):
            return False
        i = body.find('"episode_id":"') + 14
        eid = body[i : body.find('"', i)]
        if "\\" in eid:
            return False
        k = body.find('"record_sha256":"') + 17
        m = body.find('"safety_events_sha256":') + 23
        events = None if body.startswith("null", m) else body[m + 1 : m + 65]
        self.episodes[eid] = (
            seq,
            {"record_sha256": body[k : k + 64], "faults": [], "safety_events_sha256": events},
        )
        return True

    def _signed(
        self, seq: int, env: dict[str, Any], digest: str, sig: str | None
    ) -> Problem | None:
        kind, rid, signer, data = env["kind"], env.get("record_id"), env.get("signer"), env["data"]
        if kind in ledger.SIGNED_KINDS and not signer:
            return Problem(seq, rid, "unsigned", f"{kind} record carries no signer")
        if not signer:
            return None
        if not sig:
            return Problem(seq, rid, "signature", f"signature of {kind} record is missing")
        info = self.registry.get(signer)
        if info is None:
            return Problem(
                seq, rid, "signature", f"signed by key {signer[:16]}…, which is not registered"
            )
        who = f"key {signer[:16]}… ({info.get('holder', '?')}, {info.get('role', '?')})"
        if not verify_signature(info["public_key"], digest, sig):
            return Problem(
                seq, rid, "signature", f"signature does not verify with {who}: forged or altered"
            )
        if signer in self.revoked:
            return Problem(
                seq,
                rid,
                "revoked",
                f"signed by {who}, which was revoked at ledger record {self.revoked[signer]}: "
                "a revoked key's signatures do not count",
            )
        if kind != "revocation" and data.get("role") and data["role"] != info.get("role"):
            return Problem(
                seq,
                rid,
                "signature",
                f"record claims role {data['role']} but {who} is registered as {info.get('role')}",
            )
        allowed = SIGNER_ROLES.get(kind)
        if allowed and info.get("role") not in allowed:
            return Problem(
                seq, rid, "signature", f"a {kind} is signed by a {' or '.join(allowed)}, not {who}"
            )
        self.signatures[signer] = self.signatures.get(signer, 0) + 1
        return None


def _artifact_path(path: str, db_path: Path) -> Path | None:
    for candidate in (Path(path), db_path.parent / path):
        if candidate.is_file():
            return candidate
    return None


def _check_tables(
    conn: sqlite3.Connection, walk: _LedgerWalk, report: StoreReport, db: Path
) -> bool:
    """Record tables against what the ledger chained; False (report failed) at the first problem."""
    table = "episodes table"
    seen: set[str] = set()
    for eid, body in conn.execute("SELECT episode_id, record_json FROM episodes"):
        seen.add(eid)
        entry = walk.episodes.get(eid)
        if entry is None:
            report.fail(
                table,
                Problem(
                    None,
                    eid,
                    "unchained",
                    f"episode {eid} is in the episodes "
                    "table but was never chained: added outside the ledger",
                ),
            )
            return False
        if ledger.sha256_text(body) != entry[1]["record_sha256"]:
            report.fail(
                table,
                Problem(
                    entry[0],
                    eid,
                    "edited",
                    f"episodes.record_json of {eid} no "
                    "longer matches the hash chained for it: it was edited",
                ),
            )
            return False
    for eid in sorted(set(walk.episodes) - seen, key=lambda e: walk.episodes[e][0]):
        report.fail(
            table,
            Problem(
                walk.episodes[eid][0],
                eid,
                "deleted",
                f"episode {eid} was chained but its row is gone from the episodes table: deleted",
            ),
        )
        return False
    expected: dict[tuple[str, int], tuple[int, str]] = dict(walk.late_faults)
    for eid, (seq, data) in walk.episodes.items():
        for i, sha in enumerate(data.get("faults", [])):
            expected[(eid, i)] = (seq, sha)
    faults = 0
    for eid, ordinal, text in conn.execute("SELECT episode_id, ordinal, fault_json FROM faults"):
        faults += 1
        want = expected.pop((eid, int(ordinal)), None)
        if want is None or ledger.sha256_text(text) != want[1]:
            what = "was never chained" if want is None else "no longer matches its chained hash"
            report.fail(
                "faults table",
                Problem(
                    None if want is None else want[0],
                    eid,
                    "edited",
                    f"fault #{ordinal + 1} of {eid} {what}",
                ),
            )
            return False
    if expected:
        (eid, ordinal), (seq, _) = min(expected.items(), key=lambda kv: kv[1][0])
        report.fail(
            "faults table",
            Problem(
                seq,
                eid,
                "deleted",
                f"fault #{ordinal + 1} of {eid} was chained but is gone: deleted",
            ),
        )
        return False
    events: dict[str, list[str]] = {}
    for eid, body in conn.execute(
        "SELECT episode_id, event_json FROM safety_events ORDER BY episode_id, ordinal"
    ):
        events.setdefault(eid, []).append(body)
    n_events = sum(len(v) for v in events.values())
    for eid, (seq, data) in walk.episodes.items():
        if ledger.events_digest(events.pop(eid, [])) != data.get("safety_events_sha256"):
            report.fail(
                "safety_events table",
                Problem(
                    seq, eid, "edited", f"safety events of {eid} no longer match their chained hash"
                ),
            )
            return False
    if events:
        eid = sorted(events)[0]
        report.fail(
            "safety_events table",
            Problem(
                None, eid, "unchained", f"safety events of {eid} were added outside the ledger"
            ),
        )
        return False
    manifests = 0
    for mhash, text in conn.execute("SELECT manifest_hash, manifest_json FROM manifests"):
        manifests += 1
        want_m = walk.manifests.pop(mhash, None)
        if want_m is None or ledger.sha256_text(text) != want_m[1]:
            report.fail(
                "manifests table",
                Problem(
                    None if want_m is None else want_m[0],
                    mhash,
                    "edited",
                    "manifest JSON does not match the hash chained for it (or was never chained)",
                ),
            )
            return False
    if walk.manifests:
        mhash, (seq, _) = next(iter(walk.manifests.items()))
        report.fail("manifests table", Problem(seq, mhash, "deleted", "chained manifest is gone"))
        return False
    artifacts = 0
    for eid, (seq, data) in sorted(walk.episodes.items(), key=lambda kv: kv[1][0]):
        for art in data.get("artifacts", []):
            found = _artifact_path(art["path"], db)
            if found is None:
                if data.get("import"):
                    report.notes.append(
                        f"artifact {art['path']} of imported {eid} not on this disk"
                    )
                    continue
                report.fail(
                    "artifacts",
                    Problem(
                        seq,
                        eid,
                        "artifact missing",
                        f"artifact file {art['path']!r} of {eid} is missing",
                    ),
                )
                return False
            actual = file_sha256(found)
            artifacts += 1
            if actual != art["sha256"]:
                report.fail(
                    "artifacts",
                    Problem(
                        seq,
                        eid,
                        "artifact changed",
                        f"artifact file "
                        f"{art['path']!r} of {eid} changed (sha256 "
                        f"{actual[:12]}…, chained {art['sha256'][:12]}…)",
                    ),
                )
                return False
    report.counts.update(
        episodes=len(seen),
        faults=faults,
        safety_events=n_events,
        manifests=manifests,
        artifacts=artifacts,
    )
    return True


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
    conn: sqlite3.Connection, walk: _LedgerWalk, closes: list[dict[str, Any]], report: StoreReport
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


def verify_store(db: str | os.PathLike[str] | None = None) -> StoreReport:
    """Verify the whole store (see the module docstring); never raises for a bad store."""
    path = Path(db) if db is not None else default_db_path()
    report = StoreReport()
    incident = _incident_log(path)
    registry: dict[str, dict[str, Any]] = {}
    closes: list[dict[str, Any]] = []
    if incident is not None:
        registry = {k["fingerprint"]: k for k in incident["keys"]}
        closes = incident["closes"]
        log_report = incident["report"]
        report.incident_records = log_report.records
        report.incident_head = log_report.head_hash
        report.incident_summary = log_report.summary()
    with Store(path, create=False) as store:
        conn = store.conn
        walk = _LedgerWalk(registry)
        walked = hashchain.walk_chain(
            conn, ledger.TABLE, frozenset(ledger.KINDS), walk.check, walk.skim
        )
        report.ledger_records, report.ledger_head = walked.count, walked.head_hash
        report.signers = [
            {
                "fingerprint": fp,
                "holder": registry.get(fp, {}).get("holder"),
                "role": registry.get(fp, {}).get("role"),
                "revoked_at": registry.get(fp, {}).get("revoked_at"),
                "signatures": n,
            }
            for fp, n in walk.signatures.items()
        ]
        if walked.problem is not None:
            return report.fail("trial ledger", walked.problem)
        if not _check_tables(conn, walk, report, path):
            return report
        if incident is not None and not log_report.ok:
            assert log_report.problem is not None
            return report.fail("incident log", log_report.problem)
        if not _check_seals(conn, walk, closes, report):
            return report
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
