"""A calibration used by the sim side: `[sim] calibration` / `run --calibration`, its hash in the
manifest, the episode records and the certificate; edited files and other robots refused."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.errors import EvalError
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.calibration_file import write_calibration
from embodied_eval.protocol.reader import example_protocol_path, load_protocol

ROBOT = "twin-panda-1"  # the example protocol's [real] robot_id


def _calibration(path, robot=ROBOT):
    parameters = {
        "payload": {"value": 0.4, "low": 0.38, "high": 0.42, "unit": "kg", "identified": True},
        "actuator_delay": {"value": 0.041, "low": 0.04, "high": 0.044, "unit": "s",
                           "identified": True},
        "actuator_bandwidth": {"value": 8.0, "unit": "Hz", "identified": True},
        "friction": {"value": 1.0, "unit": "", "identified": False},
    }  # fmt: skip
    return write_calibration(
        path, {"format": 1, "robot_id": robot, "window": "w", "parameters": parameters}
    )


def _protocol_with(tmp_path, line):
    text = example_protocol_path().read_text()
    text = text.replace("[sim]\n", f"[sim]\n{line}\n", 1)
    path = tmp_path / "protocol.toml"
    path.write_text(text)
    return path


def test_sim_calibration_key_is_resolved_and_hashed_only_when_set(tmp_path):
    base = load_protocol(example_protocol_path())
    assert base.sim_calibration == ""
    same = load_protocol(_protocol_with(tmp_path, ""))
    assert same.protocol_hash == base.protocol_hash  # not set: the hash is unchanged
    with_cal = load_protocol(_protocol_with(tmp_path, 'calibration = "calibration.toml"'))
    assert with_cal.sim_calibration == str(tmp_path / "calibration.toml")
    assert with_cal.protocol_hash != base.protocol_hash


def test_calibrated_sim_episode_records_the_hash_and_applies_the_fit(tmp_path):
    from sim_suites.episode import run_episode

    digest = _calibration(tmp_path / "calibration.toml")
    protocol = load_protocol(_protocol_with(tmp_path, 'calibration = "calibration.toml"'))
    manifest = plan_manifest(protocol)
    assert manifest.header["sim_calibration_sha256"] == digest
    spec = manifest.side("sim")[0]
    episode = run_episode(spec, protocol, max_steps=5).episode
    record = episode.randomization["calibration"]
    assert record["sha256"] == digest
    # The sim half runs the robot's own command path: the 0.041 s delay and the 8 Hz bandwidth
    # apply as fitted; friction was not identified, so it is not applied.
    assert record["applied"] == {
        "actuator_bandwidth_hz": 8.0,
        "actuator_delay_s": 0.041,
        "payload_kg": 0.4,
    }
    assert record["not_applied"] == []
    gap = episode.randomization["reality_gap"]
    assert gap["payload_kg"] == 0.4 and gap["actuator_delay_s"] == 0.041
    assert gap["actuator_bandwidth_hz"] == 8.0 and gap["friction_scale"] == 1.0


def test_edited_or_foreign_calibration_is_refused_before_planning(tmp_path):
    path = tmp_path / "calibration.toml"
    _calibration(path)
    protocol = load_protocol(_protocol_with(tmp_path, 'calibration = "calibration.toml"'))
    path.write_text(path.read_text().replace("value = 0.4\n", "value = 0.3\n"))
    with pytest.raises(EvalError, match="edited after it was fitted"):
        plan_manifest(protocol)
    _calibration(path, robot="panda-lab-2")
    with pytest.raises(EvalError, match="fitted on robot 'panda-lab-2'"):
        plan_manifest(protocol)


def test_run_calibration_option_puts_the_hash_in_the_manifest(tmp_path, capsys):
    from embodied_eval.cli.main import main

    digest = _calibration(tmp_path / "cal.toml")
    out = tmp_path / "run"
    argv = ["run", str(example_protocol_path()), "--side", "sim", "--dry-run", "--db",
            str(tmp_path / "e.db"), "--out", str(out), "--no-progress"]  # fmt: skip
    assert main([*argv, "--calibration", str(tmp_path / "cal.toml")]) == 0
    (manifest_file,) = out.glob("manifest-*.json")
    assert json.loads(manifest_file.read_text())["sim_calibration_sha256"] == digest
    capsys.readouterr()
    _calibration(tmp_path / "other.toml", robot="panda-lab-2")
    assert main([*argv, "--calibration", str(tmp_path / "other.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fitted on robot 'panda-lab-2'" in err
