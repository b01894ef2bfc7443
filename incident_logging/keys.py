"""Ed25519 signing keys: the private key is a PEM file the user keeps; the public key is registered.

A key is identified by its fingerprint, the SHA-256 of the raw 32-byte public key (hex). A private
key file is written atomically with mode 0600 and never overwritten; it may be encrypted with a
passphrase (PKCS#8, best available encryption).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from embodied_eval.canonical import atomic_write_bytes, sha256_hex
from embodied_eval.errors import EvalError


def public_key_hex(public: Ed25519PublicKey) -> str:
    """The raw 32-byte public key as 64 hex characters."""
    return public.public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    ).hex()


def fingerprint(public: Ed25519PublicKey | str) -> str:
    """SHA-256 (hex) of the raw public key; accepts the key or its 64-hex raw form."""
    raw = public if isinstance(public, str) else public_key_hex(public)
    return sha256_hex(bytes.fromhex(raw))


def load_public_hex(raw_hex: str) -> Ed25519PublicKey:
    """Public key from its 64-hex raw form (EvalError if malformed)."""
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(raw_hex))
    except ValueError:
        raise EvalError("public key: expected 64 hex characters (raw Ed25519)", key="key") from None


def generate_key() -> Ed25519PrivateKey:
    """A new Ed25519 private key (from the operating system's CSPRNG)."""
    return Ed25519PrivateKey.generate()


def write_private_key(key: Ed25519PrivateKey, path: Path, passphrase: bytes | None = None) -> None:
    """Write `key` as PKCS#8 PEM to `path` (mode 0600). Refuses to overwrite an existing file."""
    path = Path(path)
    if path.exists():
        raise EvalError(
            f"{str(path)!r} already exists; choose a new path (a key file is never overwritten)",
            key="out",
        )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=encryption,
    )
    atomic_write_bytes(path, pem)
    os.chmod(path, 0o600)


def load_private_key(path: Path, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """Read an Ed25519 private key PEM; EvalError with the fix when missing, wrong or locked."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"key file {str(path)!r} does not exist", key="key")
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=passphrase)
    except TypeError:
        raise EvalError(
            f"key file {str(path)!r} is encrypted: give its passphrase (--passphrase-env VAR)"
            if passphrase is None
            else f"key file {str(path)!r} is not encrypted: drop the passphrase",
            key="key",
        ) from None
    except ValueError:
        raise EvalError(
            f"key file {str(path)!r} is not a readable PEM private key (or the passphrase is wrong)",
            key="key",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise EvalError(f"key file {str(path)!r} is not an Ed25519 key", key="key")
    return key


def sign(key: Ed25519PrivateKey, message: str) -> str:
    """Ed25519 signature of the UTF-8 message, as hex."""
    return key.sign(message.encode("utf-8")).hex()


def verify_signature(public_hex: str, message: str, signature_hex: str) -> bool:
    """True when `signature_hex` is a valid Ed25519 signature of `message` by the public key."""
    try:
        public = load_public_hex(public_hex)
        public.verify(bytes.fromhex(signature_hex), message.encode("utf-8"))
    except (InvalidSignature, ValueError, EvalError):
        return False
    return True
