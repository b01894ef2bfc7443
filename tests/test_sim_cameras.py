"""Cameras, observation modes and the vision reference policy, in both engines.

Hand-derived numbers used below:

- Scene camera at eye (1.25, 0, 0.70) looking at (0.45, 0, 0.10): the optical axis is
  (−0.8, 0, −0.6) (a 3-4-5 triangle), camera x = (0, 1, 0), camera y = (−0.6, 0, 0.8). The top
  centre of pick_place/cube_center's cube (no DR) is (0.50, −0.02, 0.04): relative to the eye
  (−0.75, −0.02, −0.66), so depth = 0.75·0.8 + 0.66·0.6 = 0.996 m, x_c = −0.02, y_c = 0.45 −
  0.528 = −0.078. With fovy 45° on 128 rows, f = 64 / tan 22.5° = 154.5 px, so the point is at
  u = 64 + 154.5·(−0.02/0.996) = 60.9, v = 64 − 154.5·(−0.078/0.996) = 76.1: pixel (row 76,
  col 60).
- Every light term (ambient, diffuse, specular) is scaled by lighting_scale in both engines, so
  an unsaturated pixel at scale 0.5 has half its value at scale 1 (±1 for 8-bit rounding).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator, Mapping

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sim_suites
from embodied_eval.records import EpisodeSpec
from sim_suites.env import PandaTaskEnv
from sim_suites.episode import run_episode
from sim_suites.policies import VisionPolicy
from sim_suites.rendering.feed import PROPRIOCEPTION_KEYS

pytestmark = pytest.mark.timeout(300)
ENGINES = ("mujoco", "pybullet")
SHIFT = {"object_xy_offset_m": (0.03, 0.03)}


def _lit(engine: str, scale: float, jitter: float = 0.0) -> dict[str, np.ndarray]:
    env = PandaTaskEnv(
        "pick_place/cube_center",
        engine,
        observation_mode="rgbd",
        randomization={"lighting_scale": (scale, scale), "colour_jitter": (jitter, jitter)},
    )
    try:
        return env.reset(seed=3)[0]
    finally:
        env.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_lighting_and_colour_randomization_change_the_pixels(engine: str) -> None:
    bright, half = _lit(engine, 1.0), _lit(engine, 0.5)
    # The cube's top face (row 76, col 60) is red and lit; the table around it is grey.
    cube = bright["scene_rgb"][76, 60].astype(int)
    assert cube[0] > 150 and cube[0] > 3 * cube[1]
    table = bright["scene_rgb"][100, 20].astype(int)
    np.testing.assert_allclose(half["scene_rgb"][100, 20], table / 2, atol=1.0)
    np.testing.assert_allclose(half["scene_rgb"][76, 60], cube / 2, atol=1.0)
    # Depth is geometry: the light does not change it; the top face is 0.996 m away.
    np.testing.assert_array_equal(bright["scene_depth"], half["scene_depth"])
    # (One pixel row spans ~0.86 cm of depth on this face, 0.996/154.5/0.6 · 0.8; the engines
    # place pixel centres up to half a row apart.)
    assert bright["scene_depth"][76, 60, 0] == pytest.approx(0.996, abs=0.008)
    # Colour jitter moves the cube's colour (shift ≤ 0.3 per channel of 0–1) but not the table
    # geometry.
    jittered = _lit(engine, 1.0, 0.3)
    shift = np.abs(jittered["scene_rgb"][76, 60].astype(int) - cube)
    assert 0 < shift.max() <= 0.3 * 255 + 1
    np.testing.assert_array_equal(jittered["scene_depth"], bright["scene_depth"])


def _rollout(env: gym.Env, seed: int, steps: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        obs, *_ = env.step(rng.uniform(-1, 1, 4).astype(np.float32))
        out.append(obs)
    return out


@pytest.mark.parametrize(
    ("env_id", "mode"),
    # The mobile manipulator observes state only (no cameras on it yet).
    [(i, "rgb") for i in sim_suites.registered_ids() if "Mobile" not in i]
    + [("embodied/PegInsert-MuJoCo-v0", "rgbd"), ("embodied/Push-PyBullet-v0", "rgbd")],
)
def test_camera_modes_over_the_registry(env_id: str, mode: str) -> None:
    """check_env, determinism, randomized starts and fresh arrays in the camera modes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id, observation_mode=mode, camera_rate_hz=50.0, randomization=SHIFT)
        check_env(env.unwrapped, skip_render_check=True)
        first = _rollout(env, seed=7, steps=3)
        other = gym.make(env_id, observation_mode=mode, camera_rate_hz=50.0, randomization=SHIFT)
        second = _rollout(other, seed=7, steps=3)
        starts = [env.reset(seed=s)[0]["scene_rgb"] for s in range(3)]
        obs_b, *_ = env.step(env.action_space.sample())
        env.close()
        other.close()
    assert [str(w.message) for w in caught] == []
    for a, b in zip(first, second, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # The part starts 3 cm from its place in a random direction: three seeds, three pictures.
    assert len({s.tobytes() for s in starts}) == 3
    arrays = [*first[-1].values(), *obs_b.values()]
    for x, y in itertools.combinations(arrays, 2):
        assert not np.shares_memory(x, y)
    assert not {"object_pos", "object_quat", "object_visible"} & set(first[0])


class Recording(Mapping[str, np.ndarray]):
    """An observation that records every key the policy reads."""

    def __init__(self, obs: Mapping[str, np.ndarray], seen: set[str]) -> None:
        self.obs, self.seen = obs, seen

    def __getitem__(self, key: str) -> np.ndarray:
        self.seen.add(key)
        return self.obs[key]

    def __iter__(self) -> Iterator[str]:
        self.seen.update(self.obs)
        return iter(self.obs)

    def __len__(self) -> int:
        return len(self.obs)


def test_vision_policy_reads_no_object_pose() -> None:
    env = PandaTaskEnv("pick_place/cube_center", "mujoco", observation_mode="rgbd")
    policy = VisionPolicy("pick_place/cube_center")
    seen: set[str] = set()
    try:
        obs, _ = env.reset(seed=1)
        assert set(obs) == {
            *PROPRIOCEPTION_KEYS,
            "scene_rgb",
            "scene_depth",
            "wrist_rgb",
            "wrist_depth",
        }
        for _ in range(40):
            obs, *_ = env.step(policy.act(Recording(obs, seen)))
        true_point = env.object_point
    finally:
        env.close()
    assert "object_pos" not in seen and "object_quat" not in seen
    assert seen <= {*PROPRIOCEPTION_KEYS, "scene_rgb", "scene_depth"}
    # Yet it found the cube from the picture: within 5 mm of the truth.
    assert policy.estimate is not None
    np.testing.assert_allclose(policy.estimate, true_point, atol=0.005)


def _vision_episode(engine: str, drift: dict[str, float], steps: int = 400) -> tuple[bool, int]:
    spec = EpisodeSpec(
        episode_id=f"vision-{engine}-{sorted(drift)}",
        pair_id="pair-vision",
        side="sim",
        family="pick_place",
        task_id="pick_place/cube_center",
        seed=4,
        drift_name="lights" if drift else "nominal",
        drift=drift,
        engine=engine,
        policy="sim_suites.policies:vision",
    )
    agent = VisionPolicy("pick_place/cube_center")
    ep = run_episode(spec, policy=agent, max_steps=steps).episode
    return ep.success, agent.detections


@pytest.mark.parametrize("engine", ENGINES)
def test_vision_policy_succeeds_nominally_and_fails_in_the_dark(engine: str) -> None:
    ok, detections = _vision_episode(engine, {})
    assert ok and detections > 0
    # A quarter of the light: the red face drops to ~0.25 × 212 = 53 < MIN_LEVEL 60.
    # (One second is enough to see that it never finds the cube: nominally it does at once.)
    dark, dark_detections = _vision_episode(engine, {"lighting_scale": 0.25}, steps=50)
    assert not dark and dark_detections == 0


def test_missing_offscreen_library_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes.util

    from embodied_eval.errors import EvalError
    from sim_suites.rendering import gl

    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(EvalError, match=r"libOSMesa\.so .*libosmesa6") as caught:
        gl.offscreen_context(64, 64)
    assert "\n" not in str(caught.value)
