"""Certificates issued before an entry was added still verify against the store; the entries
they do hold must still recompute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.certificate.bundle import write_bundle
from embodied_eval.certificate.issue import ADDED_ENTRIES, issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.errors import EvalError
from embodied_eval.store.signing_keys import load_private_key
from tests.test_certificate import build_window, write_evidence

pytestmark = pytest.mark.timeout(240)


def _drop(cert: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    node = cert
    for part in parents:
        node = node.get(part) or {}
    node.pop(last, None)


def _resign(src: Path, out: Path, key_path: Path, change) -> Path:
    """The bundle at `src` with its certificate changed by `change`, signed again."""
    cert = json.loads((src / "certificate.json").read_text(encoding="utf-8"))
    change(cert)
    files = {
        p.relative_to(src).as_posix(): p.read_bytes()
        for p in src.rglob("*")
        if p.is_file() and p.name not in ("certificate.json", "signature", "public_key.pem")
    }
    write_bundle(out, cert, files, load_private_key(key_path, None))
    return out


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from embodied_eval.store.signing_keys import create_private_key

    tmp = tmp_path_factory.mktemp("compat")
    protocol, db = build_window(tmp)
    key = tmp / "owner.pem"
    create_private_key(key)
    out = tmp / "bundle"
    issue_certificate(protocol_path=protocol, db=db, key_path=key, out=out,
                      evidence_path=write_evidence(tmp))  # fmt: skip
    return {"tmp": tmp, "db": db, "key": key, "out": out}


def test_the_new_entries_are_in_a_new_certificate(issued: dict[str, Path]) -> None:
    cert = json.loads((issued["out"] / "certificate.json").read_text(encoding="utf-8"))
    unsafe = cert["embodiment"]["unsafe_successes"]
    # 21 real successes of 25 (tests/test_certificate.py); the one near miss is at the warning
    # level, so none is unsafe.
    assert unsafe["all"]["successes"] == 21 and unsafe["all"]["unsafe"] == 0
    assert "Unsafe successes" in (issued["out"] / "report.html").read_text(encoding="utf-8")


def test_a_certificate_without_the_new_entries_still_verifies(issued: dict[str, Path]) -> None:
    def older(cert: dict[str, Any]) -> None:
        for dotted in ADDED_ENTRIES:
            _drop(cert, dotted)

    old = _resign(issued["out"], issued["tmp"] / "old", issued["key"], older)
    cert = verify_bundle(old).certificate
    assert "unsafe_successes" not in cert["embodiment"]
    recompute_check(verify_bundle(old), issued["db"])


def test_a_changed_new_entry_does_not_verify(issued: dict[str, Path]) -> None:
    def tampered(cert: dict[str, Any]) -> None:
        cert["embodiment"]["unsafe_successes"]["all"]["unsafe"] = 1

    bad = _resign(issued["out"], issued["tmp"] / "bad", issued["key"], tampered)
    with pytest.raises(EvalError, match=r"unsafe_successes\.all\.unsafe"):
        recompute_check(verify_bundle(bad), issued["db"])


def test_an_older_certificates_benchmark_accuracy_is_not_recomputed(
    issued: dict[str, Path],
) -> None:
    # Before the window's own audit measured the judge, judge.accuracy was the shipped benchmark
    # table (outside the store): such a certificate (no judge.benchmark) still verifies.
    def older(cert: dict[str, Any]) -> None:
        cert["embodiment"]["judge"].pop("benchmark")
        cert["embodiment"]["judge"]["accuracy"] = {"measured_on": "the twin against its oracle"}

    old = _resign(issued["out"], issued["tmp"] / "old-judge", issued["key"], older)
    recompute_check(verify_bundle(old), issued["db"])

    # A new certificate's accuracy is recomputed from the store's audit labels.
    def tampered(cert: dict[str, Any]) -> None:
        cert["embodiment"]["judge"]["accuracy"] = {"measured_on": "the twin against its oracle"}

    bad = _resign(issued["out"], issued["tmp"] / "bad-judge", issued["key"], tampered)
    with pytest.raises(EvalError, match=r"judge\.accuracy"):
        recompute_check(verify_bundle(bad), issued["db"])
