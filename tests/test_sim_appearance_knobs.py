"""Perturbations that are not physics: camera pose offsets, distractors, textures (both engines).

Each knob changes the camera pixels and is recorded in the episode's randomization; the camera
knobs and textures change nothing a state policy acts on, and distractors stand outside the task's
working region, so the state policy's outcome is the same with and without them, while the vision
policy's view (its estimate of the part) moves.

Hand-derived numbers:

- Scene camera (eye (1.25, 0, 0.70) looking at (0.45, 0, 0.10)): its axes in the world are
  x = (0, 1, 0), y = (−0.6, 0, 0.8), z = (0.8, 0, 0.6) (the optical axis −z = (−0.8, 0, −0.6), a
  3-4-5 triangle). An offset (0.01, 0.02, 0.03) in the camera frame moves the eye by
  0.01·x + 0.02·y + 0.03·z = (0, 0.01, 0) + (−0.012, 0, 0.016) + (0.024, 0, 0.018)
  = (0.012, 0.01, 0.034), to (1.262, 0.01, 0.734).
- A tilt of 0.1 rad about the camera's x axis turns its z axis to −sin 0.1·y + cos 0.1·z
  = −0.09983·(−0.6, 0, 0.8) + 0.99500·(0.8, 0, 0.6) = (0.85590, 0, 0.51714).
- A rotation vector (0, 0, π/2) is a quarter turn about z: x → y, y → −x.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import TEXTURE_CHOICES
from sim_suites.distractors import CLEARANCE_M, _hull, distance_to_region
from sim_suites.env import PandaTaskEnv
from sim_suites.policies import scripted
from sim_suites.policies.part_finder import locate
from sim_suites.rendering.cameras import offset_pose, rotation_from_vector, scene_camera_pose
from sim_suites.rendering.textures import TEXTURES, png_bytes, texture_image
from sim_suites.tasks import make_task, registered_family
from sim_suites.variations import SphericalOffset, variations_from_ranges

pytestmark = pytest.mark.timeout(600)
ENGINES = ("mujoco", "pybullet")
TASK = "pick_place/cube_center"
#: Each new knob at one setting: (value, the camera whose image it changes).
KNOBS = {
    "scene_camera_offset_m": (0.03, "scene"),
    "scene_camera_tilt_rad": (0.05, "scene"),
    "wrist_camera_offset_m": (0.03, "wrist"),
    "wrist_camera_tilt_rad": (0.05, "wrist"),
    "distractor_count": (3, "scene"),
    "object_texture": (6, "scene"),
    "table_texture": (4, "scene"),
}


def test_camera_pose_offset_by_hand() -> None:
    pos, rot = scene_camera_pose()
    np.testing.assert_allclose(rot[:, 0], [0.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(rot[:, 1], [-0.6, 0.0, 0.8], atol=1e-12)
    np.testing.assert_allclose(rot[:, 2], [0.8, 0.0, 0.6], atol=1e-12)
    moved, same = offset_pose(pos, rot, (0.01, 0.02, 0.03), (0.0, 0.0, 0.0))
    np.testing.assert_allclose(moved, [1.262, 0.01, 0.734], atol=1e-12)
    np.testing.assert_allclose(same, rot, atol=1e-12)
    _, tilted = offset_pose(pos, rot, (0.0, 0.0, 0.0), (0.1, 0.0, 0.0))
    np.testing.assert_allclose(tilted[:, 2], [0.85590, 0.0, 0.51714], atol=1e-5)
    quarter = rotation_from_vector((0.0, 0.0, math.pi / 2))
    np.testing.assert_allclose(quarter @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(quarter @ [0, 1, 0], [-1, 0, 0], atol=1e-12)


def test_knob_draws() -> None:
    rng = np.random.default_rng(0)
    # A pose offset has the drawn length in a random direction.
    for _ in range(20):
        v = SphericalOffset("wrist_camera_offset_m", 0.03, 0.03).sample(rng)
        assert len(v) == 3 and float(np.linalg.norm(v)) == pytest.approx(0.03, abs=1e-15)
    variations = variations_from_ranges({"distractor_count": (0, 3), "table_texture": (1, 6)})
    counts = {variations[0].sample(rng) for _ in range(200)}
    textures = {variations[1].sample(rng) for _ in range(200)}
    assert counts == {0, 1, 2, 3} and textures == {1, 2, 3, 4, 5, 6}
    # The bank has the protocol's number of textures, each a valid PNG-able RGB image.
    assert len(TEXTURES) == TEXTURE_CHOICES
    for recipe in TEXTURES:
        image = texture_image(recipe)
        assert image.shape == (32, 32, 3) and len(np.unique(image.reshape(-1, 3), axis=0)) == 2
        assert png_bytes(image).startswith(b"\x89PNG\r\n\x1a\n")


def test_protocol_bounds_of_the_new_knobs() -> None:
    import tomllib

    from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping

    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    for knob, bad, words in (
        ("distractor_count", [0, 4], "above the maximum 3"),
        ("object_texture", [0, 2.5], "not a whole number"),
        ("table_texture", [0, 7], "above the maximum 6"),
        ("wrist_camera_offset_m", [0, 0.5], "above the maximum 0.2"),
    ):
        raw["randomization"] = {knob: bad}
        with pytest.raises(EvalError, match=words):
            protocol_from_mapping(raw)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_knob_changes_the_pixels_and_is_recorded(engine: str) -> None:
    env = PandaTaskEnv(TASK, engine, randomization={}, observation_mode="rgb")
    try:
        nominal, _ = env.reset(seed=3)
        for knob, (value, camera) in KNOBS.items():
            env.configure(randomization={knob: (value, value)})
            obs, info = env.reset(seed=3)
            drawn = info["randomization"][knob]
            if isinstance(drawn, list):
                assert float(np.linalg.norm(drawn)) == pytest.approx(value, abs=1e-12)
            else:
                assert drawn == value
            changed = np.abs(obs[f"{camera}_rgb"].astype(int) - nominal[f"{camera}_rgb"])
            assert changed.max() > 40, knob
            if knob.startswith(("scene_camera", "wrist_camera")):
                # A pose offset moves one camera only.
                other = "wrist" if camera == "scene" else "scene"
                np.testing.assert_array_equal(obs[f"{other}_rgb"], nominal[f"{other}_rgb"])
            if knob == "distractor_count":
                spots = np.array(info["scene"]["distractors_xy"])
                hull = _hull(make_task(TASK).work_region_xy())
                assert len(spots) == 3
                assert distance_to_region(spots, hull).min() >= CLEARANCE_M
    finally:
        env.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_vision_view_moves_state_outcome_does_not(engine: str) -> None:
    part = registered_family("pick_place").vision

    def first_estimate(ranges: dict[str, tuple[float, float]]) -> np.ndarray | None:
        env = PandaTaskEnv(TASK, engine, randomization=ranges, observation_mode="rgbd")
        try:
            obs, _ = env.reset(seed=3)
            return locate(obs["scene_rgb"], obs["scene_depth"], part)
        finally:
            env.close()

    seen = first_estimate({})
    assert seen is not None
    # The nominal estimate is the cube's tracked point (0.50, −0.02, 0.02) within 8 mm (a pixel
    # spans ~6.5 mm at the cube's 0.996 m depth: 0.996 / 154.5 px).
    assert float(np.linalg.norm(seen - [0.50, -0.02, 0.02])) < 0.008
    # The policy back-projects with the nominal camera pose: a camera moved by 3 cm moves the
    # estimate by the same 3 cm; a 0.05 rad tilt at ~1 m by ~5 cm; a red mug on the table pulls
    # the red pixels' centre away. Each moves it by more than 1 cm.
    for knob in ("scene_camera_offset_m", "scene_camera_tilt_rad", "distractor_count"):
        value = KNOBS[knob][0]
        moved = first_estimate({knob: (value, value)})
        assert moved is not None and float(np.linalg.norm(moved - seen)) > 0.01, knob
    # A cube drawn in yellow and black stripes is no longer red: the policy cannot find it.
    assert first_estimate({"object_texture": (6, 6)}) is None


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_state_policy_outcome_is_unchanged(engine: str) -> None:
    everything = {knob: (value, value) for knob, (value, _) in KNOBS.items()}
    for task_id in (
        "pick_place/cube_center",
        "push/block_forward",
        "drawer_open/drawer_center",
        "peg_insert/peg_center",
        "tool_use/hook_center",
    ):
        outcomes = []
        for ranges in ({}, everything):
            env = PandaTaskEnv(task_id, engine, randomization=ranges)
            policy = scripted(task_id)
            try:
                obs, info = env.reset(seed=0)
                policy.reset(0)
                steps = 0
                while True:
                    obs, _, term, trunc, info = env.step(policy.act(obs))
                    steps += 1
                    if term or trunc:
                        break
                outcomes.append((info["is_success"], info["quality"], steps, info["status"]))
            finally:
                env.close()
        assert outcomes[0] == outcomes[1], task_id


@pytest.mark.parametrize("engine", ENGINES)
def test_the_new_knobs_are_reproducible(engine: str) -> None:
    """One seed, one drawn look: the same images, randomization and scene twice; another seed,
    another draw."""
    everything = {knob: (0.0, value) for knob, (value, _) in KNOBS.items()}
    env = PandaTaskEnv(TASK, engine, randomization=everything, observation_mode="rgb")
    try:
        first, info_a = env.reset(seed=11)
        again, info_b = env.reset(seed=11)
        _, info_c = env.reset(seed=12)
    finally:
        env.close()
    assert info_a["randomization"] == info_b["randomization"]
    assert info_a["scene"] == info_b["scene"]
    for key in ("scene_rgb", "wrist_rgb"):
        np.testing.assert_array_equal(first[key], again[key])
    assert info_c["randomization"] != info_a["randomization"]
