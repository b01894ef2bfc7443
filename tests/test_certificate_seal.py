"""A sealed window's certificate names both sealed chain heads; `verify --db` checks the store still
extends them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import load_protocol
from embodied_eval.store.signing_keys import create_private_key, load_private_key
from tests.test_certificate import build_window, incident_log

pytestmark = pytest.mark.timeout(180)


def test_certificate_names_the_sealed_heads_and_verify_catches_truncation(tmp_path: Path) -> None:
    protocol_path, db = build_window(tmp_path)
    window = load_protocol(protocol_path).window_id
    key_path = tmp_path / "owner.pem"
    create_private_key(key_path)
    with incident_log(db) as log:
        log.register_key(load_private_key(key_path), "Dana Owner", "protocol_owner")
        close = log.close_window(window, load_private_key(key_path))
    out = tmp_path / "bundle"
    issued = issue_certificate(protocol_path=protocol_path, db=db, key_path=key_path, out=out)
    cert = issued.certificate
    conn = sqlite3.connect(db)
    seal_body, seal_hash, seal_prev = conn.execute(
        "SELECT body, hash, prev_hash FROM episode_chain WHERE json_extract(body, '$.kind') = 'seal'"
    ).fetchone()
    seal_seq = json.loads(seal_body)["seq"]
    episodes = conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    conn.close()
    # The ledger holds 1 manifest + every episode, then the seal.
    assert seal_seq == 1 + episodes + 1
    sealed = cert["ledger"]["seal"]
    assert sealed["seq"] == seal_seq and sealed["hash"] == seal_hash
    assert sealed["episode_head"] == {"head_hash": seal_prev, "record_count": seal_seq - 1}
    assert sealed["incident_head"] == {"head_hash": close["hash"], "record_count": close["seq"]}
    assert cert["ledger"]["head_hash"] == seal_hash and cert["ledger"]["record_count"] == seal_seq
    assert "window seal" in (out / "report.html").read_text(encoding="utf-8")
    recompute_check(verify_bundle(out), db)

    # Someone holding the file removes the seal (the ledger's last record).
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER episode_chain_no_delete")
    conn.execute("DELETE FROM episode_chain WHERE seq = ?", (seal_seq,))
    conn.close()
    with pytest.raises(EvalError, match=r"does not verify — seal: .*truncated|seal at record"):
        recompute_check(verify_bundle(out), db)
