"""Key files: mode 0600 from creation, passphrase encryption, never overwritten, one fingerprint."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from embodied_eval.errors import EvalError
from embodied_eval.store.signing_keys import (
    create_private_key,
    fingerprint,
    load_key_option,
    load_private_key,
    sign,
    sign_bytes,
    signature_is_valid,
    verify_signature,
)

pytestmark = pytest.mark.timeout(30)


def test_key_file_is_0600_and_fingerprint_is_sha256_of_raw_public_key(tmp_path: Path) -> None:
    path = tmp_path / "owner.pem"
    fp = create_private_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = load_private_key(path)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert fp == hashlib.sha256(raw).hexdigest() == fingerprint(raw.hex())
    assert [p.name for p in tmp_path.iterdir()] == ["owner.pem"]  # no temp file left
    with pytest.raises(EvalError, match="already exists"):
        create_private_key(path)


def test_encrypted_key_needs_its_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tech.pem"
    fp = create_private_key(path, passphrase=b"correct horse")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert b"ENCRYPTED PRIVATE KEY" in path.read_bytes()
    with pytest.raises(EvalError, match="is encrypted"):
        load_private_key(path)
    with pytest.raises(EvalError, match="passphrase is wrong"):
        load_private_key(path, b"wrong")
    monkeypatch.setenv("TECH_PASS", "correct horse")
    key = load_key_option(path, "TECH_PASS")
    assert key is not None and fingerprint(key.public_key()) == fp
    monkeypatch.delenv("TECH_PASS")
    with pytest.raises(EvalError, match="TECH_PASS is not set"):
        load_key_option(path, "TECH_PASS")


def test_both_signature_encodings_verify_and_reject_other_messages(tmp_path: Path) -> None:
    create_private_key(tmp_path / "k.pem")
    key = load_private_key(tmp_path / "k.pem")
    public_hex = (
        key.public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        .hex()
    )
    sig = sign(key, "abc")
    assert len(sig) == 128 and verify_signature(public_hex, "abc", sig)
    assert not verify_signature(public_hex, "abd", sig)
    b64 = sign_bytes(key, b"abc")
    assert signature_is_valid(key.public_key(), b"abc", b64)
    assert not signature_is_valid(key.public_key(), b"abd", b64)
