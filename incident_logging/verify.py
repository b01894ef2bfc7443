"""Verify the incident log: hash chain, signatures, window closes and the append-only triggers.

The walk goes through the chain in sequence order and stops at the first record that fails,
naming it by sequence number and id:

* a sequence number missing → a row was deleted;
* a record whose body says another sequence number → rows were reordered;
* a record whose contents do not hash to its stored hash → its bytes were edited;
* a record whose stored `prev_hash` is not the previous record's hash while its own hash is
  intact → the previous record was rewritten (hash recomputed) after this one was chained;
* a signature that does not verify with the registered public key, a signer that is not
  registered (or not before the record), or a role that does not match the key's → forged;
* a signature by a key revoked earlier in the chain (a `revocation` record) → revoked;
* a window close whose head hash / record count / exposure hours disagree with the chain.

Missing triggers are reported too (someone dropped them; the chain then shows whether anything
was changed). Key registration is trust-on-first-use (anyone holding the file can register a key): the report
lists every fingerprint, and each window close certifies the set of keys in force. What the chain
cannot show alone: the newest records after the last signature
could be removed or rewritten together by someone holding the file; a signed window close (and
every signed review) anchors everything before it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import ExposureEntry
from embodied_eval.store.hashchain import Problem, walk_chain
from embodied_eval.store.signing_keys import verify_signature
from incident_logging import chain

#: Records that must carry a signature.
SIGNED_KINDS = frozenset({"review", "window_close", "key", "revocation"})
#: Records parsed in full during the walk.
PARSED_KINDS = frozenset({"exposure", "amendment", "window_close", "review", "key", "revocation"})


@dataclass(frozen=True)
class VerifyReport:
    """Result of a verification walk.

    Attributes:
        ok: True when the chain, every signature and the triggers check out.
        records: rows walked. head_hash: hash of the last good row.
        problem: the first problem (None when ok).
        signatures_checked: how many signatures verified.
        triggers_present: whether the append-only triggers exist.
        key_fingerprints: fingerprints of the registered keys, in registration order.
        signatures_by_key: (fingerprint, signatures verified) per signing key, in the order each
            first signed (they add up to `signatures_checked`).
    """

    ok: bool
    records: int
    head_hash: str
    problem: Problem | None = None
    signatures_checked: int = 0
    triggers_present: bool = True
    key_fingerprints: tuple[str, ...] = field(default_factory=tuple)
    signatures_by_key: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "records": self.records,
            "head_hash": self.head_hash,
            "problem": None if self.problem is None else self.problem.to_json(),
            "signatures_checked": self.signatures_checked,
            "triggers_present": self.triggers_present,
            "key_fingerprints": list(self.key_fingerprints),
            "signatures_by_key": dict(self.signatures_by_key),
        }

    def summary(self) -> str:
        """One line: "verified N records, head abc…" or the first problem."""
        if self.ok:
            return (
                f"verified {self.records} record(s), {self.signatures_checked} signature(s); "
                f"head {self.head_hash[:16]}…"
            )
        assert self.problem is not None
        where = (
            f"record seq {self.problem.seq} ({self.problem.record_id or '?'})"
            if self.problem.seq is not None
            else "store"
        )
        return f"{where}: {self.problem.message}"


class _Walker:
    """State carried along the chain: keys registered so far and exposure per window."""

    def __init__(self) -> None:
        self.keys: dict[str, dict[str, Any]] = {}
        self.revoked: dict[str, int] = {}
        self.exposure: dict[str, dict[str, ExposureEntry]] = {}
        self.signatures = 0
        self.by_key: dict[str, int] = {}

    def signed(self, seq: int, env: dict[str, Any], digest: str, sig: str | None) -> Problem | None:
        kind, rid, signer = env["kind"], env.get("record_id"), env.get("signer")
        data = env["data"]
        if kind in SIGNED_KINDS and not signer:
            return Problem(seq, rid, "unsigned", f"{kind} record carries no signer")
        if not signer:
            return None
        if not sig:
            return Problem(seq, rid, "signature", f"signature of {kind} record is missing")
        if signer in self.revoked:
            holder = self.keys.get(signer, {})
            return Problem(
                seq,
                rid,
                "revoked",
                f"signed by key {signer[:16]}… ({holder.get('holder', '?')}, "
                f"{holder.get('role', '?')}), which was revoked at record seq "
                f"{self.revoked[signer]}: a revoked key's signatures do not count",
            )
        if kind == "key":
            public = data.get("public_key", "")
            if (
                data.get("fingerprint") != signer
                or hashlib.sha256(bytes.fromhex(public) if _is_hex(public) else b"").hexdigest()
                != signer
            ):
                return Problem(seq, rid, "signature", "key record's fingerprint does not match")
            info = data
        else:
            info = self.keys.get(signer, {})
            if not info:
                return Problem(
                    seq,
                    rid,
                    "signature",
                    f"signed by key {signer[:16]}…, which is not registered before this record",
                )
            if data.get("role") and data["role"] != info["role"]:
                return Problem(
                    seq,
                    rid,
                    "signature",
                    f"record claims role {data['role']} but key {signer[:16]}… is "
                    f"registered as {info['role']}",
                )
        if not verify_signature(info["public_key"], digest, sig):
            return Problem(
                seq,
                rid,
                "signature",
                f"signature does not verify with key {signer[:16]}… ({info.get('holder', '?')}): "
                "forged or altered",
            )
        self.signatures += 1
        self.by_key[signer] = self.by_key.get(signer, 0) + 1
        if kind == "key":
            self.keys[signer] = data
        elif kind == "revocation":
            target = str(data.get("fingerprint", ""))
            if target not in self.keys:
                return Problem(seq, rid, "content", f"revokes key {target[:16]}…, not registered")
            self.revoked[target] = seq
        return None

    def track(self, seq: int, env: dict[str, Any], prev_hash: str) -> Problem | None:
        kind, data, rid = env["kind"], env["data"], env.get("record_id")
        try:
            if kind == "exposure":
                entry = ExposureEntry.from_dict(data)
                self.exposure.setdefault(entry.window, {})[entry.entry_id] = entry
            elif kind == "amendment" and data.get("target") == "exposure":
                window = env.get("window", "")
                entries = self.exposure.get(window, {})
                if env.get("subject") in entries:
                    changes = {c["field"]: c["new"] for c in data["changes"]}
                    entries[env["subject"]] = entries[env["subject"]].replace(**changes)
            elif kind == "window_close":
                from embodied_eval.embodiment.safety_metrics import (
                    exposure_hours,  # heavy; rarely needed
                )

                if data.get("head_hash") != prev_hash or data.get("record_count") != seq - 1:
                    return Problem(
                        seq,
                        rid,
                        "window_close",
                        "window close names a chain head that is not the record before it",
                    )
                covered, _ = exposure_hours(self.exposure.get(data.get("window", ""), {}).values())
                if abs(covered - float(data.get("exposure_h", -1))) > 1e-9 * max(1.0, covered):
                    return Problem(
                        seq,
                        rid,
                        "window_close",
                        f"window close certifies {data.get('exposure_h')} h but the ledger "
                        f"before it holds {covered} h",
                    )
        except (EvalError, KeyError, TypeError, ValueError) as exc:
            return Problem(seq, rid, "content", f"unreadable {kind} record: {exc}")
        return None


def _is_hex(text: Any) -> bool:
    try:
        bytes.fromhex(str(text))
    except ValueError:
        return False
    return True


def verify_chain(conn: sqlite3.Connection) -> VerifyReport:
    """Walk the whole chain (`embodied_eval.store.hashchain.walk_chain`); stop at the first bad record.

    Per row: sequence contiguous, the body's own seq equal to its position, SHA-256(body ‖
    prev_hash) equal to the stored hash, prev_hash equal to the previous row's hash. Rows that are
    signed (or must be), exposure entries, amendments, key revocations and window closes are
    parsed in full for the signature, revocation, role and window-close checks.

    Args:
        conn: an open connection to the store.

    Returns:
        VerifyReport (ok, records walked, head hash, first problem, signatures checked).
    """
    triggers = chain.triggers_present(conn)
    walker = _Walker()

    def check(
        seq: int, env: dict[str, Any], digest: str, sig: str | None, prev_hash: str
    ) -> Problem | None:
        return walker.signed(seq, env, digest, sig) or walker.track(seq, env, prev_hash)

    walked = walk_chain(conn, chain.TABLE, PARSED_KINDS, check)
    by_key = tuple(walker.by_key.items())
    if walked.problem is not None:
        return VerifyReport(
            False,
            walked.count,
            walked.head_hash,
            walked.problem,
            walker.signatures,
            triggers,
            signatures_by_key=by_key,
        )
    fingerprints = tuple(walker.keys)
    count, prev = walked.count, walked.head_hash
    if not triggers:
        problem = Problem(
            None,
            None,
            "triggers",
            "the append-only triggers are missing (someone dropped them); the chain itself "
            "verifies — restore them with `incidents verify --restore-triggers --author NAME`",
        )
        return VerifyReport(
            False, count, prev, problem, walker.signatures, False, fingerprints, by_key
        )
    return VerifyReport(True, count, prev, None, walker.signatures, True, fingerprints, by_key)


def require_verified(conn: sqlite3.Connection, path: str | os.PathLike[str] = "") -> VerifyReport:
    """The verification report, or EvalError naming the first bad record (reports are refused)."""
    report = verify_chain(conn)
    if not report.ok:
        where = f" {str(path)!r}" if path else ""
        raise EvalError(
            f"incident log{where} does not verify — {report.summary()}; reports are refused "
            "until it does",
            key="integrity",
        )
    return report
