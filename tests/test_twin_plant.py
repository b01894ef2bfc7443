"""The twin's physics (no ROS): reality gap on top of drift, per-physics-step samples, holding."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeSpec
from real_bridge.interface import episode_manifest
from real_bridge.twin.settings import RealityGap, TwinSettings
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
    # A different contact model: object contacts with a 10 ms solref time constant.
    backend = plant._inner_backend
    assert np.all(backend.model.geom_solref[backend._object_geoms, 0] == 0.01)
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
    for _ in range(500):
        plant.step_physics()
    assert abs(plant.joint_state()[0][0] - held) < 0.05  # holds where it was


def test_first_order_bandwidth_factor_by_hand():
    from real_bridge.twin.sim_plant import first_order_alpha

    # α = 1 − exp(−2π · 8 Hz · 0.02 s) = 1 − exp(−1.00531) = 0.63407
    assert first_order_alpha(8.0, 0.02) == pytest.approx(0.634068, abs=1e-6)
    assert first_order_alpha(0.0, 0.02) == 1.0


def test_twin_settings_are_checked():
    with pytest.raises(EvalError):
        TwinSettings(state_rate_hz=0)
    with pytest.raises(EvalError):
        TwinSettings(faults=("meteor_strike",))
    with pytest.raises(EvalError):
        RealityGap(friction_scale=0)
    assert RealityGap.none().payload_kg == 0.0


def test_the_harness_adapter_drives_the_twin_physics_to_success_without_ros(plant):
    """The harness's observation/action path (nominal kinematics, rate limits, one control step of
    actuator delay, joint noise) on the twin's physics with its gap opens the drawer: what the
    real side does over DDS, minus the transport."""
    from real_bridge.bridge_config import RobotSpec
    from real_bridge.observation import PandaAdapter, scene_setup
    from sim_suites.policies import load_policy

    task = spec(family="drawer_open", task_id="drawer_open/drawer_center", seed=3, drift={},
                drift_name="nominal", policy="sim_suites.policies:scripted")
    manifest = episode_manifest(task, None)
    plant.reset_scene(task, manifest)
    adapter = PandaAdapter(RobotSpec(), 0.02)
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
        obs = adapter.observe(q, qd, (0.0, pos, quat), 0.0, True)
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
