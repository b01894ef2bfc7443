"""Verify a certificate bundle: signature, file set and file hashes.

Checks run in an order that names the file at fault: first the `signature` file (its own bytes
are covered by the Ed25519 signature over the signed block), then missing and unexpected files,
then each file's SHA-256, then the certificate's canonical hash and its signer. Every failure is
one `EvalError` whose message starts with the path of the file at fault.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_hash, canonical_json, file_sha256
from embodied_eval.certificate.bundle import (
    CERTIFICATE_FILE,
    PUBLIC_KEY_FILE,
    SIGNATURE_FILE,
    SIGNATURE_FORMAT,
)
from embodied_eval.errors import EvalError
from embodied_eval.input_files import (
    MAX_CONFIG_BYTES,
    decode_text,
    parse_json,
    read_user_bytes,
    read_user_json,
)
from embodied_eval.store.signing_keys import (
    ALGORITHM,
    load_public_key_pem,
    public_key_fingerprint,
    signature_is_valid,
)


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle whose signature and files checked out.

    Attributes:
        path: the bundle folder.
        certificate: the parsed certificate.
        key_fingerprint: SHA-256 of the signer's raw public key (hex).
        files: relative path → sha256 of every signed file.
    """

    path: Path
    certificate: dict[str, Any]
    key_fingerprint: str
    files: dict[str, str]


def _fail(path: str, problem: str) -> EvalError:
    return EvalError(f"verification failed: {path}: {problem}", key=path)


#: Largest file a bundle may hold (recordings are referenced by hash, not shipped whole).
MAX_BUNDLE_FILE_BYTES = 1024 * 1024 * 1024
#: Most files a bundle may hold.
MAX_BUNDLE_FILES = 10_000


def _bundle_files(root: Path) -> set[str]:
    """Every regular file below `root`, relative, `/`-separated.

    A bundle holds only regular files and folders: a symbolic link (which could point anywhere,
    or loop), a FIFO (reading it would block for ever) or a device is refused by name, before any
    file is opened; so is a file above `MAX_BUNDLE_FILE_BYTES`.
    """
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in (*dirnames, *filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            try:
                st = path.lstat()
            except OSError as exc:
                raise _fail(rel, f"cannot be read ({exc.strerror})") from None
            if stat.S_ISLNK(st.st_mode):
                raise _fail(rel, "is a symbolic link; a bundle holds only regular files")
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise _fail(rel, "is not a regular file (a pipe, socket or device)")
            if st.st_size > MAX_BUNDLE_FILE_BYTES:
                raise _fail(rel, f"is {st.st_size} bytes; at most {MAX_BUNDLE_FILE_BYTES}")
            found.add(rel)
            if len(found) > MAX_BUNDLE_FILES:
                raise _fail(".", f"holds more than {MAX_BUNDLE_FILES} files")
    return found


def _read_signature(root: Path) -> tuple[dict[str, Any], str]:
    """Parse `signature` and check the Ed25519 signature over its signed block."""
    sig_path = root / SIGNATURE_FILE
    if not sig_path.is_file() or sig_path.is_symlink():
        raise _fail(SIGNATURE_FILE, "missing (not a signed certificate bundle)")
    try:
        doc = parse_json(
            decode_text(
                read_user_bytes(sig_path, SIGNATURE_FILE, max_bytes=MAX_CONFIG_BYTES),
                SIGNATURE_FILE,
            ),
            SIGNATURE_FILE,
        )
    except EvalError as exc:
        raise _fail(SIGNATURE_FILE, f"unreadable ({exc})") from None
    try:
        block = doc["signed"]
        pem = doc["public_key_pem"]
        signature = doc["signature"]
        algorithm = doc["algorithm"]
        if not isinstance(block, dict) or not isinstance(block.get("files"), dict):
            raise TypeError("signed block is not an object with files")
        if not isinstance(pem, str) or not isinstance(signature, str):
            raise TypeError("key or signature is not text")
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise _fail(SIGNATURE_FILE, f"unreadable ({exc})") from None
    if algorithm != ALGORITHM or block.get("format") != SIGNATURE_FORMAT:
        raise _fail(SIGNATURE_FILE, f"unknown format {block.get('format')!r}/{algorithm!r}")
    key = load_public_key_pem(pem, where=SIGNATURE_FILE)
    fingerprint = public_key_fingerprint(key)
    if block.get("key_fingerprint") != fingerprint:
        raise _fail(SIGNATURE_FILE, "the signed key fingerprint does not match the public key")
    try:
        message = canonical_json(block).encode("utf-8")
    except ValueError as exc:
        raise _fail(SIGNATURE_FILE, f"unreadable ({exc})") from None
    if not signature_is_valid(key, message, signature):
        raise _fail(SIGNATURE_FILE, f"the Ed25519 signature does not verify (key {fingerprint})")
    return block, pem


def verify_bundle(
    path: str | os.PathLike[str], *, expected_fingerprint: str | None = None
) -> VerifiedBundle:
    """Check a bundle's signature, file set and file hashes; raise EvalError naming the bad file.

    Args:
        path: the bundle folder.
        expected_fingerprint: when given, the signer's key fingerprint must equal it (pins the
            signer; without it the bundle proves only that nothing changed since signing).

    Returns:
        The verified bundle with its parsed certificate.
    """
    root = Path(path)
    if not root.is_dir():
        raise EvalError(f"{str(root)!r} is not a certificate bundle folder", key="bundle")
    present = _bundle_files(root) - {SIGNATURE_FILE}
    block, pem = _read_signature(root)
    signed_files: dict[str, str] = dict(block["files"])
    missing = sorted(set(signed_files) - present)
    if missing:
        raise _fail(missing[0], "missing (listed in the signature)")
    extra = sorted(present - set(signed_files))
    if extra:
        raise _fail(extra[0], "unexpected file (not covered by the signature)")
    for rel in sorted(signed_files):
        actual = file_sha256(root / rel)
        if actual != signed_files[rel]:
            raise _fail(
                rel,
                f"contents changed since signing (sha256 {actual[:12]}…, signed "
                f"{str(signed_files[rel])[:12]}…)",
            )
    if PUBLIC_KEY_FILE not in present:
        raise _fail(PUBLIC_KEY_FILE, "missing")
    key_bytes = read_user_bytes(root / PUBLIC_KEY_FILE, PUBLIC_KEY_FILE)
    if key_bytes.decode("ascii", errors="replace") != pem:
        raise _fail(PUBLIC_KEY_FILE, "differs from the key in the signature")
    if CERTIFICATE_FILE not in present:
        raise _fail(CERTIFICATE_FILE, "missing")
    try:
        certificate = read_user_json(root / CERTIFICATE_FILE, CERTIFICATE_FILE)
    except EvalError as exc:
        raise _fail(CERTIFICATE_FILE, f"not valid JSON ({exc})") from None
    if not isinstance(certificate, dict):
        raise _fail(CERTIFICATE_FILE, "not a JSON object")
    if canonical_hash(certificate) != block.get("certificate_sha256"):
        raise _fail(CERTIFICATE_FILE, "canonical contents differ from the signed hash")
    fingerprint = str(block["key_fingerprint"])
    signer = certificate.get("signer", {})
    if isinstance(signer, dict) and signer.get("key_fingerprint") not in (None, fingerprint):
        raise _fail(CERTIFICATE_FILE, "names a different signer than the signature")
    if expected_fingerprint is not None and expected_fingerprint.lower() != fingerprint:
        raise _fail(
            SIGNATURE_FILE,
            f"signed by key {fingerprint}, not the expected {expected_fingerprint}",
        )
    return VerifiedBundle(
        path=root, certificate=certificate, key_fingerprint=fingerprint, files=signed_files
    )
