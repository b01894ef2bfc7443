"""Issue a certificate (`embodied-eval certify`) and recompute one from the store
(`embodied-eval verify --db`).

Issuing: load the protocol, the signing key and the evidence; gather the window from the store
(refused when the incident log does not verify); compute E, the score and the level; assemble the
certificate; draw the plots; render the report; write and sign the bundle.

Recomputing: from the bundle's own protocol file, evidence and RNG seed, gather the same window
from the store and build the certificate again; every number must come out the same, the
episodes must be the ones certified, and the incident log must still verify with the certified
chain head as a prefix of today's chain; the whole store must verify and the trial ledger must
still hold the certified head and the window's certified seal.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_json, sha256_hex
from embodied_eval.certificate.analyses import window_analyses
from embodied_eval.certificate.assemble import build_certificate
from embodied_eval.certificate.bundle import (
    EVIDENCE_FILE,
    PLOTS_DIR,
    PROTOCOL_FILE,
    REPORT_FILE,
    write_bundle,
)
from embodied_eval.certificate.compute import evaluate_window
from embodied_eval.certificate.inputs import WindowInputs
from embodied_eval.certificate.plots import certificate_plots
from embodied_eval.certificate.report_html import render_report
from embodied_eval.certificate.validity import validity_section
from embodied_eval.certificate.verify import VerifiedBundle
from embodied_eval.errors import EvalError
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.scoring import load_evidence
from embodied_eval.stats.ppi_floor import PPIFloor
from embodied_eval.store.guard import check_is_store
from embodied_eval.store.signing_keys import (
    load_private_key,
    public_key_fingerprint,
    public_key_pem,
)

#: Certificate entries that legitimately differ when recomputed later (when, by whom, with which
#: build, what the log looks like now, which artifact files are on this disk).
NOT_RECOMPUTED = (
    "issued_at",
    "signer",
    "software",
    "incidents.chain",
    "ledger.head_hash",
    "ledger.record_count",
    "ledger.verification",
    "ledger.seal",
    "window.closed",
    "window.close",
    "artifacts.rehashed_at_certification",
    "artifacts.not_on_disk_at_certification",
)


#: Entries added to the certificate after it was first issued in this format: a certificate issued
#: before them does not hold them, so the recomputation leaves each out when the certificate
#: lacks it (everything it does hold must still recompute).
ADDED_ENTRIES = (
    "validity",
    "analyses",
    "embodiment.unsafe_successes",
    "embodiment.AR_every_attempt",
    "embodiment.judge.AR_corrected_bound",
    "embodiment.AR_ppi.floor.coverage",
    "validity.safety_settings",
    "embodiment.judge.benchmark",
)
#: Entries whose meaning changed, by the entry that marks certificates issued after the change:
#: before the window's own audit measured the judge, `judge.accuracy` was the shipped benchmark
#: table, a file outside the store that cannot be recomputed from it.
CHANGED_ENTRIES = {
    "embodiment.judge.benchmark": ("embodiment.judge.accuracy",),
    # Issued before the safety settings were a validity condition: its void_if lacks their line.
    "validity.safety_settings": ("validity.void_if",),
}


def _holds(cert: Mapping[str, Any], dotted: str) -> bool:
    node: Any = cert
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


@dataclass(frozen=True)
class IssuedCertificate:
    """A written bundle: its folder, the certificate and the signer's key fingerprint."""

    path: Path
    certificate: dict[str, Any]
    key_fingerprint: str


def _read_protocol(path: str | os.PathLike[str]) -> tuple[bytes, Any]:
    import tomllib

    p = Path(path)
    if not p.is_file():
        raise EvalError(f"protocol file {str(p)!r} does not exist", key="protocol")
    data = p.read_bytes()
    try:
        mapping = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EvalError(f"protocol file {str(p)!r} is not valid UTF-8 TOML: {exc}") from None
    return data, protocol_from_mapping(mapping)


def _plain(value: Any) -> Any:
    """The JSON form the certificate file holds (tuples → lists, keys → text)."""
    return json.loads(canonical_json(value))


def issue_certificate(
    *,
    protocol_path: str | os.PathLike[str],
    db: str | os.PathLike[str] | None,
    key_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    evidence_path: str | os.PathLike[str] | None = None,
    passphrase: bytes | None = None,
    seed: int | None = None,
    overwrite: bool = False,
) -> IssuedCertificate:
    """Compute, assemble, render and sign a certificate bundle for the protocol's window.

    Args:
        protocol_path: the protocol TOML file (copied into the bundle).
        db: the store (default: $EMBODIED_EVAL_DB or ./embodied-eval.db).
        key_path: the signer's Ed25519 private key (PEM).
        out: the bundle folder (absent or empty unless `overwrite`).
        evidence_path: evidence JSON for the software-only axes and the resource card.
        passphrase: the key's passphrase when encrypted.
        seed: bootstrap RNG seed (default: derived from the protocol's base seed and window).
        overwrite: replace a non-empty `out`.

    Returns:
        IssuedCertificate.
    """
    protocol_bytes, protocol = _read_protocol(protocol_path)
    key = load_private_key(key_path, passphrase, prompt=True)
    evidence = None
    evidence_bytes = None
    if evidence_path is not None:
        evidence = load_evidence(Path(evidence_path))
        evidence_bytes = Path(evidence_path).read_bytes()
    public = key.public_key()
    fingerprint = public_key_fingerprint(public)
    inputs, results = evaluate_window(
        protocol, db, evidence=evidence, seed=seed, signer_fingerprint=fingerprint
    )
    built = build_certificate(
        inputs,
        results,
        protocol_file_sha256=sha256_hex(protocol_bytes),
        evidence=evidence,
        evidence_sha256=None if evidence_bytes is None else sha256_hex(evidence_bytes),
        signer={
            "key_fingerprint": fingerprint,
            "public_key_pem": public_key_pem(public),
            "registered_in_incident_log": inputs.chain.get("signer_registration"),
        },
    )
    built["validity"] = validity_section(inputs, str(built["issued_at"]))
    built["analyses"] = window_analyses(
        inputs.db_path, inputs.window_id, int((inputs.ledger or {}).get("record_count") or 0)
    )
    cert = _plain(built)
    plots = certificate_plots(cert)
    files: dict[str, bytes] = {
        REPORT_FILE: render_report(
            cert,
            plots,
            episodes=inputs.episodes,
            report_dir=Path(out),
            store_path=inputs.db_path,
        ).encode("utf-8"),
        PROTOCOL_FILE: protocol_bytes,
    }
    for name, png in plots.items():
        files[f"{PLOTS_DIR}/{name}.png"] = png
    if evidence_bytes is not None:
        files[EVIDENCE_FILE] = evidence_bytes
    written = write_bundle(out, cert, files, key, overwrite=overwrite)
    return IssuedCertificate(written.path, cert, written.key_fingerprint)


# --------------------------------------------------------------------------- recomputation


def _drop(cert: Mapping[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    out = json.loads(json.dumps(cert))
    for dotted in paths:
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return False


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place (dotted path, sorted keys) where two JSON values differ, or None.

    Numbers compare with a relative tolerance of 1e-9 (recomputation on another machine may
    round the last digit differently); everything else must be equal.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return sub, a.get(key), b.get(key)
            found = first_difference(a[key], b[key], sub)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length)", len(a), len(b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if a == b or _same_number(a, b):
        return None
    return path, a, b


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "…"


def _check_chain_prefix(db: str | os.PathLike[str], chain: Mapping[str, Any]) -> None:
    """The certified chain head must still be the record at the certified length."""
    count = int(chain.get("record_count", 0))
    head = str(chain.get("head_hash", ""))
    open_log = resolve(INCIDENT_LOG["open"])
    rows = resolve(INCIDENT_LOG["chain_rows"])
    with open_log(db, create=False, read_only=True) as log:
        log.require_verified()
        now_count, _ = log.head()
        if int(now_count) < count:
            raise EvalError(
                f"verification failed: incident log has {now_count} records, fewer than the "
                f"{count} certified; records were removed",
                key="incidents",
            )
        if count == 0:
            return
        found = rows(log.conn, "seq = ?", (count,))
        if not found or found[0].hash != head:
            raise EvalError(
                f"verification failed: incident log record {count} no longer has the certified "
                f"head hash {head[:16]}…; the log was rewritten after certification",
                key="incidents",
            )


def _check_ledger_prefix(db: Path, certified: Mapping[str, Any]) -> None:
    """The whole store must verify and still extend the trial ledger's certified head and the
    window's certified seal (appending after them is fine; rewriting or removing is not)."""
    from embodied_eval.store import hashchain, ledger
    from embodied_eval.store.core import Store
    from embodied_eval.store.verify_store import require_store_verified

    require_store_verified(db, what="verification")
    if not certified:
        return
    anchors = [("certified head", certified.get("record_count"), certified.get("head_hash"))]
    seal = certified.get("seal")
    if isinstance(seal, dict):
        anchors.append(("certified seal", seal.get("seq"), seal.get("hash")))
    with Store(db, create=False) as store:
        for what, count, digest in anchors:
            if not count:
                continue
            now = hashchain.hash_at(store.conn, ledger.TABLE, int(count))
            if now != digest:
                raise EvalError(
                    f"verification failed: trial ledger record {count} (the {what}, "
                    f"{str(digest)[:16]}…) is "
                    + ("gone: the ledger was truncated" if now is None else "different")
                    + " after certification",
                    key="ledger",
                )


def check_signer_registry(
    verified: VerifiedBundle, db: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """The signer's entry in the store's key registry ({"holder", "role"}), or None when the key
    is not registered; EvalError when it was revoked before the certificate was issued."""
    state = resolve(INCIDENT_LOG["integrity_state"])(Path(db))
    entry = next(
        (k for k in state["keys"] if k.get("fingerprint") == verified.key_fingerprint), None
    )
    if entry is None:
        return None
    issued = str(verified.certificate.get("issued_at", ""))
    revoked = entry.get("revoked_at")
    if revoked is not None and issued >= str(revoked):
        raise EvalError(
            f"verification failed: signature: key {verified.key_fingerprint[:16]}… "
            f"({entry.get('holder')}, {entry.get('role')}) was revoked at {revoked}, before this "
            f"certificate was issued ({issued}): a revoked key's signatures do not count",
            key="signature",
        )
    return {"holder": entry.get("holder"), "role": entry.get("role")}


def recompute_check(verified: VerifiedBundle, db: str | os.PathLike[str]) -> None:
    """Recompute a verified bundle's certificate from the store; EvalError at the first
    difference (one line naming the number, its certified value and its value now).

    Args:
        verified: a bundle that passed `verify_bundle`.
        db: the store the certificate was computed from.
    """
    cert = verified.certificate
    root = verified.path
    db_path = Path(db)
    if not db_path.is_file():
        raise EvalError(f"store {str(db_path)!r} does not exist", key="db")
    check_is_store(db_path)
    protocol_bytes, protocol = _read_protocol(root / PROTOCOL_FILE)
    if protocol.protocol_hash != cert.get("protocol", {}).get("hash"):
        raise EvalError(
            f"verification failed: {PROTOCOL_FILE}: hashes to {protocol.protocol_hash[:12]}…, "
            "not the certified protocol hash",
            key=PROTOCOL_FILE,
        )
    evidence = load_evidence(root / EVIDENCE_FILE) if cert.get("evidence") else None
    seed = cert.get("rng", {}).get("seed")
    if not isinstance(seed, int):
        raise EvalError("verification failed: certificate.json: rng.seed is missing", key="rng")
    _check_chain_prefix(db_path, cert.get("incidents", {}).get("chain", {}))
    _check_ledger_prefix(db_path, cert.get("ledger") or {})
    certified = cert.get("episodes", {})

    def same_episodes(inputs: WindowInputs) -> None:
        if inputs.episodes_digest() != certified.get("digest"):
            raise EvalError(
                f"verification failed: the store's window {protocol.window_id!r} now holds "
                f"{len(inputs.episodes)} episode(s) that differ from the "
                f"{certified.get('count')} certified (episodes digest changed)",
                key="episodes",
            )

    # AR_ppi's validity floor as certified (a certificate issued under an earlier floor states it).
    floor = PPIFloor.from_json(((cert.get("embodiment") or {}).get("AR_ppi") or {}).get("floor"))
    inputs, results = evaluate_window(
        protocol,
        db_path,
        evidence=evidence,
        seed=seed,
        check_inputs=same_episodes,
        ppi_floor=floor,
        # Issued before every attempt counted: its AR gate was AR as judged.
        missing_outcomes=None if _holds(cert, "embodiment.AR_every_attempt") else "judged",
    )
    rebuilt = build_certificate(
        inputs,
        results,
        protocol_file_sha256=sha256_hex(protocol_bytes),
        evidence=evidence,
        evidence_sha256=cert.get("evidence", {}).get("sha256") if evidence else None,
        signer=cert.get("signer", {}),
    )
    head = int((cert.get("ledger") or {}).get("record_count") or 0)
    if "validity" in cert:
        rebuilt["validity"] = validity_section(inputs, str(cert.get("issued_at", "")), head)
    if "analyses" in cert:
        rebuilt["analyses"] = window_analyses(db_path, inputs.window_id, head)
    again = _plain(rebuilt)
    absent = tuple(p for p in ADDED_ENTRIES if not _holds(cert, p))
    changed = tuple(
        old for mark, olds in CHANGED_ENTRIES.items() if not _holds(cert, mark) for old in olds
    )
    diff = first_difference(
        _drop(cert, NOT_RECOMPUTED + changed), _drop(again, NOT_RECOMPUTED + absent + changed)
    )
    if diff is not None:
        where, certified_value, now_value = diff
        raise EvalError(
            f"verification failed: certificate.json: {where} is {_short(certified_value)} but "
            f"recomputes to {_short(now_value)} from the store",
            key=where,
        )
