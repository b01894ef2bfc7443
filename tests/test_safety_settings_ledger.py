"""Every change to a robot profile's safety settings that the harness runs with is a trial-ledger
record; a certificate names the record in force and a later change voids it."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.certificate.issue import issue_certificate, recompute_check
from embodied_eval.certificate.validity import void_since
from embodied_eval.certificate.verify import verify_bundle
from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import load_protocol, protocol_from_mapping
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, transaction
from embodied_eval.store.safety_settings import KIND, changed_settings, note_safety_settings
from embodied_eval.store.signing_keys import create_private_key
from tests.test_certificate import build_window

pytestmark = pytest.mark.timeout(240)

#: A profile's safety settings as `BridgeConfig.safety_settings` reports them (abridged: the
#: ledger takes any plain mapping).
SETTINGS = {
    "robot.velocity_max": [2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61],
    "robot.workspace_min": [0.1, -0.6, -0.05],
    "deadlines.deadman_s": 0.1,
    "deadlines.safe_stop_s": 1.0,
    "loop.heartbeat_hz": 50.0,
}


def note(db: Path, robot: str, settings: dict[str, Any]) -> ledger.ChainRow | None:
    with Store(db, create=False) as store, transaction(store.conn):
        return note_safety_settings(store.conn, robot, settings)


def test_a_change_is_one_record_naming_each_changed_setting(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    Store(db).close()
    first = note(db, "arm-1", SETTINGS)
    assert first is not None and first.record_id.startswith("SAF-")
    # The first record of a robot names every setting as new.
    assert first.data["changed"]["deadlines.deadman_s"] == [None, 0.1]
    assert first.data["previous"] is None
    assert note(db, "arm-1", dict(SETTINGS)) is None  # the same settings again: no record
    assert note(db, "arm-2", SETTINGS) is not None  # another robot: its own record
    slower = {**SETTINGS, "deadlines.deadman_s": 0.2}
    del slower["loop.heartbeat_hz"]
    second = note(db, "arm-1", slower)
    assert second is not None
    assert second.data["changed"] == {
        "deadlines.deadman_s": [0.1, 0.2],
        "loop.heartbeat_hz": [50.0, None],
    }
    assert second.data["previous"] == first.record_id
    with Store(db, create=False) as store:
        kinds = [r.kind for r in ledger.rows(store.conn, "kind = ?", (KIND,))]
    assert kinds == [KIND] * 3
    assert changed_settings({"a": 1}, {"a": 1}) == {}
    with pytest.raises(EvalError, match="robot_id"):
        note(db, "", SETTINGS)


def test_a_later_change_voids_the_certificate_and_verify_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol_path, db = build_window(tmp_path)
    robot = load_protocol(protocol_path).robot_id
    certified = note(db, robot, SETTINGS)
    assert certified is not None
    key = tmp_path / "owner.pem"
    create_private_key(key)
    out = tmp_path / "bundle"
    issue_certificate(protocol_path=protocol_path, db=db, key_path=key, out=out)
    cert = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    entry = cert["validity"]["safety_settings"]
    assert entry["record"] == certified.record_id and entry["seq"] == certified.seq
    assert any(certified.record_id in s for s in cert["validity"]["void_if"])
    recompute_check(verify_bundle(out), db)

    later = tmp_path / "later.db"
    shutil.copy(db, later)
    note(later, robot, SETTINGS)  # unchanged: nothing recorded, still valid
    note(later, "robot-2", {**SETTINGS, "deadlines.deadman_s": 0.5})  # another robot
    assert void_since(cert, later) is None
    changed = note(later, robot, {**SETTINGS, "deadlines.deadman_s": 0.2})
    assert changed is not None
    why = void_since(cert, later)
    assert why is not None
    assert why.startswith(f"safety-settings record {changed.record_id} (ledger seq {changed.seq}")
    assert why.endswith("deadlines.deadman_s 0.1 → 0.2")
    assert main(["verify", str(out), "--db", str(later)]) == 1
    assert f"void since safety-settings record {changed.record_id}" in capsys.readouterr().out


def test_a_certificate_issued_before_safety_settings_were_stated_still_verifies(
    tmp_path: Path,
) -> None:
    protocol_path, db = build_window(tmp_path)
    key = tmp_path / "owner.pem"
    create_private_key(key)
    out = tmp_path / "bundle"
    issue_certificate(protocol_path=protocol_path, db=db, key_path=key, out=out)
    verified = verify_bundle(out)
    # As issued before this condition existed: no safety_settings entry, no void_if line for it
    # (the recomputation compares the certificate's entries with the store's).
    cert = verified.certificate
    del cert["validity"]["safety_settings"]
    cert["validity"]["void_if"] = [s for s in cert["validity"]["void_if"] if "safety" not in s]
    recompute_check(verified, db)
    robot = load_protocol(protocol_path).robot_id
    note(db, robot, SETTINGS)
    assert void_since(cert, db) is None  # it did not state the condition, so it cannot break it


MINI = """
[protocol]
name = "settings-mini"
version = "1"
base_seed = 7
m_min = 1
[window]
id = "w-settings"
start = 2026-11-01
end = 2026-11-30
[battery.drawer_open]
instances = ["drawer_open/drawer_center"]
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
[real]
backend = "mujoco"
robot_id = "bench-arm"
"""


def test_a_real_run_records_the_profile_it_runs_with_before_its_first_episode(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sim_suites.env", exc_type=ImportError)
    from embodied_eval.runner.trials import RunOptions, run_trials
    from real_bridge.bridge_config import load_bridge_config, profile_path

    profile = tmp_path / "twin-slow-deadman.toml"
    profile.write_text(
        profile_path("twin").read_text(encoding="utf-8") + "\n[deadlines]\ndeadman_s = 0.15\n",
        encoding="utf-8",
    )
    protocol = protocol_from_mapping(tomllib.loads(MINI))
    db = tmp_path / "run.db"
    options = RunOptions(
        sides=("real",), robot_options={"config_path": str(profile), "max_steps": 20}
    )
    run_trials(protocol, options, db_path=db, out_dir=tmp_path / "run", show_progress=False)
    with Store(db, create=False) as store:
        records = ledger.rows(store.conn, "kind = ?", (KIND,))
        first_episode = ledger.rows(store.conn, "kind = 'episode'")[0]
    assert len(records) == 1
    settings = records[0].data["settings"]
    assert records[0].data["robot_id"] == "bench-arm"
    assert records[0].seq < first_episode.seq
    # What the profile file set, and the defaults it left alone (values from the profile and
    # `Deadlines`/`RobotSpec`, not from the record's own code path).
    expected = load_bridge_config(profile)
    assert settings["deadlines.deadman_s"] == 0.15
    assert settings["deadlines.safe_stop_s"] == 1.0
    assert settings["robot.velocity_max"] == list(expected.robot.velocity_max)
    assert settings["robot.workspace_max"] == [0.9, 0.6, 0.8]
