"""Real-to-sim calibration: the replay is the twin's physics, a twin with known parameters is
recovered, intervals and identifiability by hand, the calibration file's hash and robot checks,
and bad input refused before anything is written."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.errors import EvalError
from embodied_eval.protocol.calibration_file import read_calibration, write_calibration
from real_bridge.calibration.fit import calibrate_episodes, split_episodes
from real_bridge.calibration.intervals import design_effects, identifiability, jacobian_intervals
from real_bridge.calibration.offline_twin import excitation_commands, record_offline
from real_bridge.calibration.params import bandwidth_hz, nominal_values, parse_params
from real_bridge.calibration.replay import EpisodeReplay, controller_phase_s
from real_bridge.calibration.residuals import episode_residual
from real_bridge.calibration.starts import Z_95
from real_bridge.twin.settings import TwinGap

TASK = "pick_place/cube_center"
#: The known gap: everything nominal except what the recovery test fits.
TRUTH = TwinGap(
    friction_scale=1.0, contact_timeconst_s=0.0, link_mass_scale=1.0, object_mass_scale=1.0,
    payload_kg=0.4, actuator_gain_scale=0.9, joint_damping_scale=1.0, actuator_delay_s=0.04,
    actuator_bandwidth_hz=8.0, sensor_noise_std=0.0005, object_pose_noise_m=0.002,
)  # fmt: skip


def truth_values() -> dict[str, float]:
    """TRUTH's gap as calibration parameters: payload 0.4 kg, gain 0.9, delay 0.04 s and the
    8 Hz bandwidth as its time constant 1/(2π·8) s; the rest nominal."""
    return nominal_values(
        {"payload": 0.4, "actuator_gain": 0.9, "actuator_delay": 0.04,
         "actuator_bandwidth": 1 / (2 * math.pi * 8.0)}
    )  # fmt: skip


def test_replay_is_the_twins_physics():
    # Without sensor noise, replaying the twin's commands with the twin's own parameters gives
    # back the twin's joint positions (same scene, same controller updates, same physics). Only
    # the settling after the scene reset differs (the replay starts 0.3 s before the first
    # command, the twin was reset earlier): < 0.1 mrad, a fifth of the twin's sensor noise.
    rng = np.random.default_rng(5)
    quiet = dataclasses.replace(TRUTH, sensor_noise_std=0.0, object_pose_noise_m=0.0)
    rec = record_offline(quiet, TASK, 11, {}, excitation_commands(60, rng), rng)
    values = truth_values()
    replay = EpisodeReplay(TASK)
    try:
        same = episode_residual(rec, replay.run(rec, values))
        nominal = episode_residual(rec, replay.run(rec, nominal_values()))
    finally:
        replay.close()
    assert np.abs(same.joint).max() < 1e-4
    assert np.abs(same.object).max() < 1e-4
    assert np.abs(nominal.joint).max() > 0.01  # the nominal sim is off by > 10 mrad somewhere


def test_a_robot_that_held_on_its_own_is_replayed_holding(tmp_path):
    # The twin holds at 1.006 s (its deadman: the heartbeat was late) until 1.2 s: its set-point
    # freezes, the commands waiting for their delay are dropped and those arriving meanwhile
    # ignored. The replay leaves those out and holds too: the twin's positions come back to
    # < 0.1 mrad; replayed without the hold it is off by more than 1 mrad somewhere.
    rng = np.random.default_rng(8)
    quiet = dataclasses.replace(TRUTH, sensor_noise_std=0.0, object_pose_noise_m=0.0)
    sent = excitation_commands(100, rng)
    rec = record_offline(quiet, TASK, 14, {}, sent, rng, holds=[(1.006, 1.2)])
    dropped = [c for c in sent if all(c is not k for k in rec.commands)]
    # Dropped: arm commands that arrived after 1.006 − 0.04 s and before 1.2 s (one per 20 ms).
    arm = [c for c in dropped if c.kind == "arm"]
    assert all(0.966 <= c.arrival_s < 1.2 for c in dropped)
    assert len(arm) == sum(1 for c in sent if c.kind == "arm" and 0.966 <= c.arrival_s < 1.2)
    assert len(arm) >= 9 and rec.not_applied == len(dropped) and rec.holds_s == (1.006,)
    values = truth_values()
    replay = EpisodeReplay(TASK)
    try:
        held = episode_residual(rec, replay.run(rec, values))
        unheld = dataclasses.replace(rec, holds_s=())
        missed = episode_residual(unheld, replay.run(unheld, values))
    finally:
        replay.close()
    assert np.abs(held.joint).max() < 1e-4
    assert np.abs(missed.joint).max() > 1e-3
    # The bridge recording says the same: the dropped commands were sent but never echoed, and
    # the robot's state turned to "hold" at 1.006 s — 1.004 s on the reader's clock, whose zero
    # is the first joint state (the twin's first physics step, 2 ms).
    from real_bridge.calibration.recorded import read_recorded_episode
    from tests.calibration_support import write_recording

    episode = write_recording(rec, tmp_path / "held.mcap", 0.04, "twin", unapplied=dropped)
    read = read_recorded_episode(episode, {})
    assert read.not_applied == len(dropped)
    assert len(read.commands) == len(rec.commands)
    assert read.holds_s == pytest.approx((1.004,), abs=1e-9)


def test_controller_update_phase_is_found_from_the_efforts():
    rng = np.random.default_rng(6)
    rec = record_offline(TRUTH, TASK, 12, {}, excitation_commands(40, rng), rng)
    # The twin's controller updates at 0, 20, 40 ms … after its scene reset (the clock's zero).
    assert controller_phase_s(rec, 0.02) == pytest.approx(0.0, abs=1e-12)
    shifted = dataclasses.replace(rec, state_t=rec.state_t + 0.006)
    assert controller_phase_s(shifted, 0.02) == pytest.approx(0.006, abs=1e-9)


def test_a_twin_with_known_parameters_is_recovered():
    rng = np.random.default_rng(1)
    episodes = [
        record_offline(TRUTH, TASK, seed, {}, excitation_commands(150, rng), rng)
        for seed in range(3)
    ]
    names = ["payload", "actuator_delay", "actuator_gain", "actuator_bandwidth"]
    result = calibrate_episodes(episodes, names, workers=2)
    assert result.fitting == [episodes[0].episode_id, episodes[1].episode_id]
    assert result.validation == [episodes[2].episode_id]
    est = result.estimates
    truth = {"payload": 0.4, "actuator_gain": 0.9, "actuator_bandwidth": 1 / (2 * math.pi * 8.0)}
    for name, value in truth.items():
        assert est[name].identified, est[name]
        assert abs(est[name].value - value) <= 0.1 * value, est[name]
        assert est[name].low <= value <= est[name].high, est[name]
    assert est["actuator_delay"].identified
    assert abs(est["actuator_delay"].value - 0.04) <= 0.005
    assert est["actuator_delay"].low <= 0.04 <= est["actuator_delay"].high
    assert bandwidth_hz(est["actuator_bandwidth"].value) == pytest.approx(8.0, rel=0.1)
    # Validation: the calibrated replay tracks the held-out episode to the sensor noise (0.5 mrad).
    assert result.before["joint_rms_mrad"] > 10.0
    assert result.after["joint_rms_mrad"] < 0.7


def test_intervals_from_the_jacobian_by_hand():
    # J = [[1, 0], [0, 2], [1, 1]], r = [1, -1, 1]: JᵀJ = [[2, 1], [1, 5]], det 9,
    # (JᵀJ)⁻¹ = [[5, -1], [-1, 2]] / 9; s² = ‖r‖² / (n − p) = 3 / 1 = 3.
    # Σ = 3/9 · [[5, -1], [-1, 2]]: se = (√(5/3), √(2/3)); ρ = -1/√10.
    jac = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    r = np.array([1.0, -1.0, 1.0])
    se, half, corr = jacobian_intervals(jac, r)
    np.testing.assert_allclose(se, [math.sqrt(5 / 3), math.sqrt(2 / 3)])
    np.testing.assert_allclose(half, [1.959964 * math.sqrt(5 / 3), 1.959964 * math.sqrt(2 / 3)],
                               rtol=1e-6)  # fmt: skip
    assert corr[0, 1] == pytest.approx(-1 / math.sqrt(10))
    assert pytest.approx(1.959964, abs=1e-6) == Z_95


def test_design_effect_of_residuals_correlated_within_blocks_by_hand():
    # J = [[1, 0], [1, 0], [0, 1], [0, 1]], r = [1, 1, 1, 1], blocks [0, 0, 1, 1]:
    # JᵀJ = 2·I, A = I/2; block scores J_bᵀr_b = (2, 0) and (0, 2), M = 4·I;
    # Σ_B = G/(G − 1)·A M A = 2 · I = 2·I; i.i.d. s² = ‖r‖²/(n − p) = 4/2 = 2, Σ = s²A = I.
    # Design effect 2 each (two equal residuals per block count as one): the 95 % half-width
    # z·√(Σᵢᵢ·2) = 1.959964·√2 = 2.771808.
    jac = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    blocks = np.array([0, 0, 1, 1])
    np.testing.assert_allclose(design_effects(jac, np.ones(4), blocks), [2.0, 2.0])
    est = identifiability(["payload", "actuator_gain"], np.array([1.0, 1.0]), jac, np.ones(4),
                          blocks)  # fmt: skip
    assert est["payload"].design_effect == pytest.approx(2.0)
    assert est["payload"].high - 1.0 == pytest.approx(2.771808, abs=1e-6)
    # Alternating residuals cancel within each block: Σ_B = 0, and the interval is never
    # narrowed below the i.i.d. one (effect 1).
    np.testing.assert_allclose(design_effects(jac, np.array([1.0, -1.0, 1.0, -1.0]), blocks),
                               [1.0, 1.0])  # fmt: skip
    # One block only: no correction.
    np.testing.assert_allclose(design_effects(jac, np.ones(4), np.zeros(4)), [1.0, 1.0])


def test_a_parameter_the_data_do_not_pin_down_is_reported_with_its_partner():
    # Two nearly equal columns (payload and gain move the residual alike) and an all-zero one
    # (friction: the object never moved).
    rng = np.random.default_rng(0)
    a = rng.normal(size=200)
    jac = np.column_stack([a, a + 1e-4 * rng.normal(size=200), np.zeros(200)])
    r = rng.normal(size=200)
    est = identifiability(["payload", "actuator_gain", "friction"], np.array([0.3, 1.0, 1.0]),
                          jac, r)  # fmt: skip
    assert not est["payload"].identified and est["payload"].partner == "actuator_gain"
    assert est["payload"].correlation < -0.99  # equal columns: opposite, compensating moves
    assert "wider than" in est["payload"].reason
    assert not est["friction"].identified and "never exercise" in est["friction"].reason
    assert est["friction"].partner == ""


def test_split_is_by_episode():
    eps = list("abcde")
    fit, val = split_episodes(eps)  # type: ignore[arg-type]
    assert fit == ["a", "b", "d", "e"] and val == ["c"]
    assert split_episodes(["a", "b"]) == (["a"], ["b"])  # type: ignore[arg-type]
    with pytest.raises(EvalError, match="at least 2"):
        split_episodes(["a"])  # type: ignore[arg-type]


def test_unknown_parameter_and_unbuildable_scene_are_refused():
    assert parse_params("payload, actuator_delay") == ("payload", "actuator_delay")
    with pytest.raises(EvalError, match=r"unknown parameter 'payloadd'.*known: payload"):
        parse_params("payloadd")
    with pytest.raises(EvalError, match="cannot build the scene of 'pick_place/nope'"):
        EpisodeReplay("pick_place/nope")
    from real_bridge.calibration.fit import check_scenes
    from real_bridge.calibration.recorded import RecordedEpisode

    empty = np.zeros((0, 9))
    unknown = RecordedEpisode("x-real", "pick_place/nope", 0, {}, "twin", [], np.zeros(0), empty,
                              empty)  # fmt: skip
    with pytest.raises(EvalError, match="cannot build the scene of 'pick_place/nope'"):
        check_scenes([unknown])


def _content(robot="twin"):
    return {
        "format": 1, "robot_id": robot, "protocol_hash": "ab" * 32, "window": "w1",
        "fitted_on": ["e1"], "validated_on": ["e2"],
        "parameters": {
            "payload": {"value": 0.4, "low": 0.38, "high": 0.42, "unit": "kg",
                        "identified": True, "partner": "actuator_gain", "correlation": 0.95,
                        "reason": ""},
            "actuator_delay": {"value": 0.044, "low": 0.04, "high": 0.048, "unit": "s",
                               "identified": True, "partner": "", "correlation": 0.0,
                               "reason": ""},
            "friction": {"value": 1.0, "unit": "", "identified": False, "partner": "",
                         "correlation": 0.0, "reason": "never exercised"},
        },
    }  # fmt: skip


def test_calibration_file_hash_robot_and_sim_mapping(tmp_path):
    path = tmp_path / "calibration.toml"
    digest = write_calibration(path, _content())
    cal = read_calibration(path, robot_id="twin")
    assert cal.sha256 == digest and len(digest) == 64
    assert cal.values == {"payload": 0.4, "actuator_delay": 0.044}  # friction not identified
    # 0.044 s at a 20 ms control period is 2 whole control steps (2.2 rounds to 2).
    # The sim half runs the robot's command path: the delay applies in seconds, as fitted.
    assert cal.sim_gap() == {"payload_kg": 0.4, "actuator_delay_s": 0.044}
    with pytest.raises(EvalError, match=r"fitted on robot 'twin'.*robot is 'panda-lab-2'"):
        read_calibration(path, robot_id="panda-lab-2")
    edited = path.read_text().replace("value = 0.4\n", "value = 0.5\n")
    assert edited != path.read_text()
    path.write_text(edited)
    with pytest.raises(EvalError, match="edited after it was fitted"):
        read_calibration(path)
    with pytest.raises(EvalError, match="no such file"):
        read_calibration(tmp_path / "missing.toml")


def test_cli_window_without_recordings_writes_nothing(tmp_path, capsys):
    from embodied_eval.cli.main import main
    from embodied_eval.protocol.reader import example_protocol_path
    from embodied_eval.store.core import Store

    db = tmp_path / "e.db"
    Store(db).close()
    out = tmp_path / "calibration.toml"
    base = ["calibrate", "--db", str(db), "--protocol", str(example_protocol_path()), "--out",
            str(out)]  # fmt: skip
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no real episodes with an MCAP recording" in err
    assert not out.exists()
    assert main([*base, "--params", "payload,mass"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown parameter 'mass'" in err
    assert not out.exists()


def _never_started(tmp_path, window):
    """A real episode aborted during homing, with a recording holding only its metadata."""
    from embodied_eval.canonical import canonical_json
    from embodied_eval.records import Episode
    from real_bridge.bridge_config import BridgeConfig
    from real_bridge.recording import McapRecorder

    recorder = McapRecorder(tmp_path / "h1.mcap", {
        "episode_id": "h1-real-ros2-a1",
        "bridge_config": canonical_json(dataclasses.asdict(BridgeConfig()))})  # fmt: skip
    return Episode(
        episode_id="h1-real-ros2-a1", pair_id="h1", side="real", family="pick_place",
        task_id=TASK, seed=1, policy="p", engine="ros2", quality=0.0, target_quality=0.8,
        status="aborted", window=window, artifacts=(recorder.close(),), control={"loop_steps": 0},
        status_reason="protective_stop during homing: TCP speed 1.034 m/s above the 1.0 m/s limit",
    )  # fmt: skip


def test_a_window_whose_every_recording_never_started_writes_nothing(tmp_path, capsys):
    from embodied_eval.cli.main import main
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol
    from embodied_eval.store.core import Store

    db = tmp_path / "e.db"
    with Store(db) as store:
        store.write_episode(_never_started(tmp_path, load_protocol(example_protocol_path())
                                           .window_id))  # fmt: skip
    out = tmp_path / "calibration.toml"
    assert main(["calibrate", "--db", str(db), "--protocol", str(example_protocol_path()),
                 "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was aborted before it started (1)" in err, err
    assert not out.exists()


def test_recording_without_joint_states_is_refused(tmp_path):
    from rosbags.typesys import Stores, get_typestore

    from embodied_eval.canonical import canonical_json
    from embodied_eval.records import Episode
    from real_bridge.bridge_config import BridgeConfig
    from real_bridge.calibration.recorded import read_recorded_episode
    from real_bridge.recording import McapRecorder

    config = BridgeConfig()
    path = tmp_path / "e1.mcap"
    recorder = McapRecorder(path, {"episode_id": "e1-real", "bridge_config": canonical_json(
        dataclasses.asdict(config))})  # fmt: skip
    store = get_typestore(Stores.ROS2_KILTED)
    string = store.types["std_msgs/msg/String"]
    recorder.add_stream(config.topics.episode, "std_msgs/msg/String")
    event = json.dumps({"episode_id": "e1-real", "phase": "started"})
    recorder.write(
        config.topics.episode,
        bytes(store.serialize_cdr(string(data=event), "std_msgs/msg/String")),
        10,
    )
    artifact = recorder.close()
    episode = Episode(
        episode_id="e1-real", pair_id="e1", side="real", family="pick_place", task_id=TASK,
        seed=1, policy="p", engine="ros2", quality=0.0, target_quality=0.8,
        artifacts=(artifact,),
    )  # fmt: skip
    with pytest.raises(EvalError, match="no joint states recorded; record the `joint_state`"):
        read_recorded_episode(episode, {})


def test_calibrate_cli_reads_recordings_and_writes_file_and_report(tmp_path, capsys):
    from embodied_eval.cli.main import main
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol
    from embodied_eval.store.core import Store
    from real_bridge.calibration.recorded import read_recorded_episode
    from tests.calibration_support import write_recording

    protocol = load_protocol(example_protocol_path())
    rng = np.random.default_rng(3)
    gap = dataclasses.replace(TRUTH, actuator_bandwidth_hz=0.0, actuator_delay_s=0.0)
    db = tmp_path / "e.db"
    with Store(db) as store:
        for seed in range(3):
            rec = record_offline(gap, TASK, seed, protocol.randomization,
                                 excitation_commands(80, rng), rng)  # fmt: skip
            episode = write_recording(rec, tmp_path / f"{seed}.mcap", 0.0, "twin")
            episode = dataclasses.replace(episode, window=protocol.window_id)
            store.write_episode(episode)
            # The reader puts the commands back on the robot's clock from the robot's echo (its
            # clock starts at the first joint state).
            # The scene ranges come from the manifest the robot was given (here: the protocol's).
            back = read_recorded_episode(episode, {})
            assert back.randomization == {k: list(v) for k, v in protocol.randomization.items()}
            assert back.robot_id == "twin" and len(back.commands) == len(rec.commands)
            assert back.state_t[0] == 0.0
            np.testing.assert_allclose([c.arrival_s for c in back.commands],
                                       [c.arrival_s - rec.state_t[0] for c in rec.commands],
                                       atol=1e-6)  # fmt: skip
            np.testing.assert_allclose(back.state_q, rec.state_q)
            np.testing.assert_allclose(back.object_pos, rec.object_pos)
            assert back.stopped_s == pytest.approx(rec.stopped_s - rec.state_t[0])
        # An episode the harness aborted while homing: its recording has nothing to replay (not
        # even joint states, so reading it would fail); it is left out and named.
        store.write_episode(_never_started(tmp_path, protocol.window_id))
    out = tmp_path / "calibration.toml"
    argv = ["calibrate", "--db", str(db), "--protocol", str(example_protocol_path()), "--out",
            str(out), "--params", "payload,actuator_gain", "--report", str(tmp_path / "rep"),
            "--json"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["robot_id"] == "twin" and len(result["validated_on"]) == 1
    assert result["not_calibrated_from"] == [{
        "episode_id": "h1-real-ros2-a1",
        "reason": "aborted before it started: protective_stop during homing: TCP speed 1.034 "
                  "m/s above the 1.0 m/s limit",
    }]  # fmt: skip
    assert "h1-real-ros2-a1" not in result["fitted_on"] + result["validated_on"]
    payload = result["parameters"]["payload"]
    assert payload["identified"] and payload["low"] <= 0.4 <= payload["high"], payload
    assert result["validation"]["joint_rms_mrad_after"] < result["validation"][
        "joint_rms_mrad_before"]  # fmt: skip
    cal = read_calibration(out, robot_id="twin")
    assert cal.sha256 == result["content_sha256"]
    assert set(cal.values) == {"payload", "actuator_gain"}
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.count("<svg") == 3 + 2  # three joints and the object's x and z


def test_calibrate_by_drift_day_measures_each_days_tool_and_firmware(tmp_path, capsys):
    from embodied_eval.cli.main import main
    from embodied_eval.protocol.reader import example_protocol_path, load_protocol
    from embodied_eval.store.core import Store
    from tests.calibration_support import write_recording

    protocol = load_protocol(example_protocol_path())
    days = {d.name: d for d in protocol.drifts}
    rng = np.random.default_rng(4)
    robot = dataclasses.replace(TRUTH, payload_kg=0.0, actuator_gain_scale=1.0,
                                actuator_bandwidth_hz=0.0, actuator_delay_s=0.0)  # fmt: skip
    db = tmp_path / "e.db"
    with Store(db) as store:
        for k, name in enumerate(("nominal", "day14_worn") * 2):
            # day14_worn: a 0.5 kg tool, firmware 5.0.0 (gains × 0.7, one more 20 ms step)
            drift = dict(days[name].params)
            rec = record_offline(robot, TASK, k, protocol.randomization,
                                 excitation_commands(60, rng), rng, drift=drift,
                                 episode_id=f"d{k}-real-ros2-a1")  # fmt: skip
            episode = write_recording(rec, tmp_path / f"{k}.mcap", 0.0, "twin")
            store.write_episode(
                dataclasses.replace(episode, window=protocol.window_id, drift=drift)
            )
    out = tmp_path / "cal.toml"
    argv = ["calibrate", "--db", str(db), "--protocol", str(example_protocol_path()), "--out",
            str(out), "--params", "payload,actuator_gain,actuator_delay", "--by-drift",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["by_drift"]
    assert [(r["drift"], r["day"], r["episodes"]) for r in rows] == [
        ("nominal", 0, 2), ("day14_worn", 14, 2)]  # fmt: skip
    nominal, worn = (r["parameters"] for r in rows)
    assert nominal["payload"]["value"] < 0.05 and nominal["actuator_delay"]["value"] < 0.005
    assert abs(nominal["actuator_gain"]["value"] - 1.0) < 0.05
    for name, truth in (("payload", 0.5), ("actuator_gain", 0.7), ("actuator_delay", 0.02)):
        assert worn[name]["identified"], worn[name]
        assert worn[name]["low"] <= truth <= worn[name]["high"], worn[name]
    assert read_calibration(tmp_path / "cal-day14_worn.toml", robot_id="twin").values[
        "payload"] == pytest.approx(worn["payload"]["value"])  # fmt: skip
    assert not out.exists()
    # Each day is also recorded in the store's trial ledger, for the maintenance closure.
    from embodied_eval.embodiment.calibration_days import stored_day_calibrations

    with Store(db) as store:
        stored = stored_day_calibrations(store.conn, protocol.window_id)
    assert [(r["drift"], r["day"], r["content_sha256"]) for r in stored] == [
        (r["drift"], r["day"], r["content_sha256"]) for r in rows]  # fmt: skip
    assert stored[1]["parameters"]["payload"]["value"] == worn["payload"]["value"]
