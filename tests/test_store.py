"""The SQLite store: idempotent writes, conflicts rejected, two processes at once, migrations."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.interchange.tables import episodes_to_frame
from embodied_eval.records import Fault
from embodied_eval.store.core import Store, apply_migrations, connect
from tests.conftest import make_episode


def test_writing_the_same_episode_twice_stores_it_once(db_path: Path):
    ep = make_episode(faults=(Fault("grasp_slip", True, 0.0),))
    with Store(db_path) as store:
        assert store.write_episode(ep) is True
        assert store.write_episode(ep) is False
        assert len(store.episodes()) == 1
        assert store.get_episode(ep.episode_id) == ep
        assert len(store.faults()) == 1


def test_a_different_episode_under_an_existing_id_is_rejected(db_path: Path):
    with Store(db_path) as store:
        store.write_episode(make_episode(quality=0.9))
        with pytest.raises(
            EvalError, match=r"already stored with a different quality \(stored 0.9, given 0.1\)"
        ):
            store.write_episode(make_episode(quality=0.1))
        assert store.get_episode("p0001-real-a1").quality == 0.9  # type: ignore[union-attr]


def test_write_episodes_is_all_or_nothing(db_path: Path):
    with Store(db_path) as store:
        store.write_episode(make_episode(episode_id="x", quality=0.9))
        batch = [make_episode(episode_id="y"), make_episode(episode_id="x", quality=0.2)]
        with pytest.raises(EvalError):
            store.write_episodes(batch)
        assert store.episode_ids() == {"x"}  # "y" was rolled back with the conflicting row


def test_safety_events_are_stored_with_their_episode(db_path: Path):
    with Store(db_path) as store:
        store.write_episode(make_episode(), [{"kind": "tcp_speed", "tcp_speed_mps": 0.4}])
        events = store.safety_events()
        assert events == [
            {"kind": "tcp_speed", "tcp_speed_mps": 0.4, "episode_id": "p0001-real-a1", "ordinal": 0}
        ]


def test_query_filters(db_path: Path):
    with Store(db_path) as store:
        store.write_episode(make_episode(episode_id="a", side="sim", engine="mujoco", window="w1"))
        store.write_episode(make_episode(episode_id="b", side="real", window="w1"))
        store.write_episode(
            make_episode(
                episode_id="c", side="real", window="w2", family="push", task_id="push/block_left"
            )
        )
        assert {e.episode_id for e in store.episodes(side="real")} == {"b", "c"}
        assert {e.episode_id for e in store.episodes(window="w1")} == {"a", "b"}
        assert {e.episode_id for e in store.episodes(family="push")} == {"c"}
        frame = episodes_to_frame(store.episodes(window="w1"))
        assert sorted(frame["episode_id"]) == ["a", "b"]
        assert frame["success"].tolist() == [True, True]


def test_faults_import_is_idempotent_and_checks_episode(db_path: Path):
    with Store(db_path) as store:
        store.write_episode(make_episode())
        faults = [Fault("actuator_stall", False, 120.0, episode_id="p0001-real-a1")]
        assert store.write_faults(faults) == (1, 0)
        assert store.write_faults(faults) == (0, 1)
        with pytest.raises(EvalError, match="no such episode"):
            store.write_faults([Fault("x", True, episode_id="missing")])
        assert store.get_episode("p0001-real-a1").faults[0].repair_s == 120.0  # type: ignore[union-attr]


def test_manifest_escrow_is_idempotent(db_path: Path):
    with Store(db_path) as store:
        assert store.write_manifest("h1", "p", "w", [{"episode_id": "e"}])
        assert not store.write_manifest("h1", "p", "w", [{"episode_id": "e"}])
        assert store.manifest("h1") == [{"episode_id": "e"}]


def _writer(path: str, prefix: str, n: int) -> None:
    with Store(path) as store:
        for i in range(n):
            store.write_episode(make_episode(episode_id=f"{prefix}-{i}", pair_id=f"{prefix}{i}"))
            # a shared id written by both processes: stored once, no error (identical contents)
            store.write_episode(make_episode(episode_id=f"shared-{i}", pair_id=f"s{i}"))


def test_a_store_opened_by_two_processes(db_path: Path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(db_path), p, 30)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Store(db_path) as store:
        ids = store.episode_ids()
    assert len(ids) == 90  # 30 + 30 own + 30 shared, none twice


def test_migrations_are_versioned_and_refuse_a_newer_schema(db_path: Path):
    Store(db_path).close()
    conn = connect(db_path)
    assert apply_migrations(conn, "core", ["CREATE TABLE t (x)"] * 1) == 1
    conn.execute("INSERT INTO schema_migrations VALUES ('core', 99, 'now')")
    with pytest.raises(EvalError, match="newer"):
        Store(db_path)
    conn.close()


def test_opening_a_non_database_is_a_clear_error(tmp_path: Path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(EvalError, match=r"not an SQLite database \(not an embodied-eval store\)"):
        Store(junk)
    with pytest.raises(EvalError, match="does not exist"):
        Store(tmp_path / "absent.db", create=False)
