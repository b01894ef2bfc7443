"""Ed25519 keys and signatures for certificate bundles.

Keys are ordinary PEM files: the private key is PKCS#8 (unencrypted, written with mode 0600), the
public key SubjectPublicKeyInfo. A key's *fingerprint* is the SHA-256 of its raw 32-byte public
key, in hex; verifiers pin a signer by it.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from embodied_eval.canonical import atomic_write_bytes, sha256_hex
from embodied_eval.errors import EvalError

ALGORITHM = "ed25519"


def create_private_key(path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
    """Generate an Ed25519 private key and write it as a PEM file readable by its owner only.

    Args:
        path: where to write the PEM file.
        overwrite: replace an existing file (default: refuse, so a key is never lost by accident).

    Returns:
        The new key's fingerprint (64 hex characters).
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise EvalError(
            f"key file {str(target)!r} already exists; use it, or choose another path",
            key="key",
        )
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    atomic_write_bytes(target, pem)
    target.chmod(0o600)
    return public_key_fingerprint(key.public_key())


def load_private_key(
    path: str | os.PathLike[str], passphrase: bytes | None = None
) -> Ed25519PrivateKey:
    """Read an Ed25519 private key from a PEM file (EvalError naming the file).

    Args:
        path: the PEM file (PKCS#8; e.g. from `--create-key` or the incident log's key command).
        passphrase: the passphrase of an encrypted key, else None.
    """
    p = Path(path)
    if not p.is_file():
        raise EvalError(
            f"key file {str(p)!r} does not exist (create one with `embodied-eval certify "
            "--create-key`)",
            key="key",
        )
    try:
        key = serialization.load_pem_private_key(p.read_bytes(), password=passphrase)
    except TypeError:
        raise EvalError(
            f"key file {str(p)!r} is encrypted: name the variable holding its passphrase with "
            "--passphrase-env"
            if passphrase is None
            else f"key file {str(p)!r} is not encrypted: drop --passphrase-env",
            key="key",
        ) from None
    except ValueError:
        raise EvalError(
            f"key file {str(p)!r} is not a readable PEM private key (or the passphrase is wrong)",
            key="key",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise EvalError(
            f"key file {str(p)!r} holds a {type(key).__name__}, not an Ed25519 key", key="key"
        )
    return key


def public_key_pem(key: Ed25519PublicKey) -> str:
    """The public key as PEM text (SubjectPublicKeyInfo)."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def load_public_key_pem(pem: str, *, where: str) -> Ed25519PublicKey:
    """Parse PEM text holding an Ed25519 public key (EvalError naming `where`)."""
    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise EvalError(f"{where}: not a PEM public key ({exc})", key=where) from None
    if not isinstance(key, Ed25519PublicKey):
        raise EvalError(f"{where}: holds a {type(key).__name__}, not an Ed25519 key", key=where)
    return key


def public_key_fingerprint(key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the raw 32-byte public key."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)


def sign_bytes(key: Ed25519PrivateKey, message: bytes) -> str:
    """Ed25519 signature of `message`, base64-encoded."""
    return base64.b64encode(key.sign(message)).decode("ascii")


def signature_is_valid(key: Ed25519PublicKey, message: bytes, signature_b64: str) -> bool:
    """True when `signature_b64` is a valid Ed25519 signature of `message` under `key`."""
    try:
        signature = base64.b64decode(signature_b64.encode("ascii"), validate=True)
        key.verify(signature, message)
    except (InvalidSignature, ValueError, UnicodeEncodeError):
        return False
    return True
