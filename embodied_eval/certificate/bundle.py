"""The certificate bundle on disk: its files, their hashes and the signature over both.

A bundle is one folder:

- `certificate.json`: the certificate (pretty-printed JSON; its canonical form is what is signed),
- `report.html`: the self-contained report, `plots/*.png`: the plots it embeds,
- `protocol.toml`: the protocol file certified against, `evidence.json` when one was supplied,
- `public_key.pem`: the signer's public key,
- `signature`: canonical JSON holding the signed block and the Ed25519 signature.

The signed block is `{"format", "certificate_sha256", "files", "key_fingerprint"}` where
`certificate_sha256` is the SHA-256 of the certificate's canonical JSON and `files` maps every
other path in the folder (relative, `/`-separated) to the SHA-256 of its bytes. Changing any byte
of any file, removing one or adding one therefore breaks verification, and the verifier can name
the file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.canonical import (
    atomic_write_bytes,
    canonical_hash,
    canonical_json,
    sha256_hex,
)
from embodied_eval.errors import EvalError
from embodied_eval.store.signing_keys import (
    ALGORITHM,
    public_key_fingerprint,
    public_key_pem,
    sign_bytes,
)

SIGNATURE_FORMAT = "embodied-eval-certificate-signature/1"
CERTIFICATE_FILE = "certificate.json"
SIGNATURE_FILE = "signature"
PUBLIC_KEY_FILE = "public_key.pem"
REPORT_FILE = "report.html"
PROTOCOL_FILE = "protocol.toml"
EVIDENCE_FILE = "evidence.json"
PLOTS_DIR = "plots"


def certificate_bytes(certificate: Mapping[str, Any]) -> bytes:
    """The certificate as written to `certificate.json`: sorted keys, indented, UTF-8."""
    # Round-trip through canonical_json first so NaN/inf are refused exactly as when signing.
    text = json.dumps(
        json.loads(canonical_json(certificate)), indent=2, sort_keys=True, ensure_ascii=False
    )
    return (text + "\n").encode("utf-8")


def signed_block(
    certificate: Mapping[str, Any], files: Mapping[str, str], fingerprint: str
) -> dict[str, Any]:
    """The block the signature covers (see the module docstring)."""
    return {
        "format": SIGNATURE_FORMAT,
        "certificate_sha256": canonical_hash(certificate),
        "files": dict(sorted(files.items())),
        "key_fingerprint": fingerprint,
    }


@dataclass(frozen=True)
class WrittenBundle:
    """What `write_bundle` produced: the folder, its file hashes and the signer's fingerprint."""

    path: Path
    files: dict[str, str]
    key_fingerprint: str


def _prepare_target(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out {str(out)!r} exists and is not a folder", key="out")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise EvalError(
            f"--out {str(out)!r} is not empty; choose a new folder or pass --overwrite",
            key="out",
        )


def write_bundle(
    out: str | os.PathLike[str],
    certificate: Mapping[str, Any],
    files: Mapping[str, bytes],
    key: Ed25519PrivateKey,
    *,
    overwrite: bool = False,
) -> WrittenBundle:
    """Write a signed bundle into folder `out`, all or nothing.

    The bundle is assembled in a temporary folder beside `out` and renamed into place, so a crash
    never leaves a half-written certificate.

    Args:
        out: the bundle folder (must be absent or empty unless `overwrite`).
        certificate: the certificate mapping (plain JSON values).
        files: the other files, relative path → bytes (e.g. "report.html", "plots/e_parts.png").
        key: the signer's Ed25519 private key.
        overwrite: replace a non-empty `out`.

    Returns:
        The folder, the sha256 of every file except `signature`, and the key fingerprint.
    """
    target = Path(out)
    _prepare_target(target, overwrite)
    reserved = {CERTIFICATE_FILE, SIGNATURE_FILE, PUBLIC_KEY_FILE}
    clash = sorted(reserved & set(files))
    if clash:
        raise EvalError(f"bundle: {clash[0]} is written by the bundle itself", key="files")
    public = key.public_key()
    fingerprint = public_key_fingerprint(public)
    pem = public_key_pem(public)
    contents: dict[str, bytes] = {
        CERTIFICATE_FILE: certificate_bytes(certificate),
        PUBLIC_KEY_FILE: pem.encode("ascii"),
    }
    for rel, data in files.items():
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or not parts:
            raise EvalError(f"bundle: {rel!r} is not a relative path inside the bundle")
        contents[Path(rel).as_posix()] = data
    hashes = {rel: sha256_hex(data) for rel, data in contents.items()}
    block = signed_block(certificate, hashes, fingerprint)
    signature_doc = {
        "algorithm": ALGORITHM,
        "public_key_pem": pem,
        "signed": block,
        "signature": sign_bytes(key, canonical_json(block).encode("utf-8")),
    }
    contents[SIGNATURE_FILE] = (canonical_json(signature_doc) + "\n").encode("utf-8")

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for rel, data in contents.items():
            atomic_write_bytes(staging / rel, data)
            # A bundle is meant to be shared: readable by all, like any published document.
            (staging / rel).chmod(0o644)
        for folder in (staging, *(p for p in staging.rglob("*") if p.is_dir())):
            folder.chmod(0o755)
        if target.exists():
            # Move the old folder aside first so a failure below still leaves one whole bundle.
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            aside.rmdir()
            target.rename(aside)
            staging.rename(target)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return WrittenBundle(path=target, files=hashes, key_fingerprint=fingerprint)
