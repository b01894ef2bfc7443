"""The second arm end to end: a UR5e with a parallel gripper, from its model (Universal Robots'
DH parameters) through both engines to a pair on the in-process robot and on the ROS twin with the
shipped `ur_robot_driver` profile, named in a protocol by `[sim] robot` and `[real] profile`.

Expected poses are worked out by hand from the DH table in `sim_suites.ur5e_description`.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import mujoco
import numpy as np
import pybullet
import pytest
from gymnasium.utils.env_checker import check_env
from pybullet_utils import bullet_client

from embodied_eval.protocol.reader import load_protocol
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from real_bridge.bridge_config import load_bridge_config, profile_path
from sim_suites.env import PandaTaskEnv
from sim_suites.policies import load_policy
from sim_suites.robot import arm_model
from sim_suites.tasks.catalog import task_catalog
from sim_suites.ur5e_description import ARM_JOINTS, ur5e_urdf_file, ur5e_urdf_text
from sim_suites.ur5e_kinematics import HOME_Q

pytestmark = pytest.mark.timeout(300)

#: DH lengths, m (Universal Robots' UR5e table), and the TCP 0.125 m out of the flange.
D1, A2, A3, D4, D5, D6, TCP = 0.1625, -0.425, -0.3922, 0.1333, 0.0997, 0.0996, 0.125
UR = arm_model("ur5e")


def test_the_model_is_universal_robots_dh_table() -> None:
    # q = 0: the arm lies along −x; the flange at (a2 + a3, −(d4 + d6), d1 − d5), its tool axis
    # (DH z6) along −y, so the TCP is 0.125 m further along −y.
    tcp, rot = UR.forward(np.zeros(6))
    np.testing.assert_allclose(tcp, [A2 + A3, -(D4 + D6 + TCP), D1 - D5], atol=1e-12)
    np.testing.assert_allclose(rot[:, 2], [0.0, -1.0, 0.0], atol=1e-8)
    # Upper arm and forearm straight up (q2 = q4 = −π/2): the wrist's d5 adds to the height.
    tcp, _ = UR.forward(np.array([0.0, -np.pi / 2, 0.0, -np.pi / 2, 0.0, 0.0]))
    np.testing.assert_allclose(tcp, [0.0, -(D4 + D6 + TCP), D1 - A2 - A3 + D5], atol=1e-12)
    # The published masses (17.7 kg of arm links) plus the 0.925 kg gripper ride on the joints.
    assert UR.link_mass.sum() == pytest.approx(
        3.761 + 8.058 + 2.846 + 1.37 + 1.3 + 0.365 + 0.925, abs=1e-12
    )
    # Home: the gripper points straight down, the TCP where the Panda's home puts it.
    tcp, rot = UR.forward(HOME_Q)
    np.testing.assert_allclose(rot[:, 2], [0.0, 0.0, -1.0], atol=1e-3)
    np.testing.assert_allclose(
        tcp, arm_model("panda").forward(arm_model("panda").home_q)[0], atol=2e-4
    )


def test_both_engines_load_the_same_ur5e() -> None:
    model = mujoco.MjSpec.from_string(ur5e_urdf_text()).compile()
    data = mujoco.MjData(model)
    client = bullet_client.BulletClient(connection_mode=pybullet.DIRECT)
    try:
        robot = client.loadURDF(str(ur5e_urdf_file(True)), useFixedBase=True)
        joints = {
            client.getJointInfo(robot, j)[1].decode(): j for j in range(client.getNumJoints(robot))
        }
        links = {
            client.getJointInfo(robot, j)[12].decode(): j for j in range(client.getNumJoints(robot))
        }
        last = model.body(UR.last_link).id
        for q in np.random.default_rng(0).uniform(UR.lower / 2, UR.upper / 2, size=(5, 6)):
            data.qpos[:6] = q
            mujoco.mj_forward(model, data)
            for name, value in zip(ARM_JOINTS, q, strict=True):
                client.resetJointState(robot, joints[name], value)
            tcp = UR.forward(q)[0]
            mj_tcp = data.xpos[last] + data.xmat[last].reshape(3, 3) @ UR.link7_to_tcp[:3, 3]
            pb_tcp = client.getLinkState(robot, links["ur5e_tcp"], computeForwardKinematics=True)[4]
            np.testing.assert_allclose(tcp, mj_tcp, atol=1e-9)
            np.testing.assert_allclose(tcp, pb_tcp, atol=1e-6)
            # The controller's gravity model is MuJoCo's bias force at rest (fingers closed:
            # the two fingers' masses sit symmetrically about the hand's axis).
            np.testing.assert_allclose(UR.gravity_torque(q), data.qfrc_bias[:6], atol=1e-9)
    finally:
        client.disconnect()


def test_check_env_and_determinism_in_mujoco() -> None:
    env = PandaTaskEnv("pick_place/cube_center", "mujoco", robot="ur5e", max_steps=60)
    try:
        check_env(env, skip_render_check=True)
        assert env.observation_space["joint_pos"].shape == (8,)  # 6 arm joints, 2 fingers
        runs = []
        for _ in range(2):
            policy = load_policy("sim_suites.policies:scripted", "pick_place/cube_center")
            policy.reset(5)
            obs, _ = env.reset(seed=5)
            trace = [obs["joint_pos"]]
            for _ in range(60):
                obs, *_ = env.step(policy.act(obs))
                trace.append(obs["joint_pos"])
            runs.append(np.array(trace))
        np.testing.assert_array_equal(runs[0], runs[1])
        assert np.abs(runs[0][-1, :6] - HOME_Q).max() > 0.05  # the arm moved
    finally:
        env.close()


def _family_successes(family: str) -> int:
    wins = 0
    for task in task_catalog()[family]:
        env = PandaTaskEnv(task, "mujoco", robot="ur5e")
        try:
            policy = load_policy("sim_suites.policies:scripted", task)
            policy.reset(0)
            obs, info = env.reset(seed=0)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(policy.act(obs))
                done = terminated or truncated
            wins += bool(info["is_success"])
        finally:
            env.close()
    return wins


def test_the_reference_policy_picks_places_and_pushes_with_the_ur5e() -> None:
    # Nominal scenes (no randomization), the ten instances of each family.
    assert _family_successes("pick_place") >= 8
    assert _family_successes("push") >= 8


# ---------------------------------------------------------------------- pairs


def ur_twin_profile(folder: Path) -> Path:
    """The shipped ur_robot_driver profile as the twin plays it: its topics, joints, limits and
    kinematics unchanged; the twin's oracle, simulated clock, reset station and tracker on."""
    text = profile_path("ur_robot_driver").read_text(encoding="utf-8")
    for old, new in (
        ('kind = "ur"', 'kind = "twin"'),
        ('judge = "technician"', 'judge = "oracle"\nuse_sim_time = true'),
        ('scene_reset = ""', 'scene_reset = "/scene/reset"'),
        ('object_pose = ""', 'object_pose = "/object_pose"'),
        ('discovery = "system"', 'discovery = "loopback"'),
    ):
        assert old in text
        text = text.replace(old, new)
    path = folder / "ur5e-twin.toml"
    path.write_text(text + "\n[deadlines]\nservice_s = 30.0\n", encoding="utf-8")
    shipped, played = load_bridge_config(profile_path("ur_robot_driver")), load_bridge_config(path)
    assert dataclasses.replace(played.topics, object_pose="") == shipped.topics
    assert played.robot == dataclasses.replace(shipped.robot, kind="twin")
    return path


def ur_protocol(folder: Path, backend: str) -> Path:
    """One pick_place pair on the UR5e: `[sim] robot` and `[real] profile` (a file beside it)."""
    ur_twin_profile(folder)
    path = folder / "ur5e-pair.toml"
    path.write_text(
        f"""
[protocol]
name = "ur5e-pair"
version = "1"
base_seed = 7
m_min = 1
[window]
id = "w-ur5e"
start = 2026-11-01
end = 2026-11-30
[battery.pick_place]
instances = ["pick_place/cube_center"]
[sampling]
real_fraction = 1.0
[sim]
engines = ["mujoco"]
robot = "ur5e"
[real]
backend = "{backend}"
profile = "ur5e-twin.toml"
robot_id = "ur5e-twin-1"
""",
        encoding="utf-8",
    )
    return path


def _pair(tmp_path: Path, backend: str, **robot_options: object) -> dict[str, tuple]:
    protocol = load_protocol(ur_protocol(tmp_path, backend))
    assert protocol.sim_robot == "ur5e"
    assert protocol.real_profile == str(tmp_path / "ur5e-twin.toml")
    sides = ("sim", "real")
    options = RunOptions(sides=sides, executor="sequential", robot_options=robot_options)
    summary = run_trials(protocol, options, db_path=tmp_path / "s.db", out_dir=tmp_path / "run")
    assert summary.complete and not summary.real_error
    with Store(tmp_path / "s.db") as store:
        return {
            e.side: (e.engine, e.status, e.success, e.quality, e.pair_id) for e in store.episodes()
        }


def test_one_pair_on_the_in_process_robot(tmp_path) -> None:
    episodes = _pair(tmp_path, "mujoco")
    assert episodes["sim"][:3] == ("mujoco", "ok", True)
    assert episodes["real"][:3] == ("mujoco_robot", "ok", True)
    assert episodes["sim"][4] == episodes["real"][4]  # one pair


_domains = itertools.count(171)


@pytest.mark.ros
def test_one_pair_on_the_ros_twin_with_the_ur_robot_driver_profile(tmp_path) -> None:
    from real_bridge.discovery import domain_id_for_test
    from real_bridge.twin.process import TwinProcess

    domain = domain_id_for_test(next(_domains))
    profile = ur_twin_profile(tmp_path)
    # The twin plays the profile's arm and publishes its joint names (the harness reads the
    # joint states by the profile's names: a Panda twin would leave it without any).
    with TwinProcess(domain, sim_time=True, config=str(profile)):
        episodes = _pair(tmp_path, "ros2", domain_id=domain)
    assert episodes["sim"][:3] == ("mujoco", "ok", True)
    assert episodes["real"][:3] == ("ros2", "ok", True)
    assert episodes["sim"][4] == episodes["real"][4]
