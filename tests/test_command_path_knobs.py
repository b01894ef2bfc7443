"""The command path's DR knobs act on the sim half: actuator delay, actuator bandwidth and the
objects' contact softness (values by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from sim_suites.env import PandaTaskEnv

TASK = "pick_place/cube_center"
DOWN = np.array([0.0, 0.0, -1.0, 1.0], dtype=np.float32)


def _first_motion_step(env: PandaTaskEnv) -> int:
    """The first control step after which the arm has moved 0.1 mrad from home."""
    obs, _ = env.reset(seed=0)
    q0 = obs["joint_pos"][:7].copy()
    for k in range(1, 20):
        obs, *_ = env.step(DOWN)
        if np.max(np.abs(obs["joint_pos"][:7] - q0)) > 1e-4:
            return k
    return -1


def test_actuator_delay_holds_commands_back_by_whole_control_periods():
    # 0 s: the first command moves the arm in its own period (step 1); 0.06 s = 3 periods of
    # 20 ms: the first command reaches the follower at t = 0.06 s, i.e. in step 4.
    nominal = PandaTaskEnv(TASK, "mujoco", randomization={})
    delayed = PandaTaskEnv(TASK, "mujoco", randomization={"actuator_delay_s": (0.06, 0.06)})
    assert _first_motion_step(nominal) == 1
    assert _first_motion_step(delayed) == 4
    assert delayed.command_delay_s == pytest.approx(0.06)


def test_actuator_bandwidth_and_contact_softness_reach_the_robot_and_the_physics():
    env = PandaTaskEnv(
        TASK,
        "mujoco",
        randomization={
            "actuator_bandwidth_hz": (8.0, 8.0),
            "contact_timeconst_s": (0.08, 0.08),
        },
    )
    env.reset(seed=0)
    assert env.follower.bandwidth_hz == 8.0
    geoms = env.backend._object_geoms
    assert np.all(env.backend.model.geom_solref[geoms, 0] == 0.08)
    # Back to the engine's own contacts (MuJoCo's default 0.02 s) when the knob is off.
    env.configure(randomization={})
    env.reset(seed=0)
    assert np.all(env.backend.model.geom_solref[geoms, 0] == 0.02)
    assert env.follower.bandwidth_hz == 0.0
