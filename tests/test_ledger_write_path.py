"""The lean write path under the trial ledger: canonical JSON without the pre-walk, one INSERT that
both checks an episode id and stores it, the WAL checkpoint interval, the plain-episode reading of
the verify walk, and read-only commands that add no tables to a store."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from embodied_eval.canonical import canonical_json
from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, connect
from embodied_eval.store.hashchain import build_body, record_hash
from embodied_eval.store.verify_store import verify_store
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(60)


def test_canonical_json_by_hand() -> None:
    # Text keys: sorted, no spaces, UTF-8 kept, tuples as lists.
    assert canonical_json({"b": 1, "a": (1.5, {"d": None, "c": "é"})}) == (
        '{"a":[1.5,{"c":"é","d":null}],"b":1}'
    )
    # Non-text keys are written as their str() and sorted as text: "10" < "2", "True".
    assert canonical_json({2: "x", 10: "y"}) == '{"10":"y","2":"x"}'
    assert canonical_json({"k": [{True: 1}]}) == '{"k":[{"True":1}]}'
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="NaN or infinity"):
            canonical_json({"a": [bad]})


def test_rewriting_a_stored_episode_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        assert store.write_episode(make_episode(), [{"kind": "contact", "n": 1}]) is True
        head = ledger.head(store.conn)
        assert head[0] == 1
        assert store.write_episode(make_episode(), [{"kind": "contact", "n": 1}]) is False
        with pytest.raises(EvalError, match="already stored with a different quality"):
            store.write_episode(make_episode(quality=0.1))
        assert ledger.head(store.conn) == head
        assert store.episode_count() == 1
        assert len(store.safety_events()) == 1
    assert verify_store(db).ok


def test_store_connections_checkpoint_every_10000_wal_pages(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10_000
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    conn.close()


def test_an_episode_record_claiming_a_signer_without_a_signature_is_named(
    tmp_path: Path,
) -> None:
    # A plain episode record is read from its text without parsing, but only when its signer is
    # null: one that names a signer and stores no signature is parsed and named.
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episode(make_episode())
        seq, prev = ledger.head(store.conn)
    data = {
        "artifacts": [],
        "episode_id": "p0009-real-a1",
        "faults": [],
        "import": None,
        "record_sha256": "0" * 64,
        "safety_events_sha256": None,
    }
    body = build_body(seq + 1, "episode", "p0009-real-a1", data, signer="ab" * 32)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(
        f"INSERT INTO {ledger.TABLE} (seq, body, prev_hash, hash) VALUES (?,?,?,?)",
        (seq + 1, body, prev, record_hash(body, prev)),
    )
    conn.close()
    report = verify_store(db)
    assert report.problem is not None
    assert (report.problem.seq, report.problem.record_id, report.problem.kind) == (
        2,
        "p0009-real-a1",
        "signature",
    )


def _schema(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT type, name FROM sqlite_master UNION ALL "
            "SELECT 'version', component || ' ' || version FROM schema_migrations ORDER BY 1, 2"
        ).fetchall()
    finally:
        conn.close()


def test_read_only_commands_add_no_tables_to_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episode(make_episode(window="w1"))
    before = _schema(db)
    assert not any(name == "incident_chain" for _, name in before)
    for args in (
        ["incidents", "list", "--db", str(db)],
        ["incidents", "verify", "--db", str(db)],
        ["incidents", "rates", "--window", "w1", "--db", str(db)],
        ["incidents", "exposure", "list", "--db", str(db)],
        ["keys", "list", "--db", str(db)],
        ["store", "verify", "--db", str(db)],
    ):
        main(args)
        assert _schema(db) == before, args
    capsys.readouterr()
    # A command that writes still adds them.
    assert main(["keys", "create", "--role", "technician", "--holder", "tom",
                 "--out", str(tmp_path / "tom.pem"), "--db", str(db)]) == 0  # fmt: skip
    assert any(name == "incident_chain" for _, name in _schema(db))


@pytest.mark.parametrize(
    ("statements", "named"),
    [
        (["UPDATE safety_events SET event_json = '{\"kind\":\"contact\",\"n\":9}' "
          "WHERE episode_id = 'e3'"], (3, "e3", "edited")),
        (["DELETE FROM safety_events WHERE episode_id = 'e1'"], (1, "e1", "edited")),
        (["INSERT INTO safety_events VALUES ('e2', 0, '{}')"], (2, "e2", "edited")),
        (["INSERT INTO safety_events VALUES ('ghost', 0, '{}')"], (None, "ghost", "unchained")),
        # Two episodes changed: the first in chain order is named.
        (["UPDATE safety_events SET event_json = '{}' WHERE episode_id = 'e3'",
          "DELETE FROM safety_events WHERE episode_id = 'e1'"], (1, "e1", "edited")),
    ],
)  # fmt: skip
def test_safety_event_rows_are_checked_against_the_chain(
    tmp_path: Path, statements: list[str], named: tuple[int | None, str, str]
) -> None:
    db = tmp_path / "s.db"
    with Store(db) as store:
        for eid, events in (("e1", [{"kind": "contact", "n": 1}]), ("e2", []),
                            ("e3", [{"kind": "contact", "n": 3}, {"kind": "stop"}])):  # fmt: skip
            store.write_episode(make_episode(episode_id=eid, pair_id=eid), events)
    report = verify_store(db)
    assert report.ok and report.counts["safety_events"] == 3
    conn = sqlite3.connect(db, isolation_level=None)
    for name in ("safety_events_no_update", "safety_events_no_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    for statement in statements:
        conn.execute(statement)
    conn.close()
    report = verify_store(db)
    assert report.section == "safety_events table" and report.problem is not None
    assert (report.problem.seq, report.problem.record_id, report.problem.kind) == named


def test_plain_episode_records_read_from_text_equal_the_parsed_ones(tmp_path: Path) -> None:
    from embodied_eval.store import hashchain
    from embodied_eval.store.ledger_checks import LedgerWalk

    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episode(make_episode(episode_id="e1", pair_id="e1"), [{"kind": "contact"}])
        store.write_episode(make_episode(episode_id="e2", pair_id="e2", window="fenêtre ü"))
        store.write_episode(make_episode(episode_id='e"3', pair_id="e3"), [{"n": 1}, {"n": 2}])
        walks = []
        for skim in (True, False):
            walk = LedgerWalk({})
            result = hashchain.walk_chain(
                store.conn,
                ledger.TABLE,
                frozenset(ledger.KINDS),
                walk.check,
                walk.skim if skim else None,
            )
            assert result.problem is None and result.count == 3
            walks.append(
                {
                    eid: (seq, data["record_sha256"], data["safety_events_sha256"], data["faults"])
                    for eid, (seq, data) in walk.episodes.items()
                }
            )
        bodies = store.conn.execute(f"SELECT seq, body FROM {ledger.TABLE} ORDER BY seq")
        read = LedgerWalk({})
        assert [read.skim(seq, body) for seq, body in bodies] == [True, True, False]
    assert walks[0] == walks[1]
    assert list(walks[0]) == ["e1", "e2", 'e"3']
    assert walks[0]["e2"][2] is None and walks[0]["e1"][2] is not None
