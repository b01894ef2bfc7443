"""Ed25519 keys and signatures: one module for the incident log, the trial ledger and certificates.

A private key is a PKCS#8 PEM file its holder keeps: written with mode 0600 from the first byte,
never overwritten, optionally encrypted with a passphrase (typed at a prompt, or read from an
environment variable for automation). A key is identified by its *fingerprint*, the SHA-256 (hex)
of its raw 32-byte public key; verifiers pin a signer by it.

What a signature proves: that whoever held the private key signed exactly these bytes (a record's
chain hash, a certificate's signed block). It does not prove *who* that is: a key anyone can make
proves nothing until a verifier pins its fingerprint (`--key-fingerprint`) or trusts the key
registry it is listed in (holder, role, revocation — the registry itself is only as trustworthy as
the window close that certifies the set of keys in force). It does not prove *when* (record times
are what the signer's clock said) and does not keep a revoked key from signing: verification
rejects a revoked key's signatures on records chained after its revocation.

Signature encodings: chained records carry hex signatures of their hash text (`sign`,
`verify_signature`); certificate bundles carry base64 signatures of bytes (`sign_bytes`,
`signature_is_valid`).
"""

from __future__ import annotations

import base64
import getpass
import os
import sys
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from embodied_eval.canonical import sha256_hex
from embodied_eval.errors import EvalError

ALGORITHM = "ed25519"
#: Mode of every private key file (owner read/write only).
PRIVATE_KEY_MODE = 0o600


# --------------------------------------------------------------------------- public keys


def public_key_hex(public: Ed25519PublicKey) -> str:
    """The raw 32-byte public key as 64 hex characters."""
    return public.public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    ).hex()


def fingerprint(public: Ed25519PublicKey | str) -> str:
    """SHA-256 (hex) of the raw public key; accepts the key or its 64-hex raw form."""
    raw = public if isinstance(public, str) else public_key_hex(public)
    return sha256_hex(bytes.fromhex(raw))


#: The certificate's name for `fingerprint` (same function).
public_key_fingerprint = fingerprint


def load_public_hex(raw_hex: str) -> Ed25519PublicKey:
    """Public key from its 64-hex raw form (EvalError if malformed)."""
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(raw_hex))
    except ValueError:
        raise EvalError("public key: expected 64 hex characters (raw Ed25519)", key="key") from None


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


# --------------------------------------------------------------------------- passphrases


def passphrase_from_env(env_var: str | None) -> bytes | None:
    """The passphrase held by environment variable `env_var` (None when no variable is named)."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise EvalError(
            f"--passphrase-env: environment variable {env_var} is not set", key="passphrase_env"
        )
    return value.encode("utf-8")


def prompt_passphrase(what: str, *, confirm: bool = False) -> bytes:
    """Ask for a passphrase on the terminal (twice with `confirm`); EvalError without a terminal."""
    if not sys.stdin.isatty():
        raise EvalError(
            f"{what}: a passphrase is needed and there is no terminal to ask on; name the "
            "environment variable holding it with --passphrase-env",
            key="passphrase_env",
        )
    first = getpass.getpass(f"passphrase for {what}: ")
    if not first:
        raise EvalError(f"{what}: the passphrase is empty", key="passphrase_env")
    if confirm and getpass.getpass("again: ") != first:
        raise EvalError(f"{what}: the two passphrases differ", key="passphrase_env")
    return first.encode("utf-8")


# --------------------------------------------------------------------------- private keys


def generate_key() -> Ed25519PrivateKey:
    """A new Ed25519 private key (from the operating system's CSPRNG)."""
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey, passphrase: bytes | None = None) -> bytes:
    """PKCS#8 PEM of `key`, encrypted (best available encryption) when a passphrase is given."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=encryption,
    )


def write_private_key(
    key: Ed25519PrivateKey,
    path: str | os.PathLike[str],
    passphrase: bytes | None = None,
    *,
    overwrite: bool = False,
) -> None:
    """Write `key` as PKCS#8 PEM to `path`, mode 0600 from creation, all or nothing.

    The PEM goes to a temporary file created 0600 beside `path` (never readable by others, not
    even briefly), is flushed to disk and then linked into place, so an existing key file is
    never replaced unless `overwrite`.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise EvalError(
            f"key file {str(target)!r} already exists; use it, or choose another path (a key "
            "file is never overwritten)",
            key="key",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    pem = private_key_pem(key, passphrase)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, PRIVATE_KEY_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # fails when the target appeared meanwhile
            except FileExistsError:
                raise EvalError(
                    f"key file {str(target)!r} already exists; choose another path", key="key"
                ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def create_private_key(
    path: str | os.PathLike[str], *, overwrite: bool = False, passphrase: bytes | None = None
) -> str:
    """Generate an Ed25519 key, write it to `path` (0600, optionally encrypted) and return its
    fingerprint (64 hex characters). Refuses an existing file unless `overwrite`."""
    key = generate_key()
    write_private_key(key, path, passphrase, overwrite=overwrite)
    return fingerprint(key.public_key())


def is_encrypted(path: str | os.PathLike[str]) -> bool:
    """True when the PEM file holds an encrypted private key."""
    return b"ENCRYPTED PRIVATE KEY" in Path(path).read_bytes()[:64]


def load_private_key(
    path: str | os.PathLike[str],
    passphrase: bytes | None = None,
    *,
    prompt: bool = False,
) -> Ed25519PrivateKey:
    """Read an Ed25519 private key PEM (EvalError naming the file and the fix).

    Args:
        path: the PEM file.
        passphrase: the passphrase of an encrypted key, else None.
        prompt: when the key is encrypted and no passphrase was given, ask on the terminal.
    """
    p = Path(path)
    if not p.is_file():
        raise EvalError(
            f"key file {str(p)!r} does not exist (create one with `embodied-eval keys create`)",
            key="key",
        )
    if passphrase is None and prompt and is_encrypted(p):
        passphrase = prompt_passphrase(f"key {p}")
    try:
        key = serialization.load_pem_private_key(p.read_bytes(), password=passphrase)
    except TypeError:
        raise EvalError(
            f"key file {str(p)!r} is encrypted: give its passphrase (--passphrase-env VAR, or "
            "type it when asked)"
            if passphrase is None
            else f"key file {str(p)!r} is not encrypted: drop the passphrase",
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


def load_key_option(
    path: str | os.PathLike[str] | None, passphrase_env: str | None
) -> Ed25519PrivateKey | None:
    """The key named by a CLI's --key / --passphrase-env (prompting when encrypted and no
    variable is named); None when no --key was given."""
    if path is None:
        return None
    return load_private_key(path, passphrase_from_env(passphrase_env), prompt=True)


# --------------------------------------------------------------------------- signatures


def sign(key: Ed25519PrivateKey, message: str) -> str:
    """Ed25519 signature of the UTF-8 message, as hex (chained records sign their hash)."""
    return key.sign(message.encode("utf-8")).hex()


def verify_signature(public_hex: str, message: str, signature_hex: str) -> bool:
    """True when `signature_hex` is a valid Ed25519 signature of `message` by the public key."""
    try:
        public = load_public_hex(public_hex)
        public.verify(bytes.fromhex(signature_hex), message.encode("utf-8"))
    except (InvalidSignature, ValueError, EvalError):
        return False
    return True


def sign_bytes(key: Ed25519PrivateKey, message: bytes) -> str:
    """Ed25519 signature of `message`, base64-encoded (certificate bundles)."""
    return base64.b64encode(key.sign(message)).decode("ascii")


def signature_is_valid(key: Ed25519PublicKey, message: bytes, signature_b64: str) -> bool:
    """True when `signature_b64` is a valid Ed25519 signature of `message` under `key`."""
    try:
        signature = base64.b64decode(signature_b64.encode("ascii"), validate=True)
        key.verify(signature, message)
    except (InvalidSignature, ValueError, UnicodeEncodeError):
        return False
    return True
