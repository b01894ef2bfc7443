"""The one command path (`sim_suites.command_path`): the limiter's limits, braking and
anti-windup (property tests), the gripper drive's rate, the follower's servo law, and the net
external force the safety monitor stops on — values by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_suites.command_path import (
    SETPOINT_LEAD_MAX_M,
    ArmCommandPath,
    CommandQueue,
    JointFollower,
    JointLimiter,
    JointLimits,
    braking_speed,
    first_order_alpha,
)
from sim_suites.panda_kinematics import HOME_Q, PANDA_ACCELERATION_MAX, panda_kinematics

DT = 0.02
KIN = panda_kinematics()
LIMITS = JointLimits.of_arm(KIN)
EPS = 1e-9


def test_the_panda_limits_are_the_published_ones_with_the_margin():
    # Franka's datasheet: q̇_max 2.175 (joints 1–4) and 2.61 rad/s (5–7); q̈_max 15, 7.5, 10,
    # 12.5, 15, 20, 20 rad/s²; planned with 0.9 of each.
    assert LIMITS.velocity_max == pytest.approx(0.9 * np.array([2.175] * 4 + [2.61] * 3))
    assert LIMITS.acceleration_max == pytest.approx(
        0.9 * np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
    )
    from real_bridge.robot_profile import PANDA_ACCELERATION

    assert tuple(PANDA_ACCELERATION_MAX) == PANDA_ACCELERATION  # one set of numbers


def test_braking_speed_by_hand():
    # a = 10 rad/s², Δt = 0.02 s, d = 0.1 rad: room = 0.1 − 10·0.0004/8 = 0.0995;
    # v = 10·(√(0.0001 + 2·0.0995/10) − 0.01) = 10·(√0.0200 − 0.01) = 1.3142 rad/s.
    v = braking_speed(np.array([0.1]), np.array([10.0]), DT)
    assert v[0] == pytest.approx(10 * (math.sqrt(0.0001 + 0.0199) - 0.01), rel=1e-9)
    assert braking_speed(np.array([-1.0]), np.array([10.0]), DT)[0] == 0.0


def _stop_distance(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Distance covered braking from v at a per step of DT (the step at v included), by sum."""
    out = np.zeros_like(v)
    speed = np.abs(v).copy()
    while np.any(speed > 0):
        out += speed * DT
        speed = np.maximum(0.0, speed - a * DT)
    return out


states = st.tuples(
    st.lists(st.floats(-1.0, 1.0), min_size=7, max_size=7),
    st.lists(st.floats(-1.0, 1.0), min_size=7, max_size=7),
    st.lists(st.floats(-1.0, 1.0), min_size=7, max_size=7),
)


def _admissible(q_frac, v_frac):
    """A start inside the limits from which braking at a stops inside them."""
    lo, hi = LIMITS.lower, LIMITS.upper
    q = lo + (np.asarray(q_frac) + 1.0) / 2.0 * (hi - lo)
    v = np.asarray(v_frac) * LIMITS.velocity_max
    a = LIMITS.acceleration_max
    room = np.where(v > 0, hi - q, q - lo)
    v = np.where(_stop_distance(v, a) > room, 0.0, v)
    return q, v


@settings(max_examples=60, deadline=None)
@given(states, st.integers(1, 60))
def test_the_limiter_never_exceeds_its_limits_and_can_always_stop_inside_the_joint_limits(
    state, steps
):
    q_frac, v_frac, _ = state
    q, v = _admissible(q_frac, v_frac)
    limiter = JointLimiter(LIMITS, DT)
    limiter.reset(q, v)
    rng = np.random.default_rng(steps)
    for _ in range(steps):
        # Goals anywhere, even far beyond the joint limits, jumping every step.
        goal = LIMITS.lower - 1.0 + rng.random(7) * (LIMITS.upper - LIMITS.lower + 2.0)
        prev_q, prev_v = limiter.sent_q.copy(), limiter.sent_v.copy()
        target = limiter.step(goal)
        vel = (target - prev_q) / DT
        assert np.all(np.abs(vel) <= LIMITS.velocity_max + EPS)
        assert np.all(np.abs(vel - prev_v) <= LIMITS.acceleration_max * DT + EPS)
        assert np.all(target >= LIMITS.lower - EPS) and np.all(target <= LIMITS.upper + EPS)
        # From every commanded state, braking at the limit stops inside the joint limits.
        room = np.where(vel > 0, LIMITS.upper - target, target - LIMITS.lower)
        assert np.all(_stop_distance(vel, LIMITS.acceleration_max) - np.abs(vel) * DT <= room + 1e-9)


@settings(max_examples=60, deadline=None)
@given(states)
def test_the_limiter_never_passes_a_goal_it_can_stop_at(state):
    q_frac, v_frac, goal_frac = state
    q, v = _admissible(q_frac, v_frac)
    lo, hi = LIMITS.lower, LIMITS.upper
    goal = lo + (np.asarray(goal_frac) + 1.0) / 2.0 * (hi - lo)
    a = LIMITS.acceleration_max
    # Only joints moving toward the goal that can still brake before it (or at rest).
    toward = np.sign(v) == np.sign(goal - q)
    v = np.where(toward & (_stop_distance(v, a) <= np.abs(goal - q)), v, 0.0)
    limiter = JointLimiter(LIMITS, DT)
    limiter.reset(q, v)
    side = np.sign(goal - q)
    for _ in range(400):
        target = limiter.step(goal)
        assert np.all(side * (goal - target) >= -1e-9)  # never beyond the goal
    assert target == pytest.approx(goal, abs=1e-6)  # and it gets there


def test_a_reversal_brakes_at_once_instead_of_running_on():
    # Joint 4 moving at 1 rad/s toward a goal that jumps behind it: the old clip kept rising
    # until the velocity clip caught up; the braking limiter's next step slows by a·Δt at once.
    limiter = JointLimiter(LIMITS, DT)
    v0 = np.zeros(7)
    v0[3] = 1.0
    limiter.reset(HOME_Q, v0)
    limiter.step(HOME_Q - 0.5)
    assert limiter.sent_v[3] == pytest.approx(1.0 - LIMITS.acceleration_max[3] * DT)


def test_the_command_path_keeps_its_setpoint_within_the_lead_of_what_it_sent():
    path = ArmCommandPath(KIN, LIMITS, DT)
    path.reset(HOME_Q)
    q = HOME_Q.copy()
    # Full speed down while the arm (measured) stays put: the limiter and the leash hold back.
    for _ in range(30):
        command = path.step(np.array([0.0, 0.0, -1.0, 1.0]), q)
        reached = KIN.forward(command.target)[0]
        assert np.linalg.norm(command.tcp_target - reached) <= SETPOINT_LEAD_MAX_M + 1e-9
        assert np.all(np.abs(command.target - path.limiter.sent_q) <= 1e-12)


def test_the_gripper_drive_moves_at_its_rated_speed():
    # URDF finger speed 0.2 m/s: per 20 ms update 4 mm; from 40 mm to 0 takes 10 updates.
    follower = JointFollower(KIN)
    follower.reset(HOME_Q, finger=0.04)
    follower.set_finger(0.0)
    rots, origins = KIN.link_frames(HOME_Q)
    fingers = [follower.command(DT, rots, origins).finger for _ in range(11)]
    assert fingers[0] == pytest.approx(0.036) and fingers[4] == pytest.approx(0.020)
    assert fingers[9] == pytest.approx(0.0, abs=1e-12) and fingers[10] == 0.0


def test_the_follower_interpolates_filters_and_feeds_gravity_forward():
    # 8 Hz at 20 ms: α = 1 − exp(−2π·8·0.02) = 0.634068. A target 0.1 rad away on joint 1 over
    # two periods: ramp 0.05 after the first update, set-point α·0.05 = 0.0317034.
    follower = JointFollower(KIN, bandwidth_hz=8.0)
    follower.reset(HOME_Q)
    goal = HOME_Q.copy()
    goal[0] += 0.1
    follower.set_target(goal, 2 * DT)
    rots, origins = KIN.link_frames(HOME_Q)
    command = follower.command(DT, rots, origins)
    assert first_order_alpha(8.0, DT) == pytest.approx(0.634068, abs=1e-6)
    assert command.q_des[0] - HOME_Q[0] == pytest.approx(0.0317034, abs=1e-6)
    from sim_suites.panda_kinematics import ARM_KP, ARM_KV

    ff = KIN.gravity_from_frames(rots, origins) + ARM_KV * (command.q_des - HOME_Q) / DT
    assert command.arm_cmd == pytest.approx(command.q_des + ff / ARM_KP)


def test_commands_wait_for_their_delay_in_order():
    queue: CommandQueue[str] = CommandQueue()
    queue.push(0.02, "a")
    queue.push(0.02 + 1e-12, "b")  # due at the same instant up to rounding
    queue.push(0.04, "c")
    assert list(queue.due(0.0)) == []
    assert list(queue.due(0.02)) == ["a", "b"]
    assert list(queue.due(0.06)) == ["c"] and not queue


def test_the_net_external_force_cancels_a_grip_and_counts_the_table_through_the_hand():
    """Values by hand through the MuJoCo backend's per-contact conversion (contact frame rows:
    normal from geom1 to geom2, then the tangents; the force acts on geom2, on geom1 opposite)."""
    from sim_suites.engines.mujoco_contacts import force_on_robot

    along_y = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    against_y = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    # Left pad (geom1) presses the part at +y with 20 N; right pad (geom1) at −y with 20 N:
    # the pads feel −20 y and +20 y — the wrist reads 0 N.
    left = force_on_robot(along_y, np.array([20.0, 0.0, 0.0]), robot_is_geom2=False)
    right = force_on_robot(against_y, np.array([20.0, 0.0, 0.0]), robot_is_geom2=False)
    assert left == pytest.approx([0.0, -20.0, 0.0]) and right == pytest.approx([0.0, 20.0, 0.0])
    assert np.linalg.norm(left + right) == pytest.approx(0.0, abs=1e-12)
    # The table (geom1) pushes the hand (geom2) up with 150 N: 150 N at the wrist.
    up = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    table = force_on_robot(up, np.array([150.0, 0.0, 0.0]), robot_is_geom2=True)
    assert table == pytest.approx([0.0, 0.0, 150.0])
    # With both pads gripping, the wrist still reads the table's 150 N alone.
    assert np.linalg.norm(left + right + table) == pytest.approx(150.0)
    # The backend sums a physics step's contacts in one go: the same 150 N straight up.
    from sim_suites.engines.mujoco_contacts import net_force_on_robot

    frames = np.stack([along_y.ravel(), against_y.ravel(), up.ravel()])
    forces = np.array([[20.0, 0.0, 0.0], [20.0, 0.0, 0.0], [150.0, 0.0, 0.0]])
    net = net_force_on_robot(frames, forces, [False, False, True])
    assert net == pytest.approx([0.0, 0.0, 150.0])
    # A tangential 5 N along the first tangent (+z) on the left pad (geom1) pulls it down 5 N.
    forces[0, 1] = 5.0
    assert net_force_on_robot(frames, forces, [False, False, True]) == pytest.approx([0, 0, 145])


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_a_held_part_weighs_on_the_wrist_while_the_grip_cancels(engine):
    """Lift the cube with the scripted policy: the fingers squeeze it with ~2 × 20 N (the pair's
    summed normal force), the wrist reads only its weight, m·g (the 0.1 kg cube: 0.981 N)."""
    from sim_suites.env import PandaTaskEnv
    from sim_suites.policies import scripted

    env = PandaTaskEnv("pick_place/cube_center", engine, randomization={})
    obs, _ = env.reset(seed=0)
    policy = scripted("pick_place/cube_center")
    policy.reset()
    mass = 0.1  # the family's default cube (`sim_suites.families.pick_place`)
    held = []
    for _ in range(400):
        obs, _, term, trunc, info = env.step(policy.act(obs))
        lifted = obs["object_pos"][2] > env.object_start[2] + 0.03
        if info["grasped"] and lifted:
            grip = env.backend.contact_forces().get(("robot", "cube"), 0.0)
            held.append((grip, float(np.linalg.norm(env.backend.robot_external_force()))))
        if term or trunc:
            break
    assert len(held) > 20, "the script never carried the cube"
    grip, wrist = np.median(np.array(held), axis=0)
    assert grip > 30.0  # the squeeze: two pads near their 20 N each
    # The wrist reads the weight m·g (0.981 N for the 0.1 kg cube) plus what carrying it
    # accelerates — far from the 40 N squeeze a scalar sum of the pads' forces would count.
    assert wrist == pytest.approx(mass * 9.81, rel=0.3)
