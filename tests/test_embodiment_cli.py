"""`embodied-eval metrics`: JSON equal to the report's, a readable table, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embodied_eval import plugins
from embodied_eval.certificate.compute import default_seed
from embodied_eval.cli.main import main
from embodied_eval.embodiment import compute_embodiment
from embodied_eval.interchange.tables import read_table, write_table
from embodied_eval.records import ExposureEntry, Incident
from embodied_eval.scoring.verdict import window_verdict
from embodied_eval.store.core import Store
from tests.test_embodiment_data import (
    DATA,
    load_episodes,
    load_exposure,
    load_faults,
    load_incidents,
    load_protocol_fixture,
)

pytestmark = pytest.mark.timeout(90)

PROTOCOL_FILE = str(DATA / "embodiment_protocol.toml")


def fake_incidents(db: object, window: str) -> list[Incident]:
    """Stands in for the incident log's `window_incidents` (registered via INCIDENT_LOG).

    The loader also asks for incidents stored without a window id (""): there are none here."""
    assert window in ("fixture-2026-11", "")
    if window == "":
        return []
    return [*load_incidents("ss_pos"), *EXTRA_INCIDENTS]


def fake_exposure(db: object, window: str) -> list[ExposureEntry]:
    return load_exposure("ss_pos")


EXTRA_INCIDENTS: list[Incident] = []


@pytest.fixture
def store_db(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    with Store(db) as store:
        store.write_episodes(load_episodes("ss_pos"))
        store.write_faults(load_faults("ss_pos"))
    return db


@pytest.fixture
def fake_log(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(
        plugins.INCIDENT_LOG, "window_incidents", "tests.test_embodiment_cli:fake_incidents"
    )
    monkeypatch.setitem(
        plugins.INCIDENT_LOG, "window_exposure", "tests.test_embodiment_cli:fake_exposure"
    )
    EXTRA_INCIDENTS.clear()
    yield
    EXTRA_INCIDENTS.clear()


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["metrics", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_equals_the_report_object(store_db, fake_log, capsys):
    out = run_json(capsys, "--db", str(store_db), "--protocol", PROTOCOL_FILE)
    protocol = load_protocol_fixture()
    # The certificate's seed rule: default_rng(default_seed(base seed, window)).spawn(3)[0] is
    # the embodiment stream (`certificate.compute.compute_results`).
    seed = default_seed(protocol.base_seed, protocol.window_id)
    expected = compute_embodiment(
        load_episodes("ss_pos"),
        load_faults("ss_pos"),
        load_incidents("ss_pos"),
        load_exposure("ss_pos"),
        protocol,
        rng=np.random.default_rng(seed).spawn(3)[0],
    ).to_json()
    assert out.pop("amendments_used") == []  # no chained audit or correction in this store
    assert out.pop("calibration_by_day") is None  # the protocol declares no maintenance audit
    trials = out.pop("trials")  # the certificate's trials section (tests/test_console_manifests.py)
    assert [row["family"] for row in trials["by_family"]] == sorted(
        {e.family for e in load_episodes("ss_pos")}
    )
    verdict = window_verdict(
        expected["gates"], valid=expected["valid"], invalid_reason=expected["invalid_reason"]
    )
    assert out.pop("verdict") == json.loads(json.dumps(verdict.to_json()))
    assert out == json.loads(json.dumps(expected))
    # Spot values by hand (see test_embodiment_report): H = 200 h, SS = 0.875, E = 0.815605.
    assert out["exposure_hours"] == 200.0 and out["exposure_source"] == "exposure_ledger"
    assert out["SS"]["value"] == pytest.approx(0.875)
    assert out["E"]["value"] == pytest.approx(0.815605, abs=1e-6)
    assert set(out["gates"]) == {"AAI-2", "AAI-3", "AAI-4"}


def test_a_critical_incident_shows_an_invalid_window(store_db, fake_log, capsys):
    EXTRA_INCIDENTS.append(
        Incident(incident_id="crit-9", occurred_at="2026-11-06T10:00:00Z", severity="critical")
    )
    out = run_json(capsys, "--db", str(store_db), "--protocol", PROTOCOL_FILE)
    assert out["valid"] is False and "crit-9" in out["invalid_reason"]
    assert {g["verdict"] for g in out["gates"].values()} == {"fail"}
    assert main(["metrics", "--db", str(store_db), "--protocol", PROTOCOL_FILE]) == 0
    assert "WINDOW INVALID" in capsys.readouterr().out


def test_table_output(store_db, fake_log, capsys):
    assert main(["metrics", "--db", str(store_db), "--protocol", PROTOCOL_FILE]) == 0
    text = capsys.readouterr().out
    for needle in ("window valid", "AR", "S2R", "MTBSI", "AAI-2", "AAI-3", "AAI-4", "0 observed"):
        assert needle in text, needle


def test_evidence_file_feeds_the_gates(store_db, fake_log, tmp_path, capsys):
    ev = tmp_path / "ev.json"
    ev.write_text(json.dumps({"maintenance_closure": "pass", "P": {"value": 0.9, "low": 0.8}}))
    out = run_json(
        capsys, "--db", str(store_db), "--protocol", PROTOCOL_FILE, "--evidence", str(ev)
    )
    checks = {c["name"]: c for c in out["gates"]["AAI-2"]["checks"]}
    assert checks[next(n for n in checks if n.startswith("maintenance"))]["verdict"] == "pass"
    p = {c["name"]: c for c in out["gates"]["AAI-3"]["checks"]}["P ≥ 0.7"]
    assert p["verdict"] == "pass" and p["bound"] == 0.8


def test_without_an_incident_log_no_incidents_are_counted_and_it_says_so(
    store_db, monkeypatch, capsys
):
    monkeypatch.setitem(plugins.INCIDENT_LOG, "window_incidents", "no_such_pkg.store:f")
    out = run_json(capsys, "--db", str(store_db), "--protocol", PROTOCOL_FILE)
    assert any("incident log not installed" in n for n in out["notes"])
    assert out["exposure_source"] == "episode_durations"
    assert out["incidents"]["counts"] == {"near_miss": 0, "minor": 0, "major": 0, "critical": 0}


def test_with_the_real_incident_log_on_an_empty_window(store_db, capsys):
    out = run_json(capsys, "--db", str(store_db), "--protocol", PROTOCOL_FILE)
    assert out["valid"] is True
    # No ledger entries: H = 40 real episodes × 0.5 h = 20 h.
    assert out["exposure_hours"] == pytest.approx(20.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--db", "{tmp}/absent.db", "--protocol", PROTOCOL_FILE], "does not exist"),
        (["--db", "{db}", "--protocol", PROTOCOL_FILE, "--window", "other"], "no episodes"),
        (
            ["--db", "{db}", "--protocol", PROTOCOL_FILE, "--evidence", "{tmp}/no.json"],
            "--evidence",
        ),
        (["--db", "{db}", "--protocol", PROTOCOL_FILE, "--policy", "pol:x"], "policy"),
    ],
)
def test_user_errors_exit_2_with_one_line(store_db, tmp_path, capsys, args, message):
    argv = [a.format(tmp=tmp_path, db=store_db) for a in args]
    assert main(["metrics", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_episodes_of_another_protocol_are_refused(tmp_path, capsys):
    frame = read_table(DATA / "embodiment_pairs_ss0.csv")
    frame["protocol_hash"] = "f" * 64
    src = tmp_path / "other.csv"
    write_table(frame, src)
    db = tmp_path / "o.db"
    assert main(["import", "episodes", str(src), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["metrics", "--db", str(db), "--protocol", PROTOCOL_FILE]) == 2
    assert "--protocol" in capsys.readouterr().err


def test_console_script_json(store_db, tmp_path):
    exe = Path(sys.executable).parent / "embodied-eval"
    proc = subprocess.run(
        [str(exe), "metrics", "--db", str(store_db), "--protocol", PROTOCOL_FILE, "--json"],
        capture_output=True,
        text=True,
        timeout=80,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["AR"]["value"] == pytest.approx(0.9)
