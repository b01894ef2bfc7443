"""Technician entry of real episodes: parsers, flags, scripted prompt sessions, ManualBackend."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest, write_manifest_file
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.store.core import Store
from real_bridge import entry
from real_bridge.manual import ManualBackend


@pytest.fixture(scope="module")
def protocol():
    return load_protocol(example_protocol_path())


@pytest.fixture
def setup(tmp_path, protocol):
    manifest = plan_manifest(protocol)
    path = write_manifest_file(manifest, tmp_path)
    return {"db": tmp_path / "t.db", "manifest": path, "real": manifest.side("real")}


def record(setup, *extra):
    return main(
        ["trial", "record", "--db", str(setup["db"]), "--manifest", str(setup["manifest"]), *extra]
    )


def stored(setup):
    with Store(setup["db"]) as store:
        return store.episodes(), store.safety_events()


# --------------------------------------------------------------------------- parsers


def test_parsers_by_hand():
    assert entry.parse_duration("2m30s") == 150.0  # 2·60 + 30
    assert entry.parse_duration("1.5min") == 90.0  # 1.5·60
    assert entry.parse_duration("95") == 95.0  # bare number: seconds
    assert entry.parse_duration("1h") == 3600.0
    assert entry.parse_quality("85%") == 0.85
    fault = entry.parse_fault("actuator_stall:no:12.5:cable caught")
    assert fault.repair_s == 750.0  # 12.5 min · 60
    assert not fault.recovered_autonomously and fault.detail == "cable caught"
    event = entry.parse_incident("contact,contact_force_n=60,body_region=hands,permitted=no")
    assert event.kind == "contact" and event.contact_force_n == 60.0 and event.permitted is False
    for parse, bad in (
        (entry.parse_duration, "soon"),
        (entry.parse_duration, "0s"),
        (entry.parse_quality, "1.3"),
        (entry.parse_quality, "nan"),
        (entry.parse_status, "fine"),
        (entry.parse_count, "-1"),
        (entry.parse_count, "2.5"),
        (entry.parse_fault, "grasp_slip"),
        (entry.parse_incident, "collision,contact_force_n=3"),
        (entry.parse_incident, "contact,force=3"),
        (entry.parse_incident, "contact,contact_force_n=-3"),
    ):
        with pytest.raises(EvalError):
            parse(bad)


# --------------------------------------------------------------------------- by flags


def test_flags_enter_the_next_real_episode_with_faults_and_incident(setup, capsys):
    rc = record(
        setup,
        "--protocol", str(example_protocol_path()),
        "--technician", "Ana",
        "--status", "ok",
        "--quality", "0.9",
        "--succeeded", "yes",
        "--duration", "2m30s",
        "--started-at", "2026-11-03T09:00:00Z",
        "--interventions", "1",
        "--fault", "grasp_slip:yes:0",
        "--fault", "actuator_stall:no:12.5:cable",
        "--incident", "contact,t_s=30,contact_force_n=60,body_region=hands,contact_with=person,detail=brushed",
        "--notes", "fine",
    )  # fmt: skip
    assert rc == 0, capsys.readouterr()
    episodes, events = stored(setup)
    assert len(episodes) == 1
    ep = episodes[0]
    first = setup["real"][0]  # nothing recorded yet: the first real row in run order
    assert ep.episode_id == first.episode_id and ep.seed == first.seed
    assert ep.side == "real" and ep.engine == first.engine and ep.control["entry"] == "manual"
    assert ep.duration_s == 150.0
    assert ep.quality == 0.9 and ep.success  # 0.9 ≥ q* 0.8 and status ok
    assert ep.audited_success is True and ep.interventions == 1
    assert [(f.kind, f.recovered_autonomously, f.repair_s) for f in ep.faults] == [
        ("grasp_slip", True, 0.0),
        ("actuator_stall", False, 750.0),
    ]
    assert len(events) == 1
    assert events[0]["kind"] == "contact" and events[0]["contact_force_n"] == 60.0
    assert events[0]["t_s"] == 30.0 and events[0]["episode_id"] == ep.episode_id
    assert events[0]["source_rule"] == "manual:Ana"

    # The next call, without --episode-id, enters the next real row.
    rc = record(
        setup, "--technician", "Ana", "--status", "aborted", "--quality", "0", "--succeeded",
        "no", "--duration", "20s", "--interventions", "0", "--no-faults", "--no-incidents",
        "--notes", "gripper cable loose",
    )  # fmt: skip
    assert rc == 0
    episodes, _ = stored(setup)
    second = next(e for e in episodes if e.status == "aborted")
    assert second.episode_id == setup["real"][1].episode_id
    assert not second.scored and "gripper cable loose" in second.status_reason


def test_an_undeclared_contact_partner_is_refused_before_anything_is_stored(setup, capsys):
    rc = record(
        setup, "--protocol", str(example_protocol_path()), "--technician", "Ana", "--status",
        "ok", "--quality", "0.9", "--succeeded", "yes", "--duration", "60", "--started-at",
        "2026-11-03T09:00:00Z", "--interventions", "0", "--no-faults", "--notes", "",
        "--incident", "contact,t_s=3,contact_force_n=60,contact_with=gripper jaw",
    )  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "incident #1: contact_with: 'gripper jaw'" in lines[0]
    assert "technician" in lines[0] and "environment" in lines[0]
    assert stored(setup) == ([], [])


def test_same_entry_twice_is_stored_once_and_a_different_one_is_refused(setup, capsys):
    args = [
        "--episode-id", setup["real"][2].episode_id, "--technician", "Bo", "--status", "ok",
        "--quality", "0.5", "--succeeded", "no", "--duration", "60", "--interventions", "0",
        "--started-at", "2026-11-03T10:00:00Z", "--no-faults", "--no-incidents", "--notes", "",
    ]  # fmt: skip
    assert record(setup, *args) == 0
    assert record(setup, *args) == 0
    assert "already stored (identical)" in capsys.readouterr().out
    changed = [a if a != "0.5" else "0.6" for a in args]
    assert record(setup, *changed) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    episodes, _ = stored(setup)
    assert [e.quality for e in episodes] == [0.5]


def test_contradictory_quality_and_success_are_refused(setup, capsys):
    # q* = 0.8: q = 0.9 with "did not succeed" (and q = 0.5 with "succeeded") contradict.
    base = ["--technician", "Bo", "--status", "ok", "--duration", "60", "--interventions", "0",
            "--no-faults", "--no-incidents", "--notes", ""]  # fmt: skip
    assert record(setup, *base, "--quality", "0.9", "--succeeded", "no") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "contradictory" in err and "did not succeed" in err
    assert record(setup, *base, "--quality", "0.5", "--succeeded", "yes") == 2
    assert "below the success threshold" in capsys.readouterr().err
    assert not setup["db"].exists() or stored(setup)[0] == []


def test_bad_flag_is_an_error_and_nothing_is_stored(setup, capsys):
    assert record(setup, "--quality", "1.5", "--technician", "Ana") == 2
    assert "quality" in capsys.readouterr().err
    assert not setup["db"].exists() or stored(setup)[0] == []


# --------------------------------------------------------------------------- by prompts


def test_scripted_prompt_session_reasks_bad_answers(setup, monkeypatch, capsys):
    answers = [
        "",  # technician: empty → re-asked
        "Bo",
        "",  # start time: Enter = now
        "okay",  # status: not a status → re-asked
        "ok",
        "1.3",  # quality: above 1 → re-asked
        "0.7",
        "",  # succeeded: default is "n" because 0.7 < q* 0.8
        "abc",  # duration → re-asked
        "90",
        "-1",  # interventions → re-asked
        "0",
        "1",  # one fault
        "Grasp Slip",  # normalized to grasp_slip
        "maybe",  # recovered? → re-asked
        "y",
        "",  # repair minutes: default 0
        "",  # detail
        "0",  # no incidents
        "",  # notes
        "",  # store it? Enter = yes
    ]
    monkeypatch.setattr("builtins.input", entry.scripted_reader(answers))
    assert record(setup) == 0
    out = capsys.readouterr().out
    assert out.count("not accepted") == 6
    (ep,), events = stored(setup)
    assert ep.quality == 0.7 and not ep.success and ep.audited_success is False
    assert ep.duration_s == 90.0 and ep.interventions == 0
    assert [(f.kind, f.recovered_autonomously, f.repair_s) for f in ep.faults] == [
        ("grasp_slip", True, 0.0)
    ]
    assert events == []


def test_input_ending_early_stores_nothing(setup, monkeypatch, capsys):
    monkeypatch.setattr("builtins.input", entry.scripted_reader(["Bo", "ok", "0.9"]))
    assert record(setup) == 2
    assert "nothing was stored" in capsys.readouterr().err
    assert not setup["db"].exists() or stored(setup)[0] == []


def test_manual_backend_times_the_episode_and_keeps_the_answers(tmp_path, protocol, setup):
    spec = setup["real"][0]
    answers = [
        "",  # press Enter at start
        "",  # press Enter at end
        "ok",
        "0.85",
        "y",
        "",  # duration: the measured one
        "0",
        "0",  # faults
        "1",  # one incident
        "protective_stop",
        "0.04",  # seconds into the episode (within the 50 ms it ran)
        "2",  # stop category
        "light curtain tripped",
        "",  # notes
    ]
    scripted = entry.scripted_reader(answers)

    def read(prompt):
        if "ended" in prompt:
            time.sleep(0.05)  # the episode "runs" for 50 ms between the two Enter presses
        return scripted(prompt)

    prompter = entry.Prompter(read=read, write=lambda line: None)
    with ManualBackend(protocol, prompter=prompter, technician="Cy") as backend:
        outcome = backend.run_episode(spec, protocol, tmp_path / "rec")
    ep = outcome.episode
    assert ep.episode_id == spec.episode_id and ep.status == "ok" and ep.success
    assert 0.05 <= ep.duration_s < 5  # measured between the two Enter presses
    (event,) = outcome.safety_events
    assert (event.kind, event.t_s, event.stop_category) == ("protective_stop", 0.04, 2)
    assert event.detail == "light curtain tripped"
    (artifact,) = ep.artifacts
    data = Path(artifact.path).read_bytes()
    assert hashlib.sha256(data).hexdigest() == artifact.sha256
    saved = json.loads(data)
    assert saved["answers"]["technician"] == "Cy" and saved["episode_id"] == spec.episode_id
