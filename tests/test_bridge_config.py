"""Bridge configuration, discovery isolation and the wire protocol (no ROS needed)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec, SafetyEvent
from real_bridge.bridge_config import (
    BridgeConfig,
    LoopSettings,
    RobotSpec,
    config_from_mapping,
    load_bridge_config,
)
from real_bridge.bridge_config import profile_path as robot_profile_path
from real_bridge.command_check import command_problem
from real_bridge.discovery import (
    LOOPBACK_PROFILE,
    domain_id_for_test,
    profile_path,
    ros_environment,
)
from real_bridge.interface import (
    JudgeVerdict,
    contradiction,
    episode_manifest,
    manifest_sha256,
    parse_judge_verdict,
    parse_manifest,
    read_safety_status,
    safety_key_values,
    trajectory_problem,
)

SPEC = EpisodeSpec(
    episode_id="e1-real-ros2-a1",
    pair_id="e1",
    side="real",
    family="push",
    task_id="push/block_left",
    seed=11,
    drift_name="nominal",
    engine="ros2",
)


def test_toml_config_overrides_names_qos_and_deadlines(tmp_path):
    path = tmp_path / "bridge.toml"
    path.write_text(
        'domain_id = 7\nrobot_id = "panda-2"\n'
        '[topics]\njoint_state = "/franka/joint_states"\napplied = ""\n'
        '[qos.joint_state]\nreliability = "best_effort"\ndepth = 50\n'
        "[deadlines]\nservice_s = 2\n",
        encoding="utf-8",
    )
    cfg = load_bridge_config(path)
    assert cfg.domain_id == 7
    assert cfg.robot_id == "panda-2"
    assert cfg.topics.joint_state == "/franka/joint_states"
    assert cfg.topics.applied == ""
    assert cfg.topics.command == "/joint_trajectory_controller/joint_trajectory"  # default kept
    assert cfg.qos.joint_state.reliability == "best_effort"
    assert cfg.qos.joint_state.depth == 50
    assert cfg.qos.events.durability == "transient_local"
    assert cfg.deadlines.service_s == 2.0 and isinstance(cfg.deadlines.service_s, float)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"domain_id": 233}, "domain_id"),  # 233 overflows the DDS ports
        ({"domain_id": -1}, "domain_id"),
        ({"topics": {"joint_state": "joint states"}}, "topics.joint_state"),
        ({"topics": {"joint_stat": "/x"}}, "topics.joint_stat"),
        ({"qos": {"events": {"durability": "persistent"}}}, "qos.events.durability"),
        ({"deadlines": {"service_s": 0}}, "deadlines.service_s"),
        ({"deadlines": {"service_s": "3"}}, "deadlines.service_s"),
        ({"record_streams": ["joint_state", "video"]}, "record_streams"),
        ({"robot": {"kind": "kuka"}}, "robot.kind"),
        ({"robot": {"velocity_max": [1.0, 2.0]}}, "robot.velocity_max"),
        ({"loop": {"judge": "vibes"}}, "loop.judge"),
        ({"robot": {"kind": "franka"}, "loop": {"judge": "oracle"}}, "loop.judge"),
    ],
)
def test_bad_config_names_the_key(data, key):
    with pytest.raises(EvalError) as err:
        config_from_mapping(BridgeConfig, data)
    assert err.value.key == key
    assert "\n" not in str(err.value)


def test_loopback_profile_is_udp_on_127_0_0_1_without_builtin_transports():
    ns = {"d": "http://www.eprosima.com"}
    root = ET.parse(LOOPBACK_PROFILE).getroot()
    descriptor = root.find(".//d:transport_descriptor", ns)
    assert descriptor.find("d:type", ns).text == "UDPv4"
    assert [a.text for a in descriptor.findall("d:interfaceWhiteList/d:address", ns)] == [
        "127.0.0.1"
    ]
    assert descriptor.find("d:maxInitialPeersRange", ns).text == "32"
    participant = root.find(".//d:participant", ns)
    assert participant.get("is_default_profile") == "true"
    assert participant.find(".//d:useBuiltinTransports", ns).text == "false"
    peers = participant.findall(".//d:initialPeersList//d:address", ns)
    unicast = participant.findall(".//d:metatrafficUnicastLocatorList//d:address", ns)
    assert [p.text for p in peers] == ["127.0.0.1"]
    assert [u.text for u in unicast] == ["127.0.0.1"]


def test_child_environment_passes_everything_through_and_adds_domain_and_profile():
    base = {"LD_LIBRARY_PATH": "/x/lib", "_ROS_WHEELS_BOOTSTRAP_COMPLETE": "1", "HOME": "/h"}
    env = ros_environment(12, "loopback", base=base)
    assert env["ROS_DOMAIN_ID"] == "12"
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == str(LOOPBACK_PROFILE)
    for key, value in base.items():
        assert env[key] == value
    assert base == {
        "LD_LIBRARY_PATH": "/x/lib",
        "_ROS_WHEELS_BOOTSTRAP_COMPLETE": "1",
        "HOME": "/h",
    }
    system = ros_environment(3, "system", base={"FASTDDS_DEFAULT_PROFILES_FILE": "/lab.xml"})
    assert system["FASTDDS_DEFAULT_PROFILES_FILE"] == "/lab.xml"  # left alone
    with pytest.raises(EvalError):
        ros_environment(102, base={})
    with pytest.raises(EvalError):
        profile_path("/nonexistent/profile.xml")


def test_test_domain_ids_are_distinct_and_in_range():
    ids = [domain_id_for_test(i, pid=4242) for i in range(101)]
    assert len(set(ids)) == 101
    assert min(ids) == 1 and max(ids) == 101


def test_manifest_round_trip_and_echo_hash():
    manifest = episode_manifest(SPEC, None, max_steps=120)
    text = json.dumps(manifest)
    spec, data = parse_manifest(text)
    assert spec == SPEC
    assert data["max_steps"] == 120
    assert manifest_sha256(data) == manifest_sha256(manifest)
    changed = episode_manifest(SPEC.replace(seed=12), None, max_steps=120)
    assert manifest_sha256(changed) != manifest_sha256(manifest)
    with pytest.raises(EvalError):
        parse_manifest('{"schema": "other"}')


def test_judge_verdict_round_trip_and_rejections():
    verdict = JudgeVerdict("e1", "detector", "cube-on-target", "1.2.0", 0.9, True, "seen")
    parsed = parse_judge_verdict(verdict.to_json())
    assert parsed == verdict
    for bad in ({"quality": 1.2}, {"success": "yes"}, {"name": ""}, {"version": ""},
                {"judge": "robot"}):
        data = json.loads(verdict.to_json())
        data.update(bad)
        with pytest.raises(EvalError):
            parse_judge_verdict(json.dumps(data))


def test_contradictory_quality_and_success_are_refused():
    # q* = 0.8: success means q >= 0.8.
    assert contradiction(0.9, True, 0.8) == ""
    assert contradiction(0.5, False, 0.8) == ""
    assert contradiction(0.8, True, 0.8) == ""  # at the threshold is success
    assert "did not succeed" in contradiction(0.9, False, 0.8)
    assert "below the success threshold" in contradiction(0.79, True, 0.8)


def test_shipped_profiles_load_and_name_ros2_control_topics():
    franka = load_bridge_config(robot_profile_path("franka_ros2"))
    ur = load_bridge_config(robot_profile_path("ur_robot_driver"))
    twin = load_bridge_config(robot_profile_path("twin"))
    assert franka.topics.command == "/fr3_arm_controller/joint_trajectory"
    assert franka.robot.arm_joints[0] == "fr3_joint1" and franka.services.scene_reset == ""
    assert ur.topics.command == "/scaled_joint_trajectory_controller/joint_trajectory"
    assert ur.topics.wrench == "/force_torque_sensor_broadcaster/wrench"
    assert len(ur.robot.arm_joints) == 6 and ur.robot.kinematics == "ur5e"
    assert twin.robot.kind == "twin" and twin.loop.judge == "oracle"
    assert franka.loop.judge == ur.loop.judge == "technician"
    with pytest.raises(EvalError) as err:  # the oracle is never accepted for a real robot
        franka.replace(loop=LoopSettings(judge="oracle"))
    assert err.value.key == "loop.judge"
    with pytest.raises(EvalError):
        robot_profile_path("kuka")


def test_the_twin_sim_profile_is_the_twin_profile_on_its_simulated_clock():
    twin = load_bridge_config(robot_profile_path("twin"))
    twin_sim = load_bridge_config(robot_profile_path("twin_sim"))
    assert not twin.loop.use_sim_time and twin_sim.loop.use_sim_time
    # Nothing else differs but the scene reset's 30 s (the service call waits on the wall clock
    # while the robot's clock stands), so the two cannot drift apart.
    assert twin_sim.deadlines.service_s == 30.0
    assert twin_sim == twin.replace(
        loop=dataclasses.replace(twin.loop, use_sim_time=True),
        deadlines=dataclasses.replace(twin.deadlines, service_s=30.0),
    )
    # Real robots' profiles never run on a simulated clock.
    for name in ("franka_ros2", "ur_robot_driver"):
        assert not load_bridge_config(robot_profile_path(name)).loop.use_sim_time


def test_trajectory_rules_of_a_joint_trajectory_controller():
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    now = 1_000_000_000_000
    # The safe-stop hold: stamp 0, one point, positive time_from_start, arm joints only.
    assert trajectory_problem(arm, arm, 0, [0.1], [7], now) == ""
    assert "positive" in trajectory_problem(arm, arm, 0, [0.0], [7], now)
    assert "not controlled" in trajectory_problem([*arm, "panda_finger_joint1"], arm, 0, [0.1],
                                                  [8], now)
    assert "past" in trajectory_problem(arm, arm, now - 500_000_000, [0.1], [7], now)
    assert trajectory_problem(arm, arm, now - 50_000_000, [0.1], [7], now) == ""
    assert "increase" in trajectory_problem(arm, arm, 0, [0.2, 0.1], [7, 7], now)


def test_command_check_limits_computed_by_hand():
    robot = RobotSpec(workspace_min=(), workspace_max=(), kinematics="panda")
    home = (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785398)
    q0, v0, dt = home, [0.0] * 7, 0.02
    assert command_problem([home], q0, v0, dt, robot) == ""
    # Joint 1 upper limit 2.8973 rad.
    far = list(home)
    far[0] = 2.9
    assert "panda_joint1: target 2.9000 rad outside" in command_problem([far], far, v0, dt, robot)
    # Velocity: 0.05 rad in 20 ms = 2.5 rad/s > 2.175 rad/s (joint 1).
    fast = list(home)
    fast[0] = 0.05
    assert "velocity 2.500 rad/s" in command_problem([fast], q0, v0, dt, robot)
    # Acceleration: 0.004 rad in 20 ms = 0.2 rad/s from rest: 0.2 / 0.02 = 10 rad/s² — within
    # joint 1's 15 rad/s², above joint 2's 7.5 rad/s².
    step1 = list(home)
    step1[0] += 0.004
    assert command_problem([step1], q0, v0, dt, robot) == ""
    step2 = list(home)
    step2[1] += 0.004
    assert "panda_joint2: acceleration 10.00 rad/s²" in command_problem([step2], q0, v0, dt, robot)
    # A chunk is refused at its first bad step, whatever came before.
    chunk = [home, home, far]
    assert "(step 3 of 3)" in command_problem(chunk, q0, v0, dt, robot)


def test_safety_key_values_round_trip_to_the_same_event():
    event = SafetyEvent(
        kind="contact",
        t_s=1.25,
        step=62,
        contact_force_n=160.5,
        body_region="hands",
        contact_type="transient",
        contact_with="person",
        permitted=True,
        detail="brushed the operator's hand",
        source_rule="twin.force_limit",
    )
    values = safety_key_values(event, episode_id="e1", event_id="abc")
    reading = read_safety_status("safety/contact", 2, event.detail, values, t_s=9.0)
    assert reading is not None and reading.event_id == "abc" and reading.episode_id == "e1"
    assert reading.event == event  # t_s comes from the robot, not the bridge's clock


def test_safety_status_fallbacks():
    assert read_safety_status("motor/temperature", 2, "hot", [], t_s=0.0) is None
    cleared = read_safety_status("safety/protective_stop", 0, "cleared", [], t_s=0.0)
    assert cleared is not None and cleared.event is None
    odd = read_safety_status(
        "safety/contact", 2, "bump", [("contact_force_n", "lots"), ("zone", "B")], t_s=2.5
    )
    assert odd is not None and odd.event is not None
    assert odd.event.t_s == 2.5  # robot gave none: the bridge's clock
    assert odd.event.contact_force_n is None
    assert "contact_force_n=lots (unparsed)" in odd.event.detail
    assert "zone=B" in odd.event.detail
    negative = read_safety_status("safety/contact", 2, "", [("contact_force_n", "-3")], t_s=0.0)
    assert negative is not None and "invalid measurement" in negative.event.detail
