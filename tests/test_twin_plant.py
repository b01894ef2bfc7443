"""The twin's physics (no ROS): reality gap on top of drift, per-physics-step samples, holding."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec
from real_bridge.interface import episode_manifest
from real_bridge.twin.settings import TwinGap, TwinSettings
from real_bridge.twin.sim_plant import SimSuitesPlant

pytestmark = pytest.mark.timeout(120)


def spec(**changes):
    base = EpisodeSpec(
        episode_id="p-real-ros2-a1",
        pair_id="p",
        side="real",
        family="push",
        task_id="push/block_left",
        seed=5,
        drift_name="worn",
        drift={"payload_kg": 0.1, "friction_scale": 0.9},
        engine="ros2",
    )
    return base.replace(**changes)


@pytest.fixture(scope="module")
def plant():
    p = SimSuitesPlant(TwinSettings())
    yield p
    p.close()


def test_gap_is_applied_on_top_of_the_drift(plant):
    plant.reset_scene(spec(), episode_manifest(spec(), None, max_steps=60))
    physics = plant.env.params.physics
    # Default gap: friction ×0.85, link mass ×1.05, object mass ×1.10, payload +0.05 kg,
    # servo gain ×0.9, joint damping ×1.3.
    assert physics.friction_scale == pytest.approx(0.9 * 0.85)  # drift × gap = 0.765
    assert physics.payload_kg == pytest.approx(0.1 + 0.05)  # drift + gap = 0.15 kg
    assert physics.link_mass_scale == pytest.approx(1.05)
    assert physics.object_mass_scale == pytest.approx(1.10)
    assert physics.actuator_gain_scale == pytest.approx(0.9)
    assert physics.joint_damping_scale == pytest.approx(1.3)
    # Softer contacts: object contacts with a 40 ms solref time constant (MuJoCo's default, which
    # the sim uses, is 20 ms: the reference stiffness 1 / τ² is 4× lower).
    backend = plant._inner_backend
    assert np.all(backend.model.geom_solref[backend._object_geoms] == [0.04, 1.0])
    assert plant.contact_model == {"solref": [0.04, 1.0]}
    # Delay and noise are applied on the wire by the node, not inside the scene.
    assert plant.env.params.action_latency_steps == 0


def test_one_sample_per_physics_step(plant):
    plant.reset_scene(spec(), episode_manifest(spec(), None, max_steps=20))
    plant.step_physics()
    # One control step at 50 Hz with 2 ms physics: 1 / (50 · 0.002) = 10 sub-steps; one was
    # played out, nine are queued.
    assert len(plant._buffer) == 9


def test_follows_a_trajectory_clipped_to_the_limits_and_holds(plant):
    plant.reset_scene(spec(), episode_manifest(spec(), None, max_steps=20))
    q0, _, _ = plant.joint_state()
    applied = plant.set_arm_target(np.array([5.0, *q0[1:7]]), 0.5)
    assert applied[0] == 2.9671  # panda_joint1 upper limit in the URDF
    for _ in range(200):  # 0.4 s
        plant.step_physics()
    q, _, _ = plant.joint_state()
    assert q[0] > q0[0] + 0.1  # moving towards the clipped target
    plant.hold_here()
    held = plant.joint_state()[0][0]
    setpoint = plant.follower.q_des.copy()
    for _ in range(500):
        plant.step_physics()
    # A hold freezes the servo set-point (the fast swing had carried the arm a little past it;
    # it settles back onto it) — the controller keeps following, and the set-point stays put.
    np.testing.assert_array_equal(plant.follower.q_des, setpoint)
    assert abs(plant.joint_state()[0][0] - setpoint[0]) < 0.01
    assert abs(plant.joint_state()[0][0] - held) < 0.1


def test_first_order_bandwidth_factor_by_hand():
    from sim_suites.command_path import first_order_alpha

    # α = 1 − exp(−2π · 8 Hz · 0.02 s) = 1 − exp(−1.00531) = 0.63407
    assert first_order_alpha(8.0, 0.02) == pytest.approx(0.634068, abs=1e-6)
    assert first_order_alpha(0.0, 0.02) == 1.0


def test_twin_settings_are_checked():
    with pytest.raises(EvalError):
        TwinSettings(state_rate_hz=0)
    with pytest.raises(EvalError):
        TwinSettings(faults=("meteor_strike",))
    with pytest.raises(EvalError):
        TwinGap(friction_scale=0)
    assert TwinGap.none().payload_kg == 0.0


def test_the_harness_adapter_drives_the_twin_physics_to_success_without_ros(plant):
    """The harness's observation/action path (nominal kinematics, rate limits, one control step of
    actuator delay, joint noise) on the twin's physics with its gap opens the drawer: what the
    real side does over DDS, minus the transport."""
    from real_bridge.bridge_config import RobotSpec
    from real_bridge.observation import adapter_for, scene_setup
    from real_bridge.robot import TrackerPose
    from sim_suites.policies import load_policy

    task = spec(
        family="drawer_open",
        task_id="drawer_open/drawer_center",
        seed=3,
        drift={},
        drift_name="nominal",
        policy="sim_suites.policies:scripted",
    )
    manifest = episode_manifest(task, None)
    plant.reset_scene(task, manifest)
    adapter = adapter_for(RobotSpec(), 0.02)
    q, _, _ = plant.joint_state()
    adapter.reset(q[:7], q[7:9], scene_setup(task, manifest))
    policy = load_policy(task.policy, task.task_id)
    policy.reset(task.seed)
    rng = np.random.default_rng(0)
    pending = []
    for _ in range(200):
        q, qd, _ = plant.joint_state()
        q = q + rng.normal(0.0, 0.0005, q.shape)
        pos, quat = plant.object_pose()
        obs = adapter.observe(q, qd, TrackerPose(0.0, pos, quat), 0.0, True)
        chunk, finger = adapter.targets(policy.act(obs), q, False)
        adapter.sent(chunk[0], finger)
        pending.append((chunk[0], finger))
        if len(pending) > 1:  # 20 ms actuator delay = one control step
            target, width = pending.pop(0)
            plant.set_arm_target(target, 0.02)
            plant.set_finger_target(width)
        for _ in range(10):
            plant.step_physics()
        assert not plant.take_events()
    quality, success, _ = plant.oracle(0.8)
    assert success and quality >= 0.8


@pytest.mark.parametrize(
    ("drift", "period_s", "latency_s"),
    [
        ({}, 0.02, 0.0),
        ({"latency_steps": 3}, 0.02, 0.06),  # 3 steps × 20 ms
        ({"firmware": "5.0.0"}, 0.02, 0.02),  # the profile's one extra step at 50 Hz
        ({"firmware": "5.1.0-lowrate"}, 0.04, 0.08),  # 25 Hz bus: 2 steps × 40 ms
        ({"firmware": "5.1.0-lowrate", "latency_steps": 1}, 0.04, 0.12),
    ],
)
def test_drift_and_firmware_set_the_twins_command_period_and_latency(
    plant, drift, period_s, latency_s
):
    task = spec(drift=drift, drift_name="d")
    plant.reset_scene(task, episode_manifest(task, None))
    assert plant.control_dt_s == pytest.approx(period_s)
    assert plant.command_latency_s == pytest.approx(latency_s)


def test_the_servo_low_pass_uses_the_command_period(plant):
    """At 25 Hz the set-point moves once per 40 ms through the 8 Hz low-pass:
    α = 1 − exp(−2π · 8 · 0.04) = 0.86609 of the way to the ramp per update."""
    task = spec(drift={"firmware": "5.1.0-lowrate"}, drift_name="fw")
    plant.reset_scene(task, episode_manifest(task, None))
    follower = plant.follower
    start = follower.q_des.copy()
    goal = start.copy()
    goal[0] += 0.1
    follower.set_target(goal, 0.0)  # a step: the ramp is at the goal at once
    for _ in range(20):  # one control period of 40 ms = 20 physics steps of 2 ms
        plant.step_physics()
    assert follower.q_des[0] - start[0] == pytest.approx(0.1 * 0.866088, abs=1e-6)


def _resting_sink_m(engine: str, timeconst_s: float) -> float:
    """How far the pick-place cube's centre sits below its nominal rest height after 1 s."""
    twin = SimSuitesPlant(
        TwinSettings(engine=engine, gap=TwinGap(contact_timeconst_s=timeconst_s))
    )
    try:
        task = spec(
            family="pick_place", task_id="pick_place/cube_center", drift={}, drift_name="nominal"
        )
        twin.reset_scene(task, {"randomization": {}})
        z0 = float(twin.object_pose()[0][2])
        for _ in range(500):
            twin.step_physics()
        return z0 - float(twin.object_pose()[0][2])
    finally:
        twin.close()


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_a_longer_contact_time_constant_is_a_softer_contact_in_both_engines(engine):
    stiff, soft = _resting_sink_m(engine, 0.01), _resting_sink_m(engine, 0.08)
    # A reference stiffness ∝ 1 / τ² is 64× lower at 80 ms than at 10 ms: the cube sinks more
    # than 10× deeper (measured 0.027 → 0.83 mm on MuJoCo, 0.034 → 1.58 mm on PyBullet).
    assert soft > 10 * stiff
    assert 0.0003 < soft < 0.003


def test_pybullet_contact_spring_by_hand():
    from sim_suites.engines.contact_softness import pybullet_contact_spring

    # k = m · d · (1 / (d τ²)) / (1 − d) = 0.1 / (0.05 · 0.04²) = 1250 N/m; c = 2 √(k m) = 22.36
    k, c = pybullet_contact_spring(0.1, 0.04)
    assert k == pytest.approx(1250.0)
    assert c == pytest.approx(2 * (1250.0 * 0.1) ** 0.5)


def test_after_the_scene_stops_the_arm_still_follows_its_controller(plant):
    """The demo's halt: the hand left the workspace, the scene's own monitor ended the task, and
    the arm then ignored every homing trajectory until the next scene reset (the set-point was
    frozen). The robot's controller must keep following trajectories; only the node holds."""
    from real_bridge.bridge_config import load_bridge_config, profile_path

    home = np.asarray(load_bridge_config(profile_path("twin")).robot.home, dtype=float)
    plant.reset_scene(spec(), episode_manifest(spec(), None, max_steps=20))
    # Near the posture the demo's pick-place episode ended in; the TCP leaves the workspace box
    # (x < 0.15 m) on the way.
    plant.set_arm_target(np.array([-0.56, -0.3, -0.52, -3.05, -0.44, 2.55, 0.16]), 1.0)
    for _ in range(1000):  # 2 s
        plant.step_physics()
    assert not plant._live  # the scene's task ended
    plant.set_arm_target(home, 2.0)
    for _ in range(1500):  # 3 s
        plant.step_physics()
    q, _, _ = plant.joint_state()
    assert np.max(np.abs(q[:7] - home)) < 0.15, q[:7] - home
