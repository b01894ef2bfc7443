"""Regression tests, each with the exact input that showed the problem: severities through the
commands, the review workflow on a measured breach, `amend --key` without `--role`, `store
verify` (one message, exit 1, every signer), unverified reads, and impossible inputs."""

from __future__ import annotations

import json
import sqlite3
import tomllib
from pathlib import Path

import pytest

from embodied_eval.api import open_store
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import (
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)
from embodied_eval.records import Fault, SafetyEvent
from embodied_eval.store.core import Store
from incident_logging.ingest import ingest_safety_events
from incident_logging.store import IncidentStore
from tests.conftest import make_episode
from tests.test_incident_cli import fails, ok, run
from tests.test_ledger import Lab

pytestmark = pytest.mark.timeout(120)

PROTOCOL = str(example_protocol_path())  # window demo-2026-11: 2026-11-01 to 2026-11-30


@pytest.fixture
def env(tmp_path: Path, capsys):
    db = str(tmp_path / "s.db")
    for holder, role in (
        ("tom", "technician"),
        ("rita", "reviewer"),
        ("sam", "safety_officer"),
    ):
        ok(capsys, "keys", "create", "--role", role, "--holder", holder,
           "--out", str(tmp_path / f"{holder}.pem"), "--db", db)  # fmt: skip
    return tmp_path, db


def forehead_strike(capsys, db: str) -> str:
    """The hand report: a 400 N strike on a person's forehead, first aid, no breach box ticked."""
    out = ok(
        capsys, "incidents", "report", "--window", "w1", "--reporter", "amy",
        "--occurred", "2026-11-02T10:00:00Z", "--event-type", "contact", "--force", "400",
        "--body-region", "skull/forehead", "--contact-with", "person",
        "--injury-level", "first_aid", "--db", db, "--json",
    )  # fmt: skip
    return json.loads(out)["incident_id"]


def test_400_n_forehead_strike_is_critical_and_show_states_the_measured_value(env, capsys):
    _, db = env
    iid = forehead_strike(capsys, db)
    shown = json.loads(ok(capsys, "incidents", "show", iid, "--json", "--db", db))
    assert shown["severity"] == "critical" and not shown["reviewed"]
    decided = shown["decided_by"]
    assert (decided["rule"], decided["measured"], decided["limit"], decided["margin"]) == (
        "R7.force_over_limit",
        400.0,
        130.0,
        270.0,  # 400 − 130 N
    )
    text = ok(capsys, "incidents", "show", iid, "--db", db)
    assert (
        "critical decided by R7.force_over_limit: measured 400 N, limit 130 N, margin +270 N"
        in text
    )


def test_a_measured_breach_is_downgraded_only_by_signed_reviews_with_a_rationale(env, capsys):
    tmp, db = env
    iid = forehead_strike(capsys, db)
    key = {h: str(tmp / f"{h}.pem") for h in ("tom", "rita", "sam")}
    assert "only a reviewer or safety_officer" in fails(
        capsys, "incidents", "review", iid, "--severity", "minor", "--key", key["tom"], "--db", db
    )
    assert "needs a written rationale" in fails(
        capsys, "incidents", "review", iid, "--severity", "minor", "--key", key["rita"], "--db", db
    )
    assert "needs a written rationale" in fails(
        capsys, "incidents", "review", iid, "--severity", "minor", "--decision", "final",
        "--key", key["sam"], "--db", db,
    )  # fmt: skip
    # A reviewer's proposal changes nothing; the safety officer's signed final does.
    ok(capsys, "incidents", "review", iid, "--severity", "minor", "--key", key["rita"],
       "--rationale", "load cell mis-zeroed; video shows a graze", "--db", db)  # fmt: skip
    assert json.loads(ok(capsys, "incidents", "show", iid, "--json", "--db", db))["severity"] == (
        "critical"
    )
    ok(capsys, "incidents", "review", iid, "--severity", "minor", "--decision", "final",
       "--key", key["sam"], "--rationale", "agree: sensor fault", "--db", db)  # fmt: skip
    shown = json.loads(ok(capsys, "incidents", "show", iid, "--json", "--db", db))
    assert (shown["severity"], shown["provisional_severity"], shown["reviewed"]) == (
        "minor",
        "critical",
        True,
    )
    assert [r["signer"] for r in shown["reviews"]] and all(r["signer"] for r in shown["reviews"])
    assert "sam (safety_officer, signed)" in ok(capsys, "incidents", "show", iid, "--db", db)


def test_amend_with_a_key_takes_the_role_registered_for_it(env, capsys):
    tmp, db = env
    iid = forehead_strike(capsys, db)
    # Only a safety officer, signing, changes whether an incident counts: no --role needed.
    out = ok(
        capsys, "incidents", "amend", iid, "--set", "counts_toward_window=false",
        "--reason", "happened during maintenance, robot not under test",
        "--key", str(tmp / "sam.pem"), "--db", db, "--json",
    )  # fmt: skip
    payload = json.loads(out)
    assert (payload["author"], payload["role"]) == ("sam", "safety_officer")
    line = fails(
        capsys, "incidents", "amend", iid, "--set", "what_happened=struck forehead",
        "--reason", "narrative", "--key", str(tmp / "sam.pem"), "--role", "technician",
        "--db", db,
    )  # fmt: skip
    assert "registered as 'safety_officer'" in line
    # Without a key the role stays technician by default.
    out = ok(
        capsys, "incidents", "amend", iid, "--set", "what_happened=struck forehead",
        "--reason", "narrative", "--author", "amy", "--db", db, "--json",
    )  # fmt: skip
    assert json.loads(out)["role"] == "technician"


def test_store_verify_lists_every_signer_and_fails_with_one_message_exit_1(env, capsys):
    tmp, db = env
    iid = forehead_strike(capsys, db)
    ok(capsys, "incidents", "review", iid, "--severity", "critical", "--key",
       str(tmp / "rita.pem"), "--db", db)  # fmt: skip
    ok(capsys, "incidents", "review", iid, "--severity", "critical", "--decision", "final",
       "--key", str(tmp / "sam.pem"), "--db", db)  # fmt: skip
    # Five signatures in the incident log: three key registrations and two reviews.
    verified = json.loads(ok(capsys, "incidents", "verify", "--json", "--db", db))
    assert verified["signatures_checked"] == 5
    rc, out, err = run(capsys, "store", "verify", "--db", db)
    assert rc == 0, err
    assert "tom (technician): 1 signature(s) (1 in the incident log)" in out
    assert "rita (reviewer): 2 signature(s) (2 in the incident log)" in out
    assert "sam (safety_officer): 2 signature(s) (2 in the incident log)" in out
    report = json.loads(ok(capsys, "store", "verify", "--json", "--db", db))
    assert sum(s["signatures"] for s in report["signers"]) == 5
    # Someone holding the file edits the incident's bytes.
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER incident_chain_no_update")
    conn.execute("UPDATE incident_chain SET body = replace(body, '400.0', '40.0') WHERE seq = 4")
    conn.close()
    rc, out, err = run(capsys, "store", "verify", "--db", db)
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("FAILED: store does not verify — incident log")
    assert "does not verify" not in out  # the failure is said once, on stderr
    rc, out, err = run(capsys, "store", "verify", "--json", "--db", db)
    assert rc == 1 and json.loads(out)["ok"] is False
    # A usage error (no store there) is exit 2, like every command's.
    assert "does not exist" in fails(capsys, "store", "verify", "--db", str(tmp / "none.db"))


def test_store_amend_field_error_names_no_internal_field(tmp_path: Path, capsys):
    lab = Lab(tmp_path)
    line = fails(
        capsys, "store", "amend", "p0001-real-a1", "--set", "colour=red", "--reason", "x",
        "--author", "tom", "--db", str(lab.path),
    )  # fmt: skip
    assert "cannot be corrected" in line and "_nested" not in line and "quality" in line


def test_notebook_reads_refuse_a_store_that_does_not_verify(tmp_path: Path):
    lab = Lab(tmp_path)
    store = open_store(lab.path)
    assert len(store.episodes()) == 6 and len(store.faults()) == 1
    lab.sql("DELETE FROM safety_events WHERE episode_id = 'p0001-real-a1'")
    with pytest.raises(EvalError, match=r"does not verify.*p0001-real-a1.*unverified=True"):
        store.episodes()
    with pytest.raises(EvalError, match="does not verify"):
        store.faults()
    assert len(store.episodes(unverified=True)) == 6
    assert len(store.faults(unverified=True)) == 1


# --------------------------------------------------------------------------- impossible inputs


def test_autonomous_recovery_longer_than_its_episode_is_refused(tmp_path: Path):
    slow = Fault(kind="grasp_slip", recovered_autonomously=True, repair_s=900.0)
    with Store(tmp_path / "s.db") as store:
        with pytest.raises(EvalError, match=r"recovered autonomously.*900 s.*episode \(60 s\)"):
            store.write_episode(make_episode(duration_s=60.0, faults=(slow,)))
        assert store.episode_count() == 0
        # Within the episode it is a recovery time; by an operator it is a repair.
        store.write_episode(
            make_episode(
                duration_s=60.0,
                faults=(
                    Fault(kind="grasp_slip", recovered_autonomously=True, repair_s=60.0),
                    Fault(kind="actuator_stall", recovered_autonomously=False, repair_s=900.0),
                ),
            )
        )
        store.write_episode(make_episode(episode_id="p0002-real-a1", pair_id="p0002"))
        with pytest.raises(EvalError, match="recovered autonomously"):
            store.write_faults([slow.replace(episode_id="p0002-real-a1")])  # 12.5 s episode


def test_all_incident_weights_zero_is_refused():
    data = tomllib.loads(example_protocol_path().read_text())
    data["incidents"]["weights"] = {"near_miss": 0, "minor": 0, "major": 0, "critical": 0}
    with pytest.raises(EvalError, match=r"incidents\.weights: every weight is 0"):
        protocol_from_mapping(data)
    data["incidents"]["weights"] = {"near_miss": 0, "minor": 0, "major": 0, "critical": 1}
    assert protocol_from_mapping(data).severity_weights["critical"] == 1.0


def test_exposure_outside_the_window_is_refused_with_its_dates(env, capsys):
    _, db = env
    line = fails(
        capsys, "incidents", "exposure", "add", "--protocol", PROTOCOL,
        "--start", "2026-12-01T00:00:00Z", "--end", "2026-12-01T08:00:00Z", "--hours", "8",
        "--how-measured", "robot_clock", "--db", db,
    )  # fmt: skip
    assert "outside window 'demo-2026-11' (2026-11-01 to 2026-11-30)" in line
    assert "--window 'w9' is not the protocol's window" in fails(
        capsys, "incidents", "exposure", "add", "--protocol", PROTOCOL, "--window", "w9",
        "--start", "2026-11-30T16:00:00Z", "--end", "2026-12-01T00:00:00Z", "--hours", "8",
        "--how-measured", "robot_clock", "--db", db,
    )  # fmt: skip
    # The last day of the window is inside it (both days included).
    out = ok(
        capsys, "incidents", "exposure", "add", "--protocol", PROTOCOL,
        "--start", "2026-11-30T16:00:00Z", "--end", "2026-12-01T00:00:00Z", "--hours", "8",
        "--how-measured", "robot_clock", "--db", db,
    )  # fmt: skip
    assert "8 h in demo-2026-11" in out


def test_incident_outside_the_protocol_window_is_refused(env, capsys):
    _, db = env
    line = fails(
        capsys, "incidents", "report", "--protocol", PROTOCOL, "--reporter", "amy",
        "--event-type", "protective_stop", "--occurred", "2026-10-31T23:59:00Z", "--db", db,
    )  # fmt: skip
    assert "outside window 'demo-2026-11' (2026-11-01 to 2026-11-30)" in line


def test_ingested_real_force_stop_is_a_force_margin_near_miss(tmp_path: Path):
    db = tmp_path / "store.db"
    proto = load_protocol(example_protocol_path())
    real = make_episode(window=proto.window_id, started_at="2026-11-02T10:00:00Z")
    stop = SafetyEvent(
        kind="protective_stop",
        t_s=2.0,
        stop_category=2,
        contact_force_n=1353.0,
        contact_with="environment",  # as the twin's force monitor declares it
        detail="contact force 1353.0 N above the 150.0 N limit",
        source_rule="twin.force_limit",
    )
    with Store(db) as core:
        core.write_episode(real, [stop.to_dict()])
    assert ingest_safety_events(db, proto) == 1
    with IncidentStore(db) as log:
        (state,) = log.states()
    rec = state.current
    assert rec.provisional_severity == "near_miss" and rec.top_rule == "R1.stop,R2.force_margin"
    rules = {r["rule"]: r for r in rec.rules_fired}
    assert "no contact" not in rules["R1.stop"]["basis"]
    assert (rules["R2.force_margin"]["measured"], rules["R2.force_margin"]["limit"]) == (
        1353.0,
        150.0,
    )
    assert rules["R2.force_margin"]["margin"] == 1203.0
