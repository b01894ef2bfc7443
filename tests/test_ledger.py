"""Trial ledger: chained episodes, the whole-store verify and its tamper matrix, imports, audits,
corrections, seals and key revocation."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.records import Artifact, ExposureEntry, Fault
from embodied_eval.store import ledger
from embodied_eval.store.core import Store
from embodied_eval.store.hashchain import record_hash
from embodied_eval.store.signing_keys import generate_key
from embodied_eval.store.trial_audit import amend_episode, audit_episode
from embodied_eval.store.verify_store import require_store_verified, verify_store
from incident_logging.store import IncidentStore
from tests.conftest import make_episode

pytestmark = pytest.mark.timeout(60)


def _episode(i: int, tmp: Path | None = None, **kw: Any) -> Any:
    arts = ()
    if tmp is not None:
        f = tmp / f"ep{i}.mcap"
        f.write_bytes(f"recording {i}".encode())
        arts = (Artifact(path=str(f), sha256=hashlib.sha256(f.read_bytes()).hexdigest()),)
    return make_episode(
        episode_id=f"p{i:04d}-real-a1",
        pair_id=f"p{i:04d}",
        window="w1",
        artifacts=arts,
        quality=0.9 if i % 2 else 0.5,
        **kw,
    )


class Lab:
    """A store with 6 real episodes (each with an MCAP file), a technician and a protocol owner."""

    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "store.db"
        self.tmp = tmp
        with Store(self.path) as store:
            for i in range(1, 7):
                faults = (
                    (Fault(kind="gripper_slip", recovered_autonomously=True),) if i == 2 else ()
                )
                store.write_episode(_episode(i, tmp, faults=faults), [{"kind": "contact", "n": i}])
            store.write_manifest("m" * 64, "p", "w1", [{"episode_id": "p0001-real-a1"}])
        self.tech = generate_key()
        self.owner = generate_key()
        with IncidentStore(self.path) as log:
            log.register_key(self.tech, "tom", "technician")
            log.register_key(self.owner, "paul", "protocol_owner")

    def seal(self) -> dict[str, Any]:
        with IncidentStore(self.path) as log:
            log.add_exposure(
                ExposureEntry(
                    entry_id="E1",
                    window="w1",
                    start="2026-11-02T00:00:00Z",
                    end="2026-11-02T10:00:00Z",
                    active_hours=8.0,
                    how_measured="robot_clock",
                )
            )
            return log.close_window("w1", self.owner)

    def sql(
        self, *statements: str, params: tuple[Any, ...] = (), incident_log: bool = False
    ) -> None:
        """Run SQL as someone holding the file: drop the append-only triggers first (those of
        the ledger and record tables; the incident log's too with `incident_log`)."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        keep = "" if incident_log else " AND tbl_name != 'incident_chain'"
        for name in conn.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'trigger'{keep}"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name[0]}")
        for st in statements:
            conn.execute(st, params)
        conn.close()

    def restore_triggers(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        for table, names in ledger.ALL_TRIGGERS.items():
            what = "the trial ledger" if table == ledger.TABLE else f"the {table} table"
            from embodied_eval.store.hashchain import append_only_triggers

            for st in append_only_triggers(table, what, names):  # type: ignore[arg-type]
                conn.execute(st)
        from incident_logging.chain import TRIGGERS_SQL

        for st in TRIGGERS_SQL:
            conn.execute(st)
        conn.close()


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path)


def _problem(lab: Lab) -> tuple[str | None, Any]:
    report = verify_store(lab.path)
    assert not report.ok
    return report.section, report.problem


def test_clean_store_verifies_with_every_row_chained(lab: Lab) -> None:
    report = verify_store(lab.path)
    assert report.ok, report.summary()
    # 1 manifest + 6 episodes in the ledger; 6 episodes, 1 fault, 6 event rows, 6 artifacts.
    assert report.ledger_records == 7
    assert report.counts == {
        "episodes": 6,
        "faults": 1,
        "safety_events": 6,
        "manifests": 1,
        "artifacts": 6,
    }
    with Store(lab.path) as store:
        row = ledger.find(store.conn, "episode", "p0003-real-a1")
        body = store.conn.execute(
            "SELECT record_json FROM episodes WHERE episode_id = 'p0003-real-a1'"
        ).fetchone()[0]
        stored = store.conn.execute(
            f"SELECT body, prev_hash, hash FROM {ledger.TABLE} WHERE seq = ?", (row.seq,)
        ).fetchone()
    assert row is not None
    # The construction by hand: SHA-256(canonical body ‖ previous hash); the body holds the
    # SHA-256 of the stored record JSON and of the MCAP file.
    assert stored[2] == hashlib.sha256((stored[0] + stored[1]).encode()).hexdigest()
    assert row.data["record_sha256"] == hashlib.sha256(body.encode()).hexdigest()
    mcap = (lab.tmp / "ep3.mcap").read_bytes()
    assert row.data["artifacts"][0]["sha256"] == hashlib.sha256(mcap).hexdigest()


def test_triggers_refuse_update_and_delete(lab: Lab) -> None:
    conn = sqlite3.connect(lab.path, isolation_level=None)
    for st in (
        "UPDATE episodes SET record_json = '{}'",
        "DELETE FROM episodes",
        f"UPDATE {ledger.TABLE} SET body = '{{}}'",
        f"DELETE FROM {ledger.TABLE}",
        "DELETE FROM faults",
        "UPDATE manifests SET manifest_json = '[]'",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(st)
    conn.close()


# --------------------------------------------------------------------------- tamper matrix


def test_edit_quality_in_record_json_is_named(lab: Lab) -> None:
    lab.sql(
        "UPDATE episodes SET record_json = json_set(record_json, '$.quality', 0.1) "
        "WHERE episode_id = 'p0003-real-a1'"
    )
    lab.restore_triggers()
    section, problem = _problem(lab)
    assert section == "episodes table"
    assert (problem.seq, problem.record_id, problem.kind) == (3, "p0003-real-a1", "edited")
    with pytest.raises(EvalError, match=r"p0003-real-a1.*edited"):
        require_store_verified(lab.path)


def test_delete_episode_row_or_chain_row_is_named(lab: Lab, tmp_path: Path) -> None:
    lab.sql(
        "DELETE FROM safety_events WHERE episode_id = 'p0005-real-a1'",
        "DELETE FROM episodes WHERE episode_id = 'p0005-real-a1'",
    )
    section, problem = _problem(lab)
    assert (section, problem.record_id, problem.kind) == (
        "episodes table",
        "p0005-real-a1",
        "deleted",
    )
    other = Lab(tmp_path / "b")
    other.sql(f"DELETE FROM {ledger.TABLE} WHERE seq = 3")
    section, problem = _problem(other)
    assert (section, problem.seq, problem.kind) == ("trial ledger", 3, "deleted")


def test_reordered_chain_rows_are_named(lab: Lab) -> None:
    lab.sql(
        f"UPDATE {ledger.TABLE} SET seq = -2 WHERE seq = 2",
        f"UPDATE {ledger.TABLE} SET seq = 2 WHERE seq = 3",
        f"UPDATE {ledger.TABLE} SET seq = 3 WHERE seq = -2",
    )
    section, problem = _problem(lab)
    assert (section, problem.seq, problem.kind) == ("trial ledger", 2, "reordered")


def test_edit_of_the_chain_body_itself_is_named(lab: Lab) -> None:
    lab.sql(
        f"UPDATE {ledger.TABLE} SET body = replace(body, 'p0005-real-a1', 'p0005-real-a9') "
        "WHERE seq = 5"
    )
    section, problem = _problem(lab)
    assert (section, problem.seq, problem.kind) == ("trial ledger", 5, "edited")


def test_dropped_triggers_alone_are_reported(lab: Lab) -> None:
    lab.sql()  # drops every trigger, changes nothing
    section, problem = _problem(lab)
    assert section == "triggers" and problem.kind == "triggers"


def test_replaced_or_missing_mcap_is_named(lab: Lab) -> None:
    (lab.tmp / "ep2.mcap").write_bytes(b"another recording")
    section, problem = _problem(lab)
    assert (section, problem.record_id, problem.kind) == (
        "artifacts",
        "p0002-real-a1",
        "artifact changed",
    )
    (lab.tmp / "ep2.mcap").unlink()
    section, problem = _problem(lab)
    assert (section, problem.record_id, problem.kind) == (
        "artifacts",
        "p0002-real-a1",
        "artifact missing",
    )


def test_edited_fault_and_manifest_are_named(lab: Lab) -> None:
    lab.sql("UPDATE faults SET fault_json = replace(fault_json, 'true', 'false')")
    section, problem = _problem(lab)
    assert (section, problem.record_id) == ("faults table", "p0002-real-a1")


def test_truncating_the_tail_after_a_seal_is_detected(lab: Lab, tmp_path: Path) -> None:
    seal = lab.seal()
    assert verify_store(lab.path).ok
    with Store(lab.path) as store:  # appending after the seal is visible, not a problem
        store.write_episode(_episode(7))
    assert verify_store(lab.path).ok
    # Remove the last 2 ledger rows: the new episode and the seal.
    lab.sql(f"DELETE FROM {ledger.TABLE} WHERE seq >= ?", params=(seal["seal"]["seq"],))
    lab.sql(
        "DELETE FROM safety_events WHERE episode_id = 'p0007-real-a1'",
        "DELETE FROM episodes WHERE episode_id = 'p0007-real-a1'",
    )
    lab.restore_triggers()
    section, problem = _problem(lab)
    assert section == "seal" and problem.kind == "truncated" and problem.record_id == "w1"
    # And the incident log's tail (its window close) removed instead.
    other = Lab(tmp_path / "b")
    closed = other.seal()
    other.sql(
        "DELETE FROM incident_chain WHERE seq >= ?", params=(closed["seq"],), incident_log=True
    )
    other.restore_triggers()
    section, problem = _problem(other)
    assert section == "seal" and problem.kind == "truncated"


def test_rewriting_the_whole_chain_consistently_after_a_seal_is_detected(lab: Lab) -> None:
    lab.seal()
    conn = sqlite3.connect(lab.path, isolation_level=None)
    for name in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name[0]}")
    rows = conn.execute(f"SELECT seq, body, signature FROM {ledger.TABLE} ORDER BY seq").fetchall()
    conn.execute(
        "UPDATE episodes SET record_json = json_set(record_json, '$.quality', 0.1) "
        "WHERE episode_id = 'p0003-real-a1'"
    )
    new_body = conn.execute(
        "SELECT record_json FROM episodes WHERE episode_id = 'p0003-real-a1'"
    ).fetchone()[0]
    prev = "0" * 64
    for seq, body, _sig in rows:  # recompute every hash so the chain is consistent again
        env = json.loads(body)
        if env["record_id"] == "p0003-real-a1":
            env["data"]["record_sha256"] = hashlib.sha256(new_body.encode()).hexdigest()
        if env["kind"] == "seal":
            env["data"]["episode_head"]["head_hash"] = prev
        text = json.dumps(env, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = record_hash(text, prev)
        conn.execute(
            f"UPDATE {ledger.TABLE} SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (text, prev, digest, seq),
        )
        prev = digest
    conn.close()
    lab.restore_triggers()
    section, problem = _problem(lab)
    # The seal's signature no longer verifies (its body changed) — or, had the seal been left
    # alone, its head would not be the record before it: either way the seal is named.
    assert section in ("trial ledger", "seal")
    assert problem.record_id == "w1" and problem.kind in ("signature", "seal", "truncated")


def test_certificate_inputs_refuse_a_store_that_does_not_verify(lab: Lab) -> None:
    lab.sql("DELETE FROM safety_events WHERE episode_id = 'p0001-real-a1'")
    code = main(["store", "verify", "--db", str(lab.path)])
    assert code == 1  # a store that does not verify exits 1 (2 is a usage error)
    from embodied_eval.embodiment.loading import load_window
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol

    with pytest.raises(EvalError, match=r"does not verify.*p0001-real-a1"):
        load_window(lab.path, load_protocol(example_protocol_path()), "w1")


# --------------------------------------------------------------------------- imports, audits


def test_imported_episodes_are_chained_with_the_importer_and_file_hash(tmp_path: Path) -> None:
    from embodied_eval.interchange.tables import episodes_to_frame, write_table

    src = tmp_path / "eps.csv"
    write_table(episodes_to_frame([_episode(i) for i in (1, 2, 3)]).drop(columns=["success"]), src)
    db = tmp_path / "s.db"
    assert main(["import", "episodes", str(src), "--db", str(db), "--importer", "ida"]) == 0
    assert main(["import", "episodes", str(src), "--db", str(db), "--importer", "ida"]) == 0
    with Store(db) as store:
        imports = ledger.rows(store.conn, "kind = 'import'")
        episodes = ledger.rows(store.conn, "kind = 'episode'")
    assert len(imports) == 1  # the second import added nothing, so it chained nothing
    assert imports[0].data["importer"] == "ida"
    assert imports[0].data["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert imports[0].data["episodes"] == 3
    assert {e.data["import"] for e in episodes} == {imports[0].record_id}
    assert verify_store(db).ok


def test_audit_changes_the_scored_view_not_the_row(lab: Lab) -> None:
    with Store(lab.path) as store:
        before = store.conn.execute("SELECT record_json FROM episodes ORDER BY 1").fetchall()
    # p0001 has quality 0.9 ≥ q* 0.8: the detector says success; the technician says it failed.
    audit = audit_episode(lab.path, "p0001-real-a1", lab.tech, succeeded=False, note="cube fell")
    assert audit["detector_success"] is True and audit["auditor"] == "tom"
    fix = amend_episode(
        lab.path,
        "p0002-real-a1",
        {"quality": 0.3},
        reason="re-measured",
        author="tom",
        role="technician",
    )
    with Store(lab.path) as store:
        after = store.conn.execute("SELECT record_json FROM episodes ORDER BY 1").fetchall()
        view = store.scored_episodes(window="w1")
    assert before == after
    scored = {e.episode_id: e for e in view.episodes}
    assert scored["p0001-real-a1"].audited_success is False
    assert scored["p0001-real-a1"].quality == 0.9
    assert scored["p0002-real-a1"].quality == 0.3
    assert [u["record_id"] for u in view.used] == [audit["record_id"], fix["record_id"]]
    assert view.used[0]["signer"] is not None and view.used[1]["signer"] is None
    report = verify_store(lab.path)
    assert report.ok, report.summary()
    # Every key that signed in either chain: tom's audit in the trial ledger plus each key's
    # self-signed registration in the incident log.
    assert [
        (
            s["holder"],
            s["role"],
            s["signatures"],
            s["trial_ledger_signatures"],
            s["incident_log_signatures"],
        )
        for s in report.signers
    ] == [("tom", "technician", 2, 1, 1), ("paul", "protocol_owner", 1, 0, 1)]


def test_contradictory_or_unauthorised_audits_are_refused(lab: Lab) -> None:
    with pytest.raises(EvalError, match=r"contradictory audit: quality 0\.9 .*q\* = 0\.8"):
        audit_episode(lab.path, "p0001-real-a1", lab.tech, succeeded=False, quality=0.9)
    with pytest.raises(EvalError, match=r"contradictory audit: quality 0\.5 is below"):
        audit_episode(lab.path, "p0001-real-a1", lab.tech, succeeded=True, quality=0.5)
    with pytest.raises(EvalError, match="technician"):
        audit_episode(lab.path, "p0001-real-a1", lab.owner, succeeded=True)
    with pytest.raises(EvalError, match="cannot be corrected"):
        amend_episode(
            lab.path,
            "p0001-real-a1",
            {"episode_id": "x"},
            reason="r",
            author="a",
            role="technician",
        )


def test_a_revoked_keys_later_signature_fails_verify(lab: Lab) -> None:
    audit_episode(lab.path, "p0001-real-a1", lab.tech, succeeded=False)
    with IncidentStore(lab.path) as log:
        log.revoke_key(log.key_info(lab.tech)["fingerprint"], lab.owner, reason="laptop lost")
        with pytest.raises(EvalError, match="was revoked"):
            log.key_info(lab.tech)
    assert verify_store(lab.path).ok  # the audit signed before the revocation still counts
    # Someone holding the lost key appends an audit after the revocation (bypassing the check).
    with Store(lab.path) as store:
        from embodied_eval.store.core import transaction

        with transaction(store.conn):
            ledger.append(
                store.conn,
                "audit",
                "AUD-late",
                {"episode_id": "p0003-real-a1", "succeeded": True, "role": "technician"},
                subject="p0003-real-a1",
                signing_key=lab.tech,
            )
    section, problem = _problem(lab)
    assert (section, problem.record_id, problem.kind) == ("trial ledger", "AUD-late", "revoked")
    assert "tom, technician" in problem.message
    assert main(["store", "verify", "--db", str(lab.path)]) == 1


def test_a_revoked_keys_review_fails_the_incident_log(lab: Lab) -> None:
    from incident_logging.chain import TABLE
    from incident_logging.verify import verify_chain

    reviewer = generate_key()
    with IncidentStore(lab.path) as log:
        log.register_key(reviewer, "rita", "reviewer")
        log.revoke_key(log.key_info(reviewer)["fingerprint"], reviewer, reason="left the team")
        # A review signed with the revoked key, appended around the store's checks.
        from embodied_eval.store.core import transaction

        with transaction(log.conn):
            log.append_row(
                "review",
                "REV-late",
                {"incident_id": "INC-x", "role": "reviewer"},
                subject="INC-x",
                signing_key=reviewer,
            )
        report = verify_chain(log.conn)
    assert not report.ok and report.problem is not None
    assert (report.problem.record_id, report.problem.kind) == ("REV-late", "revoked")
    assert TABLE == "incident_chain"


@pytest.mark.parametrize("edited", ["plain-1", 'quote"d-2'])
def test_plain_and_quoted_episode_ids_are_checked_alike(tmp_path: Path, edited: str) -> None:
    # Plain episode records are read from their canonical text; an id with an escaped quote is
    # parsed instead. Both must catch an edit of record_json.
    db = tmp_path / "s.db"
    with Store(db) as store:
        for eid in ("plain-1", 'quote"d-2'):
            store.write_episode(make_episode(episode_id=eid, pair_id=eid, window="w1"))
    assert verify_store(db).ok
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER episodes_no_update")
    conn.execute(
        "UPDATE episodes SET record_json = json_set(record_json, '$.quality', 0.1) "
        "WHERE episode_id = ?",
        (edited,),
    )
    conn.close()
    report = verify_store(db)
    assert report.problem is not None
    assert (report.problem.record_id, report.problem.kind) == (edited, "edited")


def test_cli_audits_feed_the_detector_correction(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import stat

    monkeypatch.setenv("TECH_PW", "s3cret")
    key = tmp_path / "tina.pem"
    db = str(lab.path)
    assert (
        main(
            [
                "keys",
                "create",
                "--role",
                "technician",
                "--holder",
                "tina",
                "--out",
                str(key),
                "--passphrase-env",
                "TECH_PW",
                "--db",
                db,
            ]
        )
        == 0
    )
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    audit = ["trial", "audit", "--key", str(key), "--passphrase-env", "TECH_PW", "--db", db]
    # Detector: p0001, p0003, p0005 succeed (q = 0.9 ≥ 0.8), the even ones fail (q = 0.5).
    assert main([*audit, "p0001-real-a1", "--succeeded", "no"]) == 0
    assert main([*audit, "p0002-real-a1", "--succeeded", "no", "--quality", "0.5"]) == 0
    assert main([*audit, "p0003-real-a1", "--succeeded", "yes"]) == 0
    assert main([*audit, "p0004-real-a1", "--succeeded", "no", "--quality", "0.85"]) == 2
    assert "contradictory audit" in capsys.readouterr().err
    assert main(["metrics", "--db", db, "--window", "w1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # By hand: audited true successes {p0003}: detector says success → Se = 1/1; audited true
    # failures {p0001, p0002}: detector says failure on p0002 only → Sp = 1/2; AR = 3/6;
    # Rogan–Gladen (AR + Sp − 1)/(Se + Sp − 1) = (0.5 + 0.5 − 1)/(1 + 0.5 − 1) = 0.
    corr = out["beyond"]["detector_correction"]
    assert corr["audited"] == 3
    assert corr["sensitivity"]["value"] == 1.0 and corr["specificity"]["value"] == 0.5
    assert corr["AR_corrected"]["value"] == 0.0
    assert out["AR"]["value"] == 0.5  # the detector's own AR is unchanged by audits
    assert [u["episode_id"] for u in out["amendments_used"]] == [
        "p0001-real-a1",
        "p0002-real-a1",
        "p0003-real-a1",
    ]
    assert main(["store", "verify", "--db", db]) == 0
    assert (
        "tina (technician): 4 signature(s) (3 in the trial ledger, 1 in the incident log)"
        in capsys.readouterr().out
    )
    fp = json.loads(run_cli(["keys", "list", "--db", db, "--json"], capsys))
    tina = next(k["fingerprint"] for k in fp if k["holder"] == "tina")
    assert (
        main(
            [
                "keys",
                "revoke",
                tina[:12],
                "--key",
                str(key),
                "--passphrase-env",
                "TECH_PW",
                "--reason",
                "left",
                "--db",
                db,
            ]
        )
        == 0
    )
    assert main([*audit, "p0005-real-a1", "--succeeded", "yes"]) == 2
    assert "was revoked" in capsys.readouterr().err


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a CLI command in-process and return what it printed."""
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out
