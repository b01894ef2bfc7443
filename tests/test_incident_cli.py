"""`embodied-eval incidents ...` and `keys ...`: flows, JSON numbers and one-line errors (exit 2)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from incident_logging.chain import TABLE

pytestmark = pytest.mark.timeout(120)


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def ok(capsys, *args: str) -> str:
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    return out


def fails(capsys, *args: str) -> str:
    """Run a command that must fail with exit 2 and exactly one line `error: ...`."""
    rc, _, err = run(capsys, *args)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def env(tmp_path: Path, capsys):
    db = str(tmp_path / "s.db")
    for holder, role in (
        ("rita", "reviewer"),
        ("sam", "safety_officer"),
        ("paul", "protocol_owner"),
    ):
        ok(capsys, "keys", "create", "--role", role, "--holder", holder,
           "--out", str(tmp_path / f"{holder}.pem"), "--db", db)  # fmt: skip
    escrow_window_manifest(db, "w1", "2026-11-01", "2026-11-30")
    return tmp_path, db


def escrow_window_manifest(db: str | Path, window: str, first: str, last: str) -> None:
    """A run manifest of `window` escrowed in the store: what tells `exposure add` (without
    --protocol) the window's dates."""
    from embodied_eval.canonical import canonical_hash
    from embodied_eval.store.core import Store

    manifest = {"window": window, "window_start": first, "window_end": last, "episodes": []}
    with Store(Path(db)) as store:
        store.write_manifest(canonical_hash(manifest), "0" * 64, window, manifest)


def report(capsys, db: str, *extra: str) -> str:
    out = ok(
        capsys, "incidents", "report", "--window", "w1", "--reporter", "amy",
        "--occurred", "2026-11-02T10:00:00Z", "--db", db, "--json", *extra,
    )  # fmt: skip
    return json.loads(out)["incident_id"]


def test_rates_json_by_hand(env, capsys):
    _, db = env
    # 2 near-misses + 1 minor in 50 h → ν_nm = 4, ν_min = 2, SS = 1 − min(1, 0.25·4 + 2) = 0.
    report(capsys, db, "--event-type", "protective_stop", "--stop-category", "1")
    report(capsys, db, "--event-type", "separation", "--separation", "0.3",
           "--protective-separation", "0.5")  # fmt: skip
    report(capsys, db, "--event-type", "contact", "--force", "50", "--body-region", "chest")
    ok(capsys, "incidents", "exposure", "add", "--window", "w1",
       "--start", "2026-11-01T00:00:00Z", "--end", "2026-11-04T00:00:00Z", "--hours", "50",
       "--how-measured", "robot_clock", "--db", db)  # fmt: skip
    ok(capsys, "incidents", "exposure", "add", "--window", "w1", "--blind",
       "--start", "2026-11-04T00:00:00Z", "--end", "2026-11-05T00:00:00Z", "--hours", "7",
       "--how-measured", "robot_clock", "--db", db)  # fmt: skip
    summary = json.loads(ok(capsys, "incidents", "rates", "--window", "w1", "--json", "--db", db))
    assert summary["counts"] == {"near_miss": 2, "minor": 1, "major": 0, "critical": 0}
    assert summary["exposure_hours"] == 50.0 and summary["exposure"]["blind_hours"] == 7.0
    assert summary["rates_per_100h"]["near_miss"]["value"] == pytest.approx(4.0)
    assert summary["rates_per_100h"]["minor"]["value"] == pytest.approx(2.0)
    assert summary["SS"]["value"] == 0.0
    # 0 majors in 50 h: one-sided 95 % upper bound −ln(0.05)/50·100 = 2.9957·2 = 5.9915 per 100 h.
    assert summary["upper_bounds_per_100h"]["major"]["high"] == pytest.approx(5.9915, abs=1e-4)
    assert summary["upper_bounds_per_100h"]["major"]["note"].startswith("0 observed")
    assert summary["MTBSI_h"]["value"] == pytest.approx(50 / 3)
    assert summary["valid"] is True and summary["invalid_reason"] is None
    assert summary["validity"] == {
        "reason": "no major or critical incidents",
        "major_fail": False,
        "majors_allowed": False,
    }
    assert summary["integrity"]["verified"] is True
    table = ok(capsys, "incidents", "rates", "--window", "w1", "--db", db)
    assert "0 observed" in table and "SS = 0" in table


def test_review_workflow_and_close_through_the_cli(env, capsys):
    tmp, db = env
    iid = report(capsys, db, "--event-type", "injury", "--injury-level", "days_away")
    shown = json.loads(ok(capsys, "incidents", "show", iid, "--json", "--db", db))
    assert shown["severity"] == "major" and not shown["reviewed"]
    listed = ok(capsys, "incidents", "list", "--unreviewed", "--db", db)
    assert iid in listed and "NOT" in listed
    unreviewed = json.loads(ok(capsys, "incidents", "list", "--unreviewed", "--json", "--db", db))
    assert [i["incident_id"] for i in unreviewed] == [iid]
    line = fails(capsys, "incidents", "review", iid, "--severity", "major", "--decision",
                 "final", "--key", str(tmp / "sam.pem"), "--db", db)  # fmt: skip
    assert "two distinct signers" in line
    ok(capsys, "incidents", "review", iid, "--severity", "major", "--key", str(tmp / "rita.pem"),
       "--db", db)  # fmt: skip
    ok(capsys, "incidents", "review", iid, "--severity", "major", "--decision", "final",
       "--key", str(tmp / "sam.pem"), "--db", db)  # fmt: skip
    line = fails(capsys, "incidents", "close-window", "w1", "--key", str(tmp / "sam.pem"),
                 "--db", db)  # fmt: skip
    assert "only the protocol_owner" in line
    ok(capsys, "incidents", "exposure", "add", "--window", "w1", "--start",
       "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z", "--hours", "20",
       "--how-measured", "robot_clock", "--db", db)  # fmt: skip
    closed = json.loads(ok(capsys, "incidents", "close-window", "w1", "--key",
                           str(tmp / "paul.pem"), "--db", db, "--json"))  # fmt: skip
    assert closed["exposure_h"] == 20.0 and closed["owner"] == "paul"
    summary = json.loads(ok(capsys, "incidents", "rates", "--window", "w1", "--json", "--db", db))
    assert summary["validity"]["major_fail"] is True
    assert summary["window_close"]["head_hash"] == closed["head_hash"]
    assert json.loads(ok(capsys, "incidents", "verify", "--json", "--db", db))["ok"] is True


def test_amend_escalates_and_show_lists_history(env, capsys):
    _, db = env
    # 100 N unintended on the chest: within its 140 N limit → minor.
    iid = report(capsys, db, "--event-type", "contact", "--force", "100", "--body-region",
                 "chest")  # fmt: skip
    out = ok(capsys, "incidents", "amend", iid, "--set", "damage_cost=2500", "--reason",
             "repair quote", "--author", "amy", "--db", db)  # fmt: skip
    assert "escalated automatically minor → major" in out
    shown = json.loads(ok(capsys, "incidents", "show", iid, "--json", "--db", db))
    assert shown["original"]["damage_cost"] is None and shown["incident"]["damage_cost"] == 2500
    assert shown["severity"] == "major"
    assert "repair quote" in ok(capsys, "incidents", "show", iid, "--db", db)


def test_user_errors_exit_2_with_one_line(env, capsys):
    tmp, db = env
    iid = report(capsys, db, "--event-type", "contact", "--force", "150", "--body-region", "chest")
    assert "--reporter is required" in fails(
        capsys, "incidents", "report", "--window", "w1", "--event-type", "contact", "--db", db
    )
    assert "'gigantic' is not one of" in fails(
        capsys, "incidents", "report", "--window", "w1", "--event-type", "contact",
        "--reporter", "amy", "--severity", "gigantic", "--db", db,
    )  # fmt: skip
    assert "body_region" in fails(
        capsys, "incidents", "report", "--window", "w1", "--event-type", "contact",
        "--reporter", "amy", "--force", "10", "--body-region", "elbow", "--db", db,
    )  # fmt: skip
    assert "needs a written rationale" in fails(
        capsys, "incidents", "review", iid, "--severity", "near_miss",
        "--key", str(tmp / "rita.pem"), "--db", db,
    )  # fmt: skip
    assert "does not exist" in fails(
        capsys, "incidents", "review", iid, "--severity", "minor",
        "--key", str(tmp / "nobody.pem"), "--db", db,
    )  # fmt: skip
    assert "no incident" in fails(capsys, "incidents", "show", "INC-nope", "--db", db)
    assert "cannot be amended" in fails(
        capsys, "incidents", "amend", iid, "--set", "provisional_severity=near_miss",
        "--reason", "x", "--author", "amy", "--db", db,
    )  # fmt: skip
    assert "already exists" in fails(
        capsys, "keys", "create", "--role", "reviewer", "--holder", "x",
        "--out", str(tmp / "rita.pem"), "--db", db,
    )  # fmt: skip
    assert "does not exist" in fails(capsys, "incidents", "list", "--db", str(tmp / "missing.db"))


def test_verify_exits_1_naming_the_record_and_rates_refuse(env, capsys):
    _, db = env
    iid = report(capsys, db, "--event-type", "contact", "--force", "150", "--body-region", "chest")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER incident_chain_no_update")
    seq = conn.execute(f"SELECT seq FROM {TABLE} WHERE record_id = ?", (iid,)).fetchone()[0]
    conn.execute(f"UPDATE {TABLE} SET body = replace(body, '150.0', '15.0') WHERE seq = ?", (seq,))
    conn.close()
    rc, _, err = run(capsys, "incidents", "verify", "--db", db)
    assert rc == 1 and f"record seq {seq} ({iid})" in err and "edited" in err
    assert "does not verify" in fails(capsys, "incidents", "rates", "--window", "w1", "--db", db)


def test_export_import_through_both_clis(env, capsys):
    tmp, db = env
    report(capsys, db, "--event-type", "protective_stop")
    out = tmp / "inc.csv"
    ok(capsys, "incidents", "export", "--out", str(out), "--db", db)
    other = str(tmp / "other.db")
    assert "imported 1 incident(s)" in ok(capsys, "import", "incidents", str(out), "--db", other)
    assert "imported 0 new" in ok(capsys, "incidents", "import", str(out), "--db", other)
    assert "export" in ok(
        capsys, "export", "incidents", "--out", str(tmp / "x.jsonl"), "--db", other
    )


def test_interactive_report_prompts_for_the_details(env, capsys, monkeypatch):
    import io

    _, db = env
    answers = "\n".join(
        [
            "contact",  # event type
            "amy",  # reporter
            "arm touched the hand",  # what happened
            "",  # task before
            "",  # harm cause
            "stopped the cell",  # immediate action
            "hand",  # body region
            "300",  # force, N
            "transient",  # contact type
            "y",  # permitted?
            "none",  # injury level
        ]
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(answers + "\n"))
    out = ok(capsys, "incidents", "report", "-i", "--window", "w1", "--db", db, "--json")
    record = json.loads(out[out.index("{") :])
    # Hands: 140 N quasi-static, transient 280 N; 300 N is 20 N above → a standards breach →
    # critical.
    assert record["provisional_severity"] == "critical"
    assert record["measurements"]["contact_force_n"] == 300.0
    (rule,) = [r for r in record["rules_fired"] if r["rule"] == "R7.force_over_limit"]
    assert rule["limit"] == 280.0 and rule["margin"] == pytest.approx(20.0)
    assert record["immediate_action"] == "stopped the cell"


def test_keys_create_defaults_holder_to_login_name(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("USER", "lab-tech-7")
    monkeypatch.setenv("LOGNAME", "lab-tech-7")
    db = str(tmp_path / "k.db")
    ok(capsys, "keys", "create", "--role", "technician", "--out", str(tmp_path / "t.pem"),
       "--db", db)  # fmt: skip
    (key,) = json.loads(ok(capsys, "keys", "list", "--json", "--db", db))
    assert (key["holder"], key["role"]) == ("lab-tech-7", "technician")
    assert (tmp_path / "t.pem").stat().st_mode & 0o777 == 0o600


def test_physically_impossible_measurements_are_refused(env, capsys):
    _, db = env
    before = sqlite3.connect(db).execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()
    line = fails(
        capsys, "incidents", "report", "--window", "w1", "--event-type", "contact",
        "--reporter", "amy", "--force", "1e23", "--body-region", "hands", "--db", db,
    )  # fmt: skip
    assert "contact_force_n" in line and "above the maximum 1000000.0" in line
    assert "tcp_speed_mps" in fails(
        capsys, "incidents", "report", "--window", "w1", "--event-type", "tcp_speed",
        "--reporter", "amy", "--tcp-speed", "340", "--speed-limit", "0.25", "--db", db,
    )  # fmt: skip
    assert sqlite3.connect(db).execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone() == before
