"""The twin's tracker as a sensor (no ROS): latency, dropouts under the hand, noise, and the
adapter telling a covered object from a lost one."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from real_bridge.robot import TrackerPose
from real_bridge.twin.settings import TwinGap
from real_bridge.twin.tracker import TrackerSensor, hand_occludes

QUAT = np.array([1.0, 0.0, 0.0, 0.0])
CUBE = np.array([0.5, 0.0, 0.02])
FAR = np.array([0.2, 0.4, 0.5])  # the hand well away from the cube


def sensor(**gap) -> TrackerSensor:
    return TrackerSensor(TwinGap(object_pose_noise_m=0.0, **gap))


def test_a_reading_describes_the_scene_latency_ago_and_is_stamped_then():
    s = sensor(tracker_latency_s=0.05)
    rng = np.random.default_rng(0)
    for k in range(100):  # 2 ms ticks; the cube slides 1 mm per tick along x
        t = (k + 1) * 0.002
        s.observe(t, round(t * 1e9), (CUBE + np.array([0.001 * k, 0, 0]), QUAT), FAR, False)
    # At t = 0.200 s the newest truth at least 50 ms old is the one at t = 0.150 s (k = 74).
    reading = s.reading(0.200, rng)
    assert reading is not None and reading.stamp_ns == 150_000_000
    assert reading.position == pytest.approx(CUBE + np.array([0.074, 0, 0]))
    # Without latency: the newest truth.
    fresh = sensor(tracker_latency_s=0.0)
    fresh.observe(0.002, 2_000_000, (CUBE, QUAT), FAR, False)
    assert fresh.reading(0.002, rng).stamp_ns == 2_000_000
    assert sensor(tracker_latency_s=0.05).reading(1.0, rng) is None  # nothing seen yet


def test_the_hand_over_the_object_or_holding_it_hides_it():
    gap = TwinGap()  # defaults: radius 4 cm, up to 10 cm above, hidden when held
    assert hand_occludes(gap, CUBE, CUBE + np.array([0.01, 0.01, 0.06]), False)  # over it
    assert not hand_occludes(gap, CUBE, CUBE + np.array([0.05, 0.0, 0.06]), False)  # 5 cm aside
    assert not hand_occludes(gap, CUBE, CUBE + np.array([0.0, 0.0, 0.15]), False)  # 15 cm up: seen
    assert not hand_occludes(gap, CUBE, CUBE + np.array([0.034, 0.0, 0.0]), False)  # beside it (pushing)
    assert hand_occludes(gap, CUBE, CUBE, True)  # held
    off = TwinGap(tracker_occlusion_radius_m=0.0, tracker_hidden_when_held=False)
    assert not hand_occludes(off, CUBE, CUBE + np.array([0.0, 0.0, 0.06]), False)
    assert not hand_occludes(off, CUBE, CUBE, True)
    s = sensor(tracker_latency_s=0.0)
    rng = np.random.default_rng(0)
    s.observe(0.002, 2_000_000, (CUBE, QUAT), CUBE + np.array([0, 0, 0.05]), False)
    assert s.reading(0.002, rng) is None and s.dropouts == 1
    s.observe(0.004, 4_000_000, (CUBE, QUAT), FAR, False)
    assert s.reading(0.004, rng) is not None and s.dropouts == 1


def test_noise_is_the_gaps_and_knobs_are_checked():
    s = TrackerSensor(TwinGap(object_pose_noise_m=0.002, tracker_latency_s=0.0))
    rng = np.random.default_rng(5)
    errors = []
    for k in range(2000):
        t = (k + 1) * 0.002
        s.observe(t, k, (CUBE, QUAT), FAR, False)
        errors.append(s.reading(t, rng).position - CUBE)
    assert np.std(np.array(errors), axis=0) == pytest.approx([0.002] * 3, rel=0.1)
    with pytest.raises(EvalError, match="tracker_latency_s"):
        TwinGap(tracker_latency_s=-0.01)
    with pytest.raises(EvalError, match="tracker_latency_s"):
        TwinGap(tracker_latency_s=2.0)
    none = TwinGap.none()
    assert none.tracker_latency_s == 0 and none.tracker_occlusion_radius_m == 0
    assert not none.tracker_hidden_when_held


def test_the_adapter_keeps_a_covered_object_visible_and_carries_a_held_one():
    pytest.importorskip("sim_suites.robot")
    from real_bridge.bridge_config import RobotSpec
    from real_bridge.observation import adapter_for, hand_covers

    assert hand_covers(np.array([0.5, 0.0, 0.12]), CUBE)
    assert not hand_covers(np.array([0.5, 0.2, 0.12]), CUBE)
    adapter = adapter_for(RobotSpec(), 0.02)
    q = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785398, 0.04, 0.04])
    adapter.reset(q[:7], q[7:], None)
    tcp = adapter.tcp_of(q[:7])
    below = tcp - [0.0, 0.0, 0.08]  # the object 8 cm under the hand
    obs = adapter.observe(q, np.zeros(9), TrackerPose(0.0, below, QUAT), 0.0, True)
    assert obs["object_visible"][0] == 1.0
    # The tracker went quiet with the hand over the object: still visible, where it was seen.
    obs = adapter.observe(q, np.zeros(9), TrackerPose(0.0, below, QUAT), 1.0, True)
    assert obs["object_visible"][0] == 1.0 and obs["object_pos"] == pytest.approx(below)
    # A stale pose with the hand elsewhere is a perception dropout.
    adapter.last_pose = (below + np.array([0.3, 0.0, 0.0]), QUAT)
    obs = adapter.observe(q, np.zeros(9), TrackerPose(0.0, below, QUAT), 2.0, True)
    assert obs["object_visible"][0] == 0.0
    # Held: the object is where the hand holds it (the TCP plus the grasp offset).
    adapter.grasped, adapter.grasp_offset = True, np.array([0.0, 0.0, -0.01])
    obs = adapter.observe(q, np.zeros(9), None, 3.0, True)
    assert obs["object_visible"][0] == 1.0
    assert obs["object_pos"] == pytest.approx(tcp + np.array([0.0, 0.0, -0.01]))


def test_holding_hides_only_a_tracked_part_enclosed_in_the_fingers():
    """A cube held in the fingers is hidden; a drawer's handle (the drawer body stays in view)
    and a held tool (the tracked block is elsewhere) are not."""
    from embodied_eval.records import EpisodeSpec
    from real_bridge.interface import episode_manifest
    from real_bridge.twin.settings import TwinSettings
    from real_bridge.twin.sim_plant import SimSuitesPlant

    plant = SimSuitesPlant(TwinSettings())
    try:
        for task_id, hides in (
            ("pick_place/cube_center", True),
            ("drawer_open/drawer_center", False),
            ("tool_use/hook_center", False),
        ):
            spec = EpisodeSpec(
                episode_id=f"{task_id}-r", pair_id=task_id, side="real",
                family=task_id.split("/")[0], task_id=task_id, seed=1, drift_name="nominal",
                engine="ros2",
            )
            plant.reset_scene(spec, episode_manifest(spec, None))
            plant.env._held = True  # as the scene's grasp detector reports a closed grasp
            assert plant.hand()[1] is hides, task_id
    finally:
        plant.close()
