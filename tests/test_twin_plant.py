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
    plant.reset(spec(), episode_manifest(spec(), None, max_steps=60))
    physics = plant.env.params.physics
    # Default gap: friction ×0.85, link mass ×1.05, object mass ×1.10, payload +0.05 kg.
    assert physics.friction_scale == pytest.approx(0.9 * 0.85)  # drift × gap = 0.765
    assert physics.payload_kg == pytest.approx(0.1 + 0.05)  # drift + gap = 0.15 kg
    assert physics.link_mass_scale == pytest.approx(1.05)
    assert physics.object_mass_scale == pytest.approx(1.10)
    # 20 ms actuator delay = 1 control step at 50 Hz; noise std 0.0005 rad.
    assert plant.env.params.action_latency_steps == 1
    assert plant.env.params.sensor_noise_std == pytest.approx(0.0005)


def test_one_sample_per_physics_step_and_a_verdict_at_the_end(plant):
    plant.reset(spec(), episode_manifest(spec(), None, max_steps=20))
    plant.start()
    plant.step_physics()
    # One control step at 50 Hz with 2 ms physics: 1 / (50 · 0.002) = 10 sub-steps; one was
    # played out, nine are queued.
    assert len(plant._buffer) == 9
    steps = 1
    while plant.running:
        plant.step_physics()
        steps += 1
        assert steps < 10_000
    result = plant.result()
    assert result is not None and result.steps <= 20
    assert steps == result.steps * 10  # every sub-step was published once
    assert result.status in ("ok", "safety_stop", "out_of_bounds")
    assert 0.0 <= result.quality <= 1.0
    assert result.success == (result.status == "ok" and result.quality >= 0.8)


def test_hold_clips_to_the_joint_limits_and_holds(plant):
    plant.reset(spec(), episode_manifest(spec(), None, max_steps=20))
    q0, _, _ = plant.joint_state()
    applied = plant.hold(np.array([5.0, *q0[1:7]]))
    assert applied[0] == 2.9671  # panda_joint1 upper limit in the URDF
    for _ in range(200):
        plant.step_physics()
    q, _, _ = plant.joint_state()
    assert q[0] > q0[0]  # moving towards the clipped target
    assert not plant.running and plant.result() is None


def test_twin_settings_are_checked():
    with pytest.raises(EvalError):
        TwinSettings(state_rate_hz=0)
    with pytest.raises(EvalError):
        TwinSettings(faults=("meteor_strike",))
    with pytest.raises(EvalError):
        RealityGap(friction_scale=0)
    assert RealityGap.none().payload_kg == 0.0
