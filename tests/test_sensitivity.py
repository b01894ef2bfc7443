"""`protocol check --sensitivity`: every knob of the example protocol changes something; inert
knobs and saturated batteries are flagged."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from embodied_eval.cli.main import main
from embodied_eval.demo import demo_protocol_text
from embodied_eval.protocol.reader import (
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)
from embodied_eval.protocol.sensitivity import (
    run_sweep,
    saturation_warnings,
    sweep_arms,
    sweep_table,
)


def test_saturation_bounds_by_hand() -> None:
    rates = {
        ("mujoco", "push"): (49, 50),  # 0.98: at the ceiling
        ("mujoco", "peg_insert"): (1, 50),  # 0.02: at the floor
        ("pybullet", "push"): (48, 50),  # 0.96: informative
        ("real", "drawer_open"): (0, 0),  # nothing run: nothing to say
    }
    warnings = saturation_warnings(rates)
    assert len(warnings) == 2
    assert "49/50 = 0.98 on push (mujoco), at the ceiling" in warnings[1]
    assert "1/50 = 0.02 on peg_insert (mujoco), at the floor" in warnings[0]


def test_arms_cover_every_declared_knob_end_and_drift() -> None:
    protocol = load_protocol(example_protocol_path())
    arms = sweep_arms(protocol)
    ends = {(a.knob, a.setting) for a in arms}
    for knob, (low, high) in protocol.randomization.items():
        assert (knob, f"low {low:g}") in ends and (knob, f"high {high:g}") in ends
        assert all(a.randomization == {} or len(a.randomization) == 1 for a in arms[:-1])
    assert ("drift.day14_worn", "day 14") in ends
    assert arms[-1].knob == "randomization" and arms[-1].randomization == protocol.randomization


@pytest.mark.slow
def test_every_example_knob_changes_outcome_or_quality() -> None:
    protocol = load_protocol(example_protocol_path())
    result = run_sweep(protocol, engines=["mujoco"], instances_per_family=1)
    assert not [w for w in result.warnings if w.startswith("inert")]
    knobs = {e.knob for e in result.effects if not e.inert}
    assert knobs == {*protocol.randomization, "drift.day07", "drift.day14_worn", "randomization"}
    # Paired: both arms ran the same 5 instances (one per family) with the same seeds.
    assert {e.n for e in result.effects} == {5}


def test_an_inert_knob_is_flagged() -> None:
    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    raw["battery"] = {"push": raw["battery"]["push"]}
    raw["randomization"] = {"link_mass_scale": [1.0, 1.0]}  # the nominal value: no change
    raw["sampling"]["drifts"] = ["nominal"]
    # Without the calendar's days and the control family the closure audits do not apply.
    raw.pop("maintenance")
    raw.pop("expansion")
    protocol = protocol_from_mapping(raw)
    result = run_sweep(protocol, engines=["mujoco"], instances_per_family=1)
    assert [(e.knob, e.inert) for e in result.effects] == [
        ("link_mass_scale", True),
        ("randomization", True),
    ]
    assert result.warnings[0].startswith("inert: link_mass_scale changes nothing on mujoco")
    # One push episode under the protocol's DR succeeded: 1/1 is at the ceiling.
    assert result.reference_success == {("mujoco", "push"): (1, 1)}
    assert "1/1 = 1.00 on push (mujoco), at the ceiling" in result.warnings[-1]


def test_cli_prints_the_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = demo_protocol_text(1, 0.2)  # the example protocol, first family only
    text = text[: text.index("[randomization]")] + (
        "[randomization]\nsensor_noise_std = [0.0, 0.004]\n\n" + text[text.index("[drift.") :]
    )
    path = tmp_path / "p.toml"
    path.write_text(text.replace('"mujoco", "pybullet"', '"mujoco"'), encoding="utf-8")
    argv = ["protocol", "check", str(path), "--sensitivity", "--instances-per-family", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sensor_noise_std" in out and "drift.day14_worn" in out
    assert "reference success under the protocol's randomization" in out


def test_camera_knobs_are_swept_with_the_camera_policy() -> None:
    """A knob that changes only the camera images runs with the engine's camera reference
    policy (and its own nominal arm); a physics knob with the protocol's policy."""
    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    raw["battery"] = {"pick_place": raw["battery"]["pick_place"]}
    raw["randomization"] = {
        "scene_camera_offset_m": [0.03, 0.03],
        "sensor_noise_std": [0.0, 0.0],
    }
    raw["sampling"]["drifts"] = ["nominal"]
    raw.pop("maintenance")
    raw.pop("expansion")
    protocol = protocol_from_mapping(raw)
    arms = sweep_arms(protocol)
    assert [(a.knob, a.camera) for a in arms] == [
        ("scene_camera_offset_m", True),
        ("sensor_noise_std", False),
        ("randomization", False),
    ]
    result = run_sweep(protocol, engines=["mujoco"], instances_per_family=1)
    by_knob = {e.knob: e for e in result.effects}
    camera = by_knob["scene_camera_offset_m"]
    assert camera.camera and camera.policy == "sim_suites.policies:vision"
    # The vision policy back-projects with the nominal calibration: 3 cm off moves its view.
    assert not camera.inert
    noise = by_knob["sensor_noise_std"]  # std 0: the scripted policy's episode is unchanged
    assert not noise.camera and noise.policy == protocol.sim_policy and noise.inert
    lines = "\n".join(sweep_table(result))
    assert "(camera policy sim_suites.policies:vision)" in lines
