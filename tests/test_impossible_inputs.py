"""Impossible inputs that used to be accepted, each with its exact input: one error line naming
what to fix, exit 2, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.protocol.reader import example_protocol_path
from embodied_eval.store.core import Store

DATA = Path(__file__).parent / "data"
HEADER = (
    "episode_id,pair_id,side,family,task_id,seed,policy,engine,quality,target_quality,status,"
    "duration_s,interventions,energy_wh,attempt,started_at,protocol_hash"
)
ROW = "e1,p1,sim,pick_place,pick_place/cube_0,7,pol,mujoco,0.9,0.8,ok,12.5,0,1.0,1,2026-11-02T10:00:00Z"


def refused(args: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def edited_protocol(tmp_path: Path, old: str, new: str) -> Path:
    text = example_protocol_path().read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "p.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        (
            "[drift.day07]\n",
            "[drift.day07]\nlatency_steps = 1.5\n",
            ("drift.day07.latency_steps: 1.5 is not a whole number of steps",),
        ),
        (
            "action_latency_steps = [0, 2]",
            "action_latency_steps = [0.5, 1.5]",
            ("randomization.action_latency_steps: 0.5 is not a whole number of control steps",),
        ),
        (
            "[drift.day07]\n",
            "[drift.day07]\ncontrol_rate_hz = 0\n",
            ("drift.day07.control_rate_hz", "below the minimum 0.001"),
        ),
        (
            "action_latency_steps = [0, 2]",
            "action_latency_steps = [0, 2]\ncontrol_rate_hz = [0, 50]",
            ("randomization.control_rate_hz: low 0 is below the minimum 0.001",),
        ),
    ],
)
def test_impossible_timing_in_a_protocol(tmp_path: Path, capsys, old, new, needles):
    refused(["protocol", "check", edited_protocol(tmp_path, old, new)], capsys, *needles)


def test_whole_latencies_are_still_accepted(tmp_path: Path, capsys):
    path = edited_protocol(tmp_path, "[drift.day07]\n", "[drift.day07]\nlatency_steps = 2\n")
    assert main(["protocol", "check", str(path)]) == 0


def test_an_episode_row_with_a_protocol_hash_that_is_not_one(tmp_path: Path, capsys):
    csv = tmp_path / "e.csv"
    csv.write_text(f"{HEADER}\n{ROW},not-a-hash\n", encoding="utf-8")
    db = tmp_path / "s.db"
    refused(
        ["import", "episodes", csv, "--db", db],
        capsys,
        "row 2",
        "column 'protocol_hash': 'not-a-hash' is not a protocol hash (64 lowercase hex digits",
    )
    assert not db.exists()
    # A real hash (and an empty cell) import.
    csv.write_text(f"{HEADER}\n{ROW},{'ab' * 32}\n{ROW.replace('e1,p1', 'e2,p2')},\n")
    assert main(["import", "episodes", str(csv), "--db", str(db)]) == 0
    with Store(db) as store:
        assert sorted(e.protocol_hash for e in store.episodes()) == ["", "ab" * 32]


def evidence_file(tmp_path: Path, **sections: object) -> Path:
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps({"axes": {"A": {"value": 0.8}}, **sections}), encoding="utf-8")
    return path


def test_an_evidence_delivery_date_that_is_not_a_date(tmp_path: Path, capsys):
    delivery = {"verdict": "pass", "auditor": "J. Rivera", "date": "someday"}
    path = evidence_file(tmp_path, attestations={"delivery": delivery})
    refused(
        ["score", path],
        capsys,
        "attestations.delivery.date: 'someday' is not a date; give it as 2026-11-30",
    )
    delivery["date"] = "2026-11-20"
    assert main(["score", str(evidence_file(tmp_path, attestations={"delivery": delivery}))]) == 0


def test_an_unknown_chc_domain_in_evidence(tmp_path: Path, capsys):
    core = {"Gc": 0.8, "Grw": 0.7, "Gf": 0.6, "Gwm": 0.7, "Gls": 0.6, "Glr": 0.5, "Gq": 0.9}
    refused(
        ["score", evidence_file(tmp_path, chc={"core": core})],
        capsys,
        "chc.core.Gq: unknown CHC domain (known: Gc, Grw, Gf, Gwm, Gls, Glr)",
    )
    del core["Gq"]
    assert main(["score", str(evidence_file(tmp_path, chc={"core": core}))]) == 0


@pytest.mark.parametrize("command", ["metrics", "compare", "export"])
def test_an_empty_window_id(tmp_path: Path, capsys, command):
    db = tmp_path / "s.db"
    argv = {
        "metrics": ["metrics", "--db", db, "--window", ""],
        "compare": ["compare", "--db", db, "--a", "x", "--b", "y", "--window", " "],
        "export": ["export", "episodes", "--out", tmp_path / "o.csv", "--db", db, "--window", ""],
    }[command]
    refused(argv, capsys, "--window: the window id must not be empty")


def test_plan_success_with_a_threshold_of_one(capsys):
    refused(
        ["plan", "success", "--threshold", "1", "--successes", "3", "--trials", "3"],
        capsys,
        "--threshold 1: a success rate of 1 can never be demonstrated",
    )
    assert (
        main(["plan", "success", "--threshold", "0.99", "--successes", "3", "--trials", "3"]) == 0
    )
