"""The one seam that picks an arm: `[robot] kinematics` on the real side and `[sim] robot` in the
simulation both go through `sim_suites.robot.arm_model` (a registered name or "module:factory").
"""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping
from real_bridge.observation import adapter_for
from real_bridge.robot_profile import RobotSpec
from sim_suites.env import PandaTaskEnv
from sim_suites.panda_kinematics import HOME_Q, PANDA_LAYOUT
from sim_suites.registration import task_env
from sim_suites.robot import SerialArm, arm_model

#: A Panda whose home posture has the shoulder lifted by 0.2 rad: a lab's own arm entry.
SHIFTED_HOME = HOME_Q + np.array([0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0])


def shifted_panda() -> SerialArm:
    """The Panda with another home posture (given to the seam as "module:factory")."""
    return SerialArm(dataclasses.replace(PANDA_LAYOUT, name="shifted", home_q=SHIFTED_HOME))


def not_an_arm() -> str:
    return "a string is not an arm"


FACTORY = f"{__name__}:shifted_panda"


def test_unknown_arm_names_are_a_project_error() -> None:
    with pytest.raises(EvalError, match=r"'kuka' is not a known arm .*panda"):
        arm_model("kuka")
    with pytest.raises(EvalError, match="'kuka' is not a known arm"):
        PandaTaskEnv("pick_place/cube_center", robot="kuka")
    with pytest.raises(EvalError, match=r"robot\.kinematics"):
        RobotSpec(kinematics="kuka")
    with pytest.raises(EvalError, match="not_there"):
        arm_model("tests.not_there:factory")
    with pytest.raises(EvalError, match=r"gave a str, not a sim_suites\.robot\.SerialArm"):
        arm_model(f"{__name__}:not_an_arm")
    # The mobile families run the Panda on its base: another arm is refused, not ignored.
    with pytest.raises(EvalError, match=r"mobile families run the Panda on its base, not 'ur5e'"):
        task_env("mobile_pick_place/cube_across", robot="ur5e")


def test_a_module_factory_arm_reaches_the_adapter_and_the_simulation() -> None:
    arm = arm_model(FACTORY)
    assert arm.name == "shifted" and np.array_equal(arm.home_q, SHIFTED_HOME)
    # Real side: the adapter uses the factory's model for the TCP and the IK.
    adapter = adapter_for(RobotSpec(kinematics=FACTORY), 0.02)
    assert adapter.kin is arm
    q = np.concatenate([SHIFTED_HOME, [0.04, 0.04]])
    adapter.reset(q[:7], q[7:], None)
    obs = adapter.observe(q, np.zeros(9), None, 0.0, False)
    np.testing.assert_allclose(obs["tcp_pos"], arm.forward(SHIFTED_HOME)[0])
    # 0.2 rad more on joint 2 (at q1 = 0 its axis is the world y axis through the shoulder,
    # 0.333 m above the base: the Panda's d1) swings the TCP on a circle about that axis: y
    # stays, the distance r from the axis stays, and the TCP moves by the chord 2 r sin(0.1).
    home_tcp = arm_model("panda").forward(HOME_Q)[0]
    shoulder = np.array([0.0, 0.0, 0.333])
    r = float(np.hypot(*(home_tcp - shoulder)[[0, 2]]))
    moved = obs["tcp_pos"]
    assert moved[1] == pytest.approx(home_tcp[1], abs=1e-9)
    assert float(np.hypot(*(moved - shoulder)[[0, 2]])) == pytest.approx(r, abs=1e-9)
    assert float(np.linalg.norm(moved - home_tcp)) == pytest.approx(2 * r * np.sin(0.1), abs=1e-9)
    # Simulation: an episode starts from the factory arm's home posture.
    env = PandaTaskEnv("pick_place/cube_center", robot=FACTORY, max_steps=5)
    try:
        obs, _ = env.reset(seed=1)
        np.testing.assert_allclose(obs["joint_pos"][:7], SHIFTED_HOME, atol=1e-3)
    finally:
        env.close()


def test_the_adapter_checks_the_arm_against_the_profile() -> None:
    with pytest.raises(EvalError, match="has 7 joints, the profile's arm_joints name 6"):
        adapter_for(
            RobotSpec(
                kinematics="panda",
                arm_joints=tuple(f"j{i}" for i in range(6)),
                position_lower=(-1.0,) * 6,
                position_upper=(1.0,) * 6,
                velocity_max=(1.0,) * 6,
                acceleration_max=(1.0,) * 6,
                home=(0.0,) * 6,
            ),
            0.02,
        )


def test_without_kinematics_only_joint_space_policies_run() -> None:
    robot = RobotSpec(kinematics="", workspace_min=(), workspace_max=())
    adapter = adapter_for(robot, 0.02)
    q = np.concatenate([HOME_Q, [0.04, 0.04]])
    adapter.reset(q[:7], q[7:], None)
    obs = adapter.observe(q, np.zeros(9), None, 0.0, False)
    assert sorted(obs) == ["joint_pos", "joint_vel"]
    target, _ = adapter.targets(HOME_Q, q, joint_space=True)
    np.testing.assert_array_equal(target, [HOME_Q])
    with pytest.raises(EvalError, match="need the arm's kinematics"):
        adapter.targets(np.zeros(4), q, joint_space=False)


def test_a_protocol_names_the_simulated_arm_and_the_robot_profile() -> None:
    data = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    plain = protocol_from_mapping(data)
    assert (plain.sim_robot, plain.real_profile) == ("panda", "")
    # The defaults stay out of the hash: protocols that do not name them keep theirs.
    data["sim"]["robot"], data["real"]["profile"] = "panda", ""
    assert protocol_from_mapping(data).protocol_hash == plain.protocol_hash
    data["sim"]["robot"], data["real"]["profile"] = "ur5e", "ur_robot_driver"
    ur = protocol_from_mapping(data)
    assert (ur.sim_robot, ur.real_profile) == ("ur5e", "ur_robot_driver")
    assert ur.protocol_hash != plain.protocol_hash
    data["sim"]["robot"] = FACTORY  # a lab's own arm by import path
    assert protocol_from_mapping(data).sim_robot == FACTORY
    data["sim"]["robot"] = "kuka"
    with pytest.raises(EvalError, match=r"sim\.robot.*'kuka' is not a registered arm"):
        protocol_from_mapping(data)
