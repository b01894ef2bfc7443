"""Checkpoints: the heads of both chains, anchored outside the writer's reach.

A hash chain signed with keys the writing host holds protects against everyone but the writer:
whoever runs the harness can rewrite history, re-hash it and re-sign it. A checkpoint fixes the
heads of the trial ledger and of the incident log (sequence number and hash of each, and the
time) and is countersigned by a second party with a key the writer does not hold:

* `embodied-eval store checkpoint --key WRITER.pem --out cp.json` chains a `checkpoint` record in
  the trial ledger, signed by a key registered in the store, and writes the checkpoint file;
* `embodied-eval store countersign CP-ID --key SECOND.pem --holder NAME` signs the checkpoint's
  digest with the second party's Ed25519 key (not registered in the store, never held by the
  writer), or `--tsa-token TOKEN.tsr` stores an RFC 3161 timestamp token of the digest from the
  lab's TSA (`openssl ts -query -digest DIGEST -sha256 ...`); either way a `countersignature`
  record is chained and the countersigned checkpoint file is written for the second party to
  keep (`--out`);
* `embodied-eval store verify` checks every countersignature, and that each record a
  countersigned checkpoint names still hashes to what it named: a history rewritten before the
  checkpoint, re-hashed and re-signed, fails naming the checkpoint. Records after the last
  countersigned checkpoint are reported as not yet anchored. `--checkpoint FILE` checks a
  checkpoint file kept outside the store the same way (the store's own checkpoint records could
  have been removed together with the history).

The digest is SHA-256 of the canonical JSON of the payload (format, checkpoint_id, at, the two
heads). An RFC 3161 token is stored whole (base64) with its SHA-256; what can be checked offline
is that its message imprint is the checkpoint's digest, and its time; the TSA's signature needs
the TSA's certificate chain and is not verified here (the report says so).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.input_files import read_user_bytes, read_user_json
from embodied_eval.record_base import utc_now_iso
from embodied_eval.store import hashchain, ledger
from embodied_eval.store import signing_keys as keylib
from embodied_eval.store.core import Store, default_db_path, transaction
from embodied_eval.store.hashchain import Problem

CHECKPOINT_FORMAT = "embodied-eval-checkpoint/1"
INCIDENT_TABLE = "incident_chain"
#: The chains a checkpoint names: (key in the payload, table, name in messages).
CHAINS = (
    ("trial_ledger", ledger.TABLE, "trial-ledger"),
    ("incident_log", INCIDENT_TABLE, "incident-log"),
)
_PAYLOAD_KEYS = ("format", "checkpoint_id", "at", "trial_ledger", "incident_log")
#: An RFC 3161 token is a few KB; refuse anything far larger as the wrong file.
MAX_TOKEN_BYTES = 1_000_000
_GENERALIZED_TIME = re.compile(rb"\x18[\x0f-\x17](\d{14}(?:\.\d{1,6})?Z)")


def payload_digest(payload: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a checkpoint's payload (what is countersigned)."""
    return hashlib.sha256(
        canonical_json({k: payload[k] for k in _PAYLOAD_KEYS}).encode()
    ).hexdigest()


def _head(conn: sqlite3.Connection, table: str) -> tuple[int, str]:
    try:
        return hashchain.head(conn, table)
    except sqlite3.OperationalError:  # no incident log in this store yet
        return 0, hashchain.GENESIS_HASH


def _hash_at(conn: sqlite3.Connection, table: str, seq: int) -> str | None:
    if seq == 0:
        return hashchain.GENESIS_HASH
    try:
        return hashchain.hash_at(conn, table, seq)
    except sqlite3.OperationalError:
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically (a temporary file beside it, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _registered(db: Path, key: Ed25519PrivateKey) -> dict[str, Any]:
    from embodied_eval.store.trial_audit import _registration

    return _registration(db, key)


def write_checkpoint(
    db: str | os.PathLike[str] | None, key: Ed25519PrivateKey, out: Path | None = None
) -> dict[str, Any]:
    """Chain a checkpoint of both heads, signed with `key` (registered in the store); returns
    the checkpoint file's content (also written to `out`)."""
    path = Path(db) if db is not None else default_db_path()
    info = _registered(path, key)
    with Store(path, create=False) as store, transaction(store.conn):
        conn = store.conn
        (lseq, lhash), (iseq, ihash) = _head(conn, ledger.TABLE), _head(conn, INCIDENT_TABLE)
        payload: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "checkpoint_id": ledger.new_record_id("CP"),
            "at": utc_now_iso(),
            "trial_ledger": {"seq": lseq, "hash": lhash},
            "incident_log": {"seq": iseq, "hash": ihash},
        }
        digest = payload_digest(payload)
        signer = {"holder": info["holder"], "role": info["role"]}
        row = ledger.append(
            conn,
            "checkpoint",
            payload["checkpoint_id"],
            {**payload, "digest": digest, **signer},
            signing_key=key,
            at=payload["at"],
        )
    content = {
        **payload,
        "digest": digest,
        "ledger_seq": row.seq,
        "signer": {
            **signer,
            "fingerprint": row.signer,
            "public_key": keylib.public_key_hex(key.public_key()),
            "signature": keylib.sign(key, digest),
        },
        "countersignatures": [],
    }
    if out is not None:
        _write_json(out, content)
    return content


def tsa_token_facts(token: bytes, digest: str) -> dict[str, Any]:
    """What can be checked offline in an RFC 3161 token: that it holds the checkpoint's digest as
    its SHA-256 message imprint (OCTET STRING of 32 bytes), and its time (the GeneralizedTime
    after the imprint: the TSTInfo's genTime). EvalError when the imprint is not the digest."""
    imprint = b"\x04\x20" + bytes.fromhex(digest)
    at = token.find(imprint)
    if at < 0:
        raise EvalError(
            "--tsa-token: the token does not time-stamp this checkpoint (its message imprint is "
            f"not the checkpoint's SHA-256 digest {digest}); request it with `openssl ts -query "
            f"-digest {digest} -sha256`",
            key="tsa_token",
        )
    found = _GENERALIZED_TIME.search(token, at)
    gen_time = None
    if found is not None:
        text = found.group(1).decode()
        stamp = dt.datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
        gen_time = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"imprint_matches": True, "gen_time": gen_time}


def countersign(
    db: str | os.PathLike[str] | None,
    checkpoint_id: str,
    *,
    key: Ed25519PrivateKey | None = None,
    holder: str = "",
    tsa_token: Path | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """Chain a second party's countersignature of a checkpoint (an Ed25519 signature of its
    digest with the second party's key, or an RFC 3161 token of it); returns the record's data
    and writes the countersigned checkpoint file to `out`."""
    if (key is None) == (tsa_token is None):
        raise EvalError("countersign: give either --key (Ed25519) or --tsa-token", key="key")
    path = Path(db) if db is not None else default_db_path()
    with Store(path, create=False) as store, transaction(store.conn):
        row = ledger.find(store.conn, "checkpoint", checkpoint_id)
        if row is None:
            raise EvalError(f"no checkpoint {checkpoint_id!r} in the store", key="checkpoint")
        digest = str(row.data["digest"])
        data: dict[str, Any] = {"checkpoint_id": checkpoint_id, "digest": digest}
        if key is not None:
            if not holder.strip():
                raise EvalError("countersign: name the second party (--holder)", key="holder")
            fingerprint = keylib.fingerprint(key.public_key())
            if fingerprint == row.signer:
                raise EvalError(
                    "countersign: this is the key that signed the checkpoint; a countersignature "
                    "needs a second party's key",
                    key="key",
                )
            data |= {
                "method": "ed25519",
                "holder": holder.strip(),
                "fingerprint": fingerprint,
                "public_key": keylib.public_key_hex(key.public_key()),
                "signature": keylib.sign(key, digest),
            }
        else:
            assert tsa_token is not None
            token = read_user_bytes(tsa_token, "--tsa-token", max_bytes=MAX_TOKEN_BYTES)
            data |= {
                "method": "rfc3161",
                "holder": holder.strip() or "time-stamping authority",
                "token_sha256": hashlib.sha256(token).hexdigest(),
                "token_b64": base64.b64encode(token).decode("ascii"),
                **tsa_token_facts(token, digest),
            }
        chained = ledger.append(
            store.conn, "countersignature", ledger.new_record_id("CS"), data, subject=checkpoint_id
        )
        content = _file_content(store.conn, row)
    if out is not None:
        _write_json(out, content)
    return {**data, "seq": chained.seq}


def _countersignatures(conn: sqlite3.Connection) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for row in ledger.rows(conn, "kind = 'countersignature'"):
        out.setdefault(str(row.subject), []).append((row.seq, row.data))
    return out


def _file_content(conn: sqlite3.Connection, row: hashchain.ChainRow) -> dict[str, Any]:
    payload = {k: row.data[k] for k in _PAYLOAD_KEYS}
    signed = {k: row.data.get(k) for k in ("holder", "role")}
    return {
        **payload,
        "digest": row.data["digest"],
        "ledger_seq": row.seq,
        "signer": {**signed, "fingerprint": row.signer},
        "countersignatures": [d for _, d in _countersignatures(conn).get(row.record_id, [])],
    }


def countersignature_problem(data: dict[str, Any], digest: str) -> str | None:
    """Why a countersignature does not vouch for `digest` (None when it does)."""
    if data.get("digest") != digest:
        return "names another digest than its checkpoint's"
    if data.get("method") == "ed25519":
        public = str(data.get("public_key", ""))
        try:
            fingerprint = keylib.fingerprint(public)
        except (EvalError, ValueError):
            return "carries no readable public key"
        if fingerprint != data.get("fingerprint"):
            return "carries a fingerprint that is not its public key's"
        if not keylib.verify_signature(public, digest, str(data.get("signature", ""))):
            return f"does not verify with key {fingerprint[:16]}…: forged or altered"
        return None
    if data.get("method") == "rfc3161":
        try:
            token = base64.b64decode(str(data.get("token_b64", "")), validate=True)
        except ValueError:
            return "holds a token that is not base64"
        if hashlib.sha256(token).hexdigest() != data.get("token_sha256"):
            return "holds a token whose SHA-256 is not the one recorded"
        try:
            tsa_token_facts(token, digest)
        except EvalError:
            return "holds a token whose message imprint is not the checkpoint's digest"
        return None
    return f"has an unknown method {data.get('method')!r}"


def _who(countersignatures: list[dict[str, Any]]) -> str:
    names = []
    for c in countersignatures:
        if c.get("method") == "ed25519":
            names.append(f"{c.get('holder')} (key {str(c.get('fingerprint'))[:16]}…)")
        else:
            names.append(f"{c.get('holder')} (RFC 3161 token {c.get('gen_time') or ''!s})")
    return ", ".join(names)


def check_checkpoint(
    conn: sqlite3.Connection, content: dict[str, Any], where_seq: int | None
) -> tuple[dict[str, Any], Problem | None]:
    """Check one checkpoint (as chained, or as a file kept outside): its digest, each
    countersignature, and — when countersigned — that every record it names still hashes to
    what it named. Returns (its summary, the first problem or None)."""
    cid = str(content.get("checkpoint_id", "?"))
    try:
        digest = payload_digest(content)
    except KeyError as exc:
        return {"checkpoint_id": cid}, Problem(where_seq, cid, "content", f"checkpoint lacks {exc}")
    if digest != content.get("digest"):
        return {"checkpoint_id": cid}, Problem(
            where_seq, cid, "content", f"checkpoint {cid}'s heads do not hash to its digest"
        )
    good = []
    for cs in content.get("countersignatures", []):
        problem = countersignature_problem(cs, digest)
        if problem:
            return {"checkpoint_id": cid}, Problem(
                where_seq, cid, "countersignature",
                f"a countersignature of checkpoint {cid} by {cs.get('holder', '?')} {problem} "
                "— the checkpoint (or the history it names) was rewritten after it was "
                "countersigned",
            )  # fmt: skip
        good.append(cs)
    summary = {
        "checkpoint_id": cid,
        "at": content["at"],
        "ledger_seq": where_seq,
        "trial_ledger": content["trial_ledger"],
        "incident_log": content["incident_log"],
        "countersigned_by": [
            {k: cs.get(k) for k in ("method", "holder", "fingerprint", "gen_time", "token_sha256")}
            for cs in good
        ],
    }
    if not good:
        return summary, None
    for name, table, label in CHAINS:
        seq, named = int(content[name]["seq"]), str(content[name]["hash"])
        now = _hash_at(conn, table, seq)
        if now != named:
            what = (
                f"record {seq} is no longer there"
                if now is None
                else f"record {seq} now hashes to {now[:16]}…"
            )
            return summary, Problem(
                where_seq,
                cid,
                "rewritten",
                f"history rewritten before countersigned checkpoint {cid} ({content['at']}, "
                f"countersigned by {_who(good)}): {label} {what} but the checkpoint names "
                f"{named[:16]}…",
            )
    return summary, None


def check_store_checkpoints(
    conn: sqlite3.Connection, files: list[dict[str, Any]] | None = None
) -> tuple[list[dict[str, Any]], Problem | None]:
    """Every checkpoint chained in the ledger (with its chained countersignatures), then every
    checkpoint file given; stops at the first problem."""
    signatures = _countersignatures(conn)
    out: list[dict[str, Any]] = []
    for row in ledger.rows(conn, "kind = 'checkpoint'"):
        content = {
            **row.data,
            "countersignatures": [d for _, d in signatures.get(row.record_id, [])],
        }
        summary, problem = check_checkpoint(conn, content, row.seq)
        if problem is not None:
            return out, problem
        out.append(summary)
    for content in files or []:
        summary, problem = check_checkpoint(conn, content, None)
        if problem is not None:
            return out, problem
        summary["from_file"] = True
        out.append(summary)
    return out, None


def not_yet_anchored(
    checkpoints: list[dict[str, Any]], ledger_records: int, incident_records: int
) -> dict[str, Any]:
    """The records after the last countersigned checkpoint, per chain: {"after": id or None,
    "trial_ledger": [first, last] or None, "incident_log": [first, last] or None}."""
    anchored = [c for c in checkpoints if c.get("countersigned_by")]
    last = {"trial_ledger": 0, "incident_log": 0}
    for c in anchored:
        for name in last:
            last[name] = max(last[name], int(c[name]["seq"]))
    after = (
        max(anchored, key=lambda c: c["trial_ledger"]["seq"])["checkpoint_id"] if anchored else None
    )
    totals = {"trial_ledger": ledger_records, "incident_log": incident_records}
    return {
        "after": after,
        **{n: ([last[n] + 1, totals[n]] if totals[n] > last[n] else None) for n in totals},
    }


def anchoring_line(anchor: dict[str, Any], checkpoints: int) -> str:
    """One line: how far the countersigned checkpoints reach and what is not yet anchored."""
    parts = [
        f"{label} record {span[0]}"
        if span[0] == span[1]
        else f"{label} records {span[0]}–{span[1]}"
        for (name, _, label) in CHAINS
        if (span := anchor.get(name))
    ]
    if anchor.get("after") is None:
        head = "no countersigned checkpoint"
    else:
        head = f"anchored by {checkpoints} countersigned checkpoint(s), last {anchor['after']}"
    tail = f"; not yet anchored: {', '.join(parts)}" if parts else "; every record anchored"
    return head + tail


def load_checkpoint_file(path: Path) -> dict[str, Any]:
    """A checkpoint file (as `store checkpoint --out` / `store countersign --out` write it)."""
    data = read_user_json(path, "checkpoint file")
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise EvalError(
            f"checkpoint file {str(path)!r}: not an {CHECKPOINT_FORMAT} file", key="checkpoint"
        )
    return data
