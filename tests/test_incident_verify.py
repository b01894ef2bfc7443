"""Verification finds every kind of tampering and names the first bad record (seq and id).

Each test drops the append-only triggers first, as someone holding the file could.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from embodied_eval.store.signing_keys import fingerprint, generate_key, sign
from incident_logging.chain import TABLE, record_hash
from incident_logging.store import IncidentStore, window_incidents
from tests.test_incident_store import Team, make_record

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def log(tmp_path: Path):
    """Seven registered keys, the default threshold table, incidents INC-1..3, a signed review
    of INC-2 and an exposure entry, in that chain order."""
    team = Team(tmp_path / "log.db")
    for i in (1, 2, 3):
        team.store.report(make_record(f"INC-{i}", occurred_at=f"2026-11-0{i}T10:00:00Z"))
    team.review("rita", "INC-2", "major")
    team.exposure(6.0)
    assert team.store.verify().ok
    team.store.close()
    return tmp_path / "log.db"


def seq_of(db: Path, kind: str, record_id: str | None = None) -> int:
    with sqlite3.connect(db) as conn:
        sql = f"SELECT seq FROM {TABLE} WHERE kind = ?" + (
            " AND record_id = ?" if record_id else ""
        )
        params = (kind, record_id) if record_id else (kind,)
        return conn.execute(sql, params).fetchone()[0]


def tamper(db: Path, *statements: tuple[str, tuple]) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER incident_chain_no_update")
    conn.execute("DROP TRIGGER incident_chain_no_delete")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.close()


def problem(db: Path):
    with IncidentStore(db) as store:
        report = store.verify()
    assert not report.ok
    return report.problem


def body_of(db: Path, seq: int) -> tuple[str, str]:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT body, prev_hash FROM {TABLE} WHERE seq = ?", (seq,)).fetchone()


def test_edited_bytes_are_named(log):
    seq = seq_of(log, "incident", "INC-2")
    body, _ = body_of(log, seq)
    tamper(
        log, (f"UPDATE {TABLE} SET body = ? WHERE seq = ?", (body.replace("100.0", "10.0"), seq))
    )
    found = problem(log)
    assert (found.kind, found.seq, found.record_id) == ("edited", seq, "INC-2")


def test_deleted_row_is_named(log):
    seq = seq_of(log, "incident", "INC-2")
    tamper(log, (f"DELETE FROM {TABLE} WHERE seq = ?", (seq,)))
    found = problem(log)
    assert (found.kind, found.seq) == ("deleted", seq)
    assert "INC-3" in found.message  # the next record


def test_reordered_rows_are_named(log):
    a = seq_of(log, "incident", "INC-2")
    b = seq_of(log, "incident", "INC-3")
    assert b == a + 1
    tamper(
        log,
        (f"UPDATE {TABLE} SET seq = -1 WHERE seq = ?", (a,)),
        (f"UPDATE {TABLE} SET seq = ? WHERE seq = ?", (a, b)),
        (f"UPDATE {TABLE} SET seq = ? WHERE seq = -1", (b,)),
    )
    found = problem(log)
    assert (found.kind, found.seq, found.record_id) == ("reordered", a, "INC-3")


def test_forged_signature_is_named(log):
    seq = seq_of(log, "review")
    with sqlite3.connect(log) as conn:
        digest = conn.execute(f"SELECT hash FROM {TABLE} WHERE seq = ?", (seq,)).fetchone()[0]
    forged = sign(generate_key(), digest)  # a valid Ed25519 signature, by the wrong key
    tamper(log, (f"UPDATE {TABLE} SET signature = ? WHERE seq = ?", (forged, seq)))
    found = problem(log)
    assert (found.kind, found.seq) == ("signature", seq)
    assert "forged" in found.message


def test_review_signed_by_an_unregistered_key_is_named(log):
    # A well-formed, correctly chained review appended by someone with their own key.
    intruder = generate_key()
    fp = fingerprint(intruder.public_key())
    with sqlite3.connect(log) as conn:
        last, prev = conn.execute(
            f"SELECT seq, hash FROM {TABLE} ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    body = canonical_json(
        {
            "seq": last + 1,
            "kind": "review",
            "record_id": "REV-forged",
            "window": "w1",
            "subject": "INC-1",
            "source_key": None,
            "signer": fp,
            "at": "2026-11-05T00:00:00Z",
            "data": {"decision": "final", "severity": "near_miss", "role": "safety_officer"},
        }
    )
    digest = record_hash(body, prev)
    with sqlite3.connect(log) as conn:
        conn.execute(
            f"INSERT INTO {TABLE} (seq, body, prev_hash, hash, signature) VALUES (?,?,?,?,?)",
            (last + 1, body, prev, digest, sign(intruder, digest)),
        )
    found = problem(log)
    assert (found.kind, found.seq, found.record_id) == ("signature", last + 1, "REV-forged")
    assert "not registered" in found.message


def test_dropped_trigger_then_rewritten_row_with_recomputed_hash_is_named(log):
    seq = seq_of(log, "incident", "INC-1")
    body, prev = body_of(log, seq)
    edited = body.replace("100.0", "10.0")
    tamper(
        log,
        (
            f"UPDATE {TABLE} SET body = ?, hash = ? WHERE seq = ?",
            (edited, record_hash(edited, prev), seq),
        ),
    )
    found = problem(log)
    assert (found.kind, found.seq, found.record_id) == ("rewritten", seq, "INC-1")


def test_rewriting_the_whole_tail_is_caught_by_the_next_signature(log):
    # Edit INC-1 and recompute every later hash: the chain is consistent again, but the review
    # signed the old chain head, so its signature no longer verifies.
    start = seq_of(log, "incident", "INC-1")
    with sqlite3.connect(log) as conn:
        rows = conn.execute(
            f"SELECT seq, body, prev_hash FROM {TABLE} WHERE seq >= ? ORDER BY seq", (start,)
        ).fetchall()
    statements = []
    prev = rows[0][2]
    for seq, body, _ in rows:
        if seq == start:
            body = body.replace("100.0", "10.0")
        digest = record_hash(body, prev)
        statements.append(
            (
                f"UPDATE {TABLE} SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                (body, prev, digest, seq),
            )
        )
        prev = digest
    tamper(log, *statements)
    found = problem(log)
    assert (found.kind, found.seq) == ("signature", seq_of(log, "review"))


def test_dropped_triggers_alone_are_reported_and_can_be_restored(log):
    tamper(log)
    found = problem(log)
    assert found.kind == "triggers" and found.seq is None
    with IncidentStore(log) as store:
        with pytest.raises(EvalError, match="author"):
            store.restore_triggers(" ")
        assert store.restore_triggers("sam")
        report = store.verify()
        note = json.loads(
            store.conn.execute(
                f"SELECT body FROM {TABLE} WHERE kind = 'integrity_note'"
            ).fetchone()[0]
        )
    assert report.ok
    assert note["data"]["author"] == "sam"


def test_reports_refuse_an_unverified_log(log):
    seq = seq_of(log, "incident", "INC-2")
    body, _ = body_of(log, seq)
    tamper(log, (f"UPDATE {TABLE} SET body = ? WHERE seq = ?", (body.replace("alice", "bob"), seq)))
    with pytest.raises(EvalError, match=rf"record seq {seq} \(INC-2\).*reports are refused"):
        window_incidents(log, "w1")
    with IncidentStore(log) as store, pytest.raises(EvalError, match="does not verify"):
        store.require_verified()
