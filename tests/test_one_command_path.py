"""One command path in both halves of a pair: the sim episode, the in-process robot, the ROS
twin's physics and the calibration replay run the same `sim_suites.command_path` objects, and a
command stream the sim episode produced, sent to the in-process robot with no reality gap,
moves the robot's joints exactly as it moved the sim's (to 1e-6 rad at every control tick of
the robot's own clock)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import episode_seeds
from real_bridge.bridge_config import load_bridge_config, profile_path
from real_bridge.calibration.replay import EpisodeReplay
from real_bridge.interface import episode_manifest
from real_bridge.mujoco_robot import MujocoRobot
from real_bridge.observation import adapter_for
from real_bridge.robot import JointCommand
from real_bridge.twin.settings import TwinGap, TwinSettings
from real_bridge.twin.sim_plant import SimSuitesPlant
from sim_suites.command_path import ArmCommandPath, JointFollower
from sim_suites.env import PandaTaskEnv
from sim_suites.policies import load_policy
from sim_suites.scenes import scene_ranges

TASK = "pick_place/cube_center"
SEED = 4
DT = 0.02


def _spec() -> EpisodeSpec:
    return EpisodeSpec(
        episode_id="one-path-real-mujoco_robot-a1",
        pair_id="one-path",
        side="real",
        family="pick_place",
        task_id=TASK,
        seed=SEED,
        drift_name="nominal",
        engine="mujoco_robot",
        target_quality=0.8,
        policy="sim_suites.policies:scripted",
    )


def test_every_half_runs_the_same_command_path_objects():
    settings = TwinSettings(gap=TwinGap.none())
    env = PandaTaskEnv(TASK, "mujoco", randomization={})
    plant = SimSuitesPlant(settings)  # the ROS twin's and the in-process robot's physics
    replay = EpisodeReplay(TASK)
    adapter = adapter_for(load_bridge_config(profile_path("twin")).robot, DT)
    try:
        followers = (env.follower, plant.follower, replay.env.follower)
        assert all(type(f) is JointFollower for f in followers)
        assert type(env.command_path) is ArmCommandPath and type(adapter.path) is ArmCommandPath
    finally:
        env.close()
        plant.close()
        replay.close()


def test_a_sim_command_stream_moves_the_in_process_robot_exactly_as_the_sim():
    spec = _spec()
    manifest = episode_manifest(spec)
    # The pair's scene: the placement ranges the robot's reset station takes from the manifest.
    env = PandaTaskEnv(TASK, "mujoco", randomization=scene_ranges(manifest["randomization"]))
    policy = load_policy("sim_suites.policies:scripted", TASK)
    policy.reset(SEED)
    obs, _ = env.reset(seed=SEED, options={"scene_seed": episode_seeds(SEED).scene})
    # One period without a command first (the robot needs a heartbeat before it follows).
    env.robot_step()
    sent: list[tuple[np.ndarray, float, float]] = []
    sim_q: list[np.ndarray] = []
    original = env.send_joint_command

    def record(target: np.ndarray, duration_s: float, finger: float) -> None:
        sent.append((np.array(target), duration_s, finger))
        original(target, duration_s, finger)

    env.send_joint_command = record  # type: ignore[method-assign]
    for _ in range(150):  # approach, grasp and lift: contacts with the cube and the table
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        sim_q.append(obs["joint_pos"].copy())
        if terminated or truncated:
            break
    env.close()
    assert obs["grasped"][0] > 0.5  # the stream includes a grasp

    robot = MujocoRobot(settings=TwinSettings(gap=TwinGap.none()))
    try:
        robot.connect()
        ok, message = robot.reset_scene(manifest, 5.0)
        assert ok, message
        robot.sleep(DT)
        robot_q = []
        for target, duration, finger in sent:
            robot.send_action(JointCommand(target, duration, gripper_m=finger))
            robot.sleep(DT)
            robot_q.append(robot.get_observation().position.copy())
    finally:
        robot.close()
    # Same physics, same follower, same timing: equal to float rounding (1e-6 rad).
    assert len(robot_q) == len(sim_q)
    assert np.max(np.abs(np.array(robot_q) - np.array(sim_q))) < 1e-6
