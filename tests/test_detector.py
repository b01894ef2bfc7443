"""The harness's success detector on hand-built recordings (no ROS): per family, the tracker's
evidence window, the camera fallback, and "cannot judge"."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rosbags")
pytest.importorskip("sim_suites.tasks")

from real_bridge.detector import (
    AFTER_END_S,
    BEFORE_END_S,
    DETECTOR_NAME,
    DETECTOR_VERSION,
    JudgeContext,
    judge_recording,
)
from real_bridge.detector_camera import CameraModel
from tests import recording_builder as rb

# Goals of the instances at offset 0 (catalog): pick_place/cube_center (0.50, 0.24), cube centre
# 0.02 m high; push/block_forward (0.56, 0.00); peg_insert/peg_center (0.55, 0.10), peg centre
# 0.04 m; drawer_open/drawer_center: handle start (0.60 − 0.035, 0, 0.045 + 0.055) =
# (0.565, 0, 0.10), pulled 0.15 m toward the robot → goal (0.415, 0, 0.10).
PICK_GOAL = (0.50, 0.24, 0.02)
PUSH_GOAL = (0.56, 0.00, 0.02)
PEG_GOAL = (0.55, 0.10, 0.04)
DRAWER_GOAL = (0.415, 0.0, 0.10)


def q(error_m: float, tol_m: float) -> float:
    """The suite's scoring rule by hand: 0.8^((e/tol)²)."""
    return 0.8 ** ((error_m / tol_m) ** 2)


@pytest.mark.parametrize(
    ("task", "goal", "point", "error", "tol", "success"),
    [
        # 3-D distance: 1 cm off in y → q = 0.8^0.25 = 0.94574.
        ("pick_place/cube_center", PICK_GOAL, (0.50, 0.25, 0.02), 0.01, 0.02, True),
        # 3 cm off (tol 2 cm) → q = 0.8^2.25 = 0.6052: a failure.
        ("pick_place/cube_center", PICK_GOAL, (0.53, 0.24, 0.02), 0.03, 0.02, False),
        # planar: (0.01, 0.02) → √5 cm = 0.02236 m; z ignored → q = 0.8^0.8 = 0.8365.
        ("push/block_forward", PUSH_GOAL, (0.57, 0.02, 0.05), math.hypot(0.01, 0.02), 0.025, True),
        # lateral 5 mm (3, 4), depth missing 6 mm → e = √(25 + 36) mm = 7.81 mm, tol 1 cm.
        ("peg_insert/peg_center", PEG_GOAL, (0.553, 0.104, 0.046), math.sqrt(61) / 1000, 0.01, True),
        # on the axis, 12 mm above its floor → e = 12 mm → q = 0.8^1.44 = 0.7253: a failure.
        ("peg_insert/peg_center", PEG_GOAL, (0.55, 0.10, 0.052), 0.012, 0.01, False),
        # the handle 1 cm short of the full pull (x 0.425 vs goal 0.415) → q = 0.8^(4/9) = 0.9056.
        ("drawer_open/drawer_center", DRAWER_GOAL, (0.425, 0.0, 0.10), 0.01, 0.015, True),
        # pulled too far: nothing missing → e = 0.
        ("drawer_open/drawer_center", DRAWER_GOAL, (0.40, 0.01, 0.10), 0.0, 0.015, True),
        # 5 cm short → q = 0.8^(100/9) = 0.0837: a failure.
        ("drawer_open/drawer_center", DRAWER_GOAL, (0.465, 0.0, 0.10), 0.05, 0.015, False),
    ],
)
def test_each_family_is_judged_from_the_tracker(task, goal, point, error, tol, success):
    verdict = judge_recording(rb.recording([point] * 6), rb.context(task, goal))
    assert verdict.source == "tracker" and verdict.evidence["tracker_poses"] == 6
    assert verdict.goal_error_m == pytest.approx(error, abs=1e-12)
    assert verdict.quality == pytest.approx(q(error, tol), rel=1e-12)
    assert verdict.success is success
    assert (verdict.name, verdict.version) == (DETECTOR_NAME, DETECTOR_VERSION)


def test_the_tracker_point_is_the_median_of_the_window_only():
    # Poses every 100 ms from END − 1.5 s to END: the window [END − 0.5 s, END + 0.3 s] holds the
    # last 6 (END − 0.5 s … END). Earlier poses sit at the start; in the window, one outlier.
    window = [(0.50, 0.24, 0.02)] * 2 + [(0.90, 0.24, 0.02)] + [(0.51, 0.24, 0.02)] * 3
    points = [(0.30, 0.00, 0.02)] * 10 + window
    messages = rb.recording(points, every_ns=100_000_000)
    verdict = judge_recording(messages, rb.context("pick_place/cube_center", PICK_GOAL))
    assert BEFORE_END_S == 0.5 and AFTER_END_S == 0.3
    assert verdict.evidence["tracker_poses"] == 6
    # Medians of x over {0.50, 0.50, 0.90, 0.51, 0.51, 0.51} = 0.51 → e = 1 cm.
    assert verdict.goal_error_m == pytest.approx(0.01, abs=1e-12)
    assert verdict.success is True


def test_too_few_tracker_poses_and_no_camera_cannot_judge():
    ctx = rb.context("pick_place/cube_center", PICK_GOAL)
    verdict = judge_recording(rb.recording([PICK_GOAL] * 2), ctx)  # 2 < 3 poses, no frames
    assert verdict.success is None and verdict.quality is None
    assert "cannot judge" in verdict.detail and "2 tracker pose(s)" in verdict.detail


def test_no_ended_event_cannot_judge():
    ctx = rb.context("pick_place/cube_center", PICK_GOAL)
    verdict = judge_recording(rb.recording([PICK_GOAL] * 6, ended=False), ctx)
    assert verdict.success is None and "no 'ended' event" in verdict.detail
    # Another episode's events do not count either.
    other = rb.recording([PICK_GOAL] * 6, episode_id="someone-else")
    assert judge_recording(other, ctx).success is None


def _camera() -> CameraModel:
    k = np.array([[rb.FOCAL, 0, rb.SIZE / 2], [0, rb.FOCAL, rb.SIZE / 2], [0, 0, 1.0]])
    return CameraModel(k, np.array(rb.CAMERA_POSITION), np.array(rb.CAMERA_LOOK_AT))


def _image_with_object_at(point, rgb=(204, 51, 51)) -> np.ndarray:
    """A dark frame with a 4×4 patch of the object's colour centred on `point`'s pixel."""
    image = np.full((rb.SIZE, rb.SIZE, 3), 30, dtype=np.uint8)
    u, v = _camera().project(np.array(point))
    c, r = round(float(u)), round(float(v))  # patch columns c−2..c+1 (pixel centres +0.5)
    image[r - 2 : r + 2, c - 2 : c + 2] = rgb
    return image


def test_camera_model_projects_and_back_projects():
    cam = _camera()
    # The camera 1.3 m from (0.5, 0, 0.1) looking at it: that point is the image centre.
    assert cam.project(np.array(rb.CAMERA_LOOK_AT)) == pytest.approx([64.0, 64.0], abs=1e-4)
    # +y (the robot's left) appears to the right in this camera, which faces the robot.
    assert cam.project(np.array([0.5, 0.1, 0.1]))[0] > 64
    back = cam.ray_to_plane(*cam.project(np.array([0.45, -0.1, 0.02])), 0.02)
    assert back == pytest.approx([0.45, -0.1, 0.02], abs=1e-9)


def test_without_tracker_poses_the_camera_judges():
    ctx = rb.context("pick_place/cube_center", PICK_GOAL)
    at_goal = [_image_with_object_at((0.50, 0.245, 0.02))] * 3
    verdict = judge_recording(rb.recording([], images=at_goal), ctx)
    assert verdict.source == "camera" and verdict.evidence["camera_frames"] == 3
    # The patch is centred on the pixel of (0.50, 0.245): the back-projection lands within
    # half a pixel (≤ ~1 cm on this oblique view) of it.
    assert verdict.goal_error_m < 0.012 and verdict.success is True
    far = [_image_with_object_at((0.40, 0.10, 0.02))] * 3  # 17 cm from the goal
    assert judge_recording(rb.recording([], images=far), ctx).success is False


def test_camera_needs_a_declared_pose_and_a_coloured_object():
    images = [_image_with_object_at((0.50, 0.245, 0.02))] * 3
    ctx = rb.context("pick_place/cube_center", PICK_GOAL, camera_position_m=(), camera_look_at_m=())
    verdict = judge_recording(rb.recording([], images=images), ctx)
    assert verdict.success is None and "not declared" in verdict.detail
    # The drawer's handle is grey: the camera cannot find it, only a tracker can.
    drawer = rb.context("drawer_open/drawer_center", DRAWER_GOAL)
    verdict = judge_recording(rb.recording([], images=images), drawer)
    assert verdict.success is None and "no distinctive colour" in verdict.detail


def test_context_round_trips_through_json():
    ctx = rb.context("push/block_forward", (0.56, 0.0, 0.02))
    assert JudgeContext.from_json(ctx.to_json()) == ctx


def test_the_evidence_is_complete_once_every_stream_passed_the_window():
    from real_bridge.detector import evidence_complete

    ctx = rb.context("pick_place/cube_center", PICK_GOAL)
    messages = rb.recording([PICK_GOAL] * 4)  # the last pose logged at the end itself
    assert not evidence_complete(messages, ctx)
    late = rb.END_NS + round(AFTER_END_S * 1e9) + 1
    assert evidence_complete([*messages, (rb.POSE_TOPIC, late, rb.pose(late, PICK_GOAL))], ctx)
    assert evidence_complete(rb.recording([PICK_GOAL] * 4, ended=False), ctx)  # nothing to wait
