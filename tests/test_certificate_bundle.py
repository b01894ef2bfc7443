"""Certificate bundles: signing, verification, and every kind of tampering named by file."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from embodied_eval.canonical import canonical_hash, sha256_hex
from embodied_eval.certificate.bundle import write_bundle
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.store.signing_keys import (
    create_private_key,
    load_private_key,
    public_key_fingerprint,
)

pytestmark = pytest.mark.timeout(60)

CERT = {
    "format": "embodied-eval-certificate/1",
    "level": {"assigned": "AAI-1"},
    "numbers": [0.5, 0.25, 1],
    "text": "Zürich <b>&</b>",
}
FILES = {
    "report.html": b"<!DOCTYPE html><html><body>report</body></html>\n",
    "plots/e.png": b"\x89PNG\r\n\x1a\n" + bytes(range(64)),
    "protocol.toml": b'[protocol]\nname = "x"\n',
}


@pytest.fixture
def key_path(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "signer.pem"
    create_private_key(path)
    return path


@pytest.fixture
def bundle(tmp_path: Path, key_path: Path) -> Path:
    out = tmp_path / "bundle"
    write_bundle(out, CERT, FILES, load_private_key(key_path))
    return out


def flip_byte(path: Path, index: int | None = None) -> None:
    """Change one byte of a file (the middle one by default) by flipping its lowest bit."""
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if index is None else index
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def verify_error(path: Path) -> str:
    with pytest.raises(EvalError) as info:
        verify_bundle(path)
    return str(info.value)


def test_round_trip_returns_certificate_and_signer(bundle: Path, key_path: Path) -> None:
    verified = verify_bundle(bundle)
    assert verified.certificate == CERT
    expected_fp = public_key_fingerprint(load_private_key(key_path).public_key())
    assert verified.key_fingerprint == expected_fp
    # Every file is listed with the SHA-256 of its bytes (computed here independently).
    assert verified.files["report.html"] == sha256_hex(FILES["report.html"])
    assert verified.files["plots/e.png"] == sha256_hex(FILES["plots/e.png"])
    assert set(verified.files) == {
        "certificate.json",
        "public_key.pem",
        "report.html",
        "plots/e.png",
        "protocol.toml",
    }
    # The signed block binds the certificate's canonical JSON.
    signature = json.loads((bundle / "signature").read_text())
    assert signature["signed"]["certificate_sha256"] == canonical_hash(CERT)
    # Pinning the right fingerprint passes too.
    verify_bundle(bundle, expected_fingerprint=expected_fp.upper())


@pytest.mark.parametrize(
    "name", ["certificate.json", "report.html", "plots/e.png", "protocol.toml", "public_key.pem"]
)
def test_one_changed_byte_names_the_file(bundle: Path, name: str) -> None:
    flip_byte(bundle / name)
    message = verify_error(bundle)
    assert message.startswith(f"verification failed: {name}:")


@pytest.mark.parametrize("where", ["start", "middle", "signature_value", "end"])
def test_changed_signature_byte_names_signature(bundle: Path, where: str) -> None:
    path = bundle / "signature"
    text = path.read_bytes()
    index = {
        "start": 0,
        "middle": len(text) // 2,
        # Inside the base64 signature value itself (still valid base64 after the flip).
        "signature_value": text.index(b'"signature":"') + len(b'"signature":"') + 5,
        "end": len(text) - 3,
    }[where]
    flip_byte(path, index)
    assert verify_error(bundle).startswith("verification failed: signature:")


def test_missing_file_is_named(bundle: Path) -> None:
    (bundle / "plots" / "e.png").unlink()
    assert verify_error(bundle) == (
        "verification failed: plots/e.png: missing (listed in the signature)"
    )


def test_missing_signature_is_named(bundle: Path) -> None:
    (bundle / "signature").unlink()
    assert verify_error(bundle).startswith("verification failed: signature: missing")


def test_extra_file_is_named(bundle: Path) -> None:
    (bundle / "plots" / "extra.png").write_bytes(b"not signed")
    assert verify_error(bundle) == (
        "verification failed: plots/extra.png: unexpected file (not covered by the signature)"
    )


def test_hidden_extra_file_is_named(bundle: Path) -> None:
    (bundle / ".notes").write_text("x")
    assert verify_error(bundle).startswith("verification failed: .notes: unexpected file")


def test_resigned_bundle_fails_a_pinned_fingerprint(
    bundle: Path, key_path: Path, tmp_path: Path
) -> None:
    """Someone re-signing an edited certificate with their own key is caught by pinning."""
    original_fp = public_key_fingerprint(load_private_key(key_path).public_key())
    forged = dict(CERT, level={"assigned": "AAI-4"})
    other = Ed25519PrivateKey.generate()
    write_bundle(tmp_path / "forged", forged, FILES, other)
    verify_bundle(tmp_path / "forged")  # self-consistent …
    with pytest.raises(EvalError, match=r"^verification failed: signature: signed by key"):
        verify_bundle(tmp_path / "forged", expected_fingerprint=original_fp)


def test_copied_signature_from_another_bundle_fails(
    bundle: Path, key_path: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    write_bundle(other, dict(CERT, text="different"), FILES, load_private_key(key_path))
    shutil.copy(other / "signature", bundle / "signature")
    assert verify_error(bundle).startswith("verification failed: certificate.json:")


def test_cli_verify_prints_one_line_and_exits_2(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "verified" in out
    flip_byte(bundle / "report.html")
    assert main(["verify", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: verification failed: report.html:")


def test_out_folder_must_be_empty(bundle: Path, key_path: Path) -> None:
    with pytest.raises(EvalError, match="is not empty"):
        write_bundle(bundle, CERT, FILES, load_private_key(key_path))
    # With overwrite the old bundle is replaced whole.
    write_bundle(bundle, dict(CERT, text="v2"), FILES, load_private_key(key_path), overwrite=True)
    assert verify_bundle(bundle).certificate["text"] == "v2"
    assert not [p for p in bundle.parent.iterdir() if p.name.startswith(".bundle")]


def test_non_finite_numbers_are_refused(tmp_path: Path, key_path: Path) -> None:
    with pytest.raises(ValueError, match="NaN"):
        write_bundle(tmp_path / "b", {"x": float("nan")}, {}, load_private_key(key_path))
    assert not (tmp_path / "b").exists()


def test_key_file_is_private_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    create_private_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(EvalError, match="already exists"):
        create_private_key(path)


def test_bad_keys_are_explained(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="does not exist"):
        load_private_key(tmp_path / "nope.pem")
    ec = tmp_path / "ec.pem"
    ec.write_bytes(
        generate_private_key(SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(EvalError, match="not an Ed25519 key"):
        load_private_key(ec)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    with pytest.raises(EvalError, match="encrypted"):
        load_private_key(locked)
    assert isinstance(load_private_key(locked, b"pw"), Ed25519PrivateKey)
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(EvalError, match="not a readable PEM"):
        load_private_key(junk)
