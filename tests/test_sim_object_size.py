"""`object_size_scale`: the free task part is resized in both engines' collision geometry and in
what the cameras see, deterministically, and a peg too wide for its hole no longer goes in."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping
from embodied_eval.protocol.sensitivity import run_sweep
from sim_suites.engines.base import InitialState, PhysicsParams
from sim_suites.engines.factory import make_backend
from sim_suites.env import PandaTaskEnv
from sim_suites.families.peg_insert import PEG_HALF
from sim_suites.families.pick_place import CUBE_HALF
from sim_suites.panda_kinematics import FINGER_MAX_M, HOME_Q
from sim_suites.tasks import make_task

ENGINES = ("mujoco", "pybullet")


def _reset(backend: object, s: float) -> None:
    init = InitialState(arm_q=HOME_Q.copy(), finger_q=FINGER_MAX_M)
    backend.reset(init, PhysicsParams(object_size_scale=s))  # type: ignore[attr-defined]


def test_collision_size_changes_in_both_engines_and_is_restored() -> None:
    scene = make_task("pick_place/cube_center").scene()
    mj = make_backend("mujoco", scene)
    pb = make_backend("pybullet", scene)
    try:
        m = mj.model  # type: ignore[attr-defined]
        cube_geom = m.body("cube").geomadr[0]
        c = pb.client  # type: ignore[attr-defined]
        for s in (1.25, 1.0, 0.8, 1.0):
            _reset(mj, s)
            _reset(pb, s)
            # The 4 cm cube (half-side 0.02 m) × 1.25 → half-side 0.025 m; × 0.8 → 0.016 m.
            half = {1.25: 0.025, 1.0: 0.02, 0.8: 0.016}[s]
            np.testing.assert_allclose(m.geom_size[cube_geom], [half] * 3, rtol=1e-12)
            # Bounding sphere of a cube of half-side h: h·√3.
            assert m.geom_rbound[cube_geom] == pytest.approx(half * np.sqrt(3), rel=1e-9)
            cube = pb._ids["cube"]  # type: ignore[attr-defined]
            # PyBullet reports a box's full side lengths.
            dims = c.getCollisionShapeData(cube, -1)[0][3]
            np.testing.assert_allclose(dims, [2 * half] * 3, rtol=1e-6)
            lo, hi = c.getAABB(cube)
            # The AABB is the side plus Bullet's collision margin on each face (≤ 0.04 m total).
            assert 2 * half <= hi[0] - lo[0] <= 2 * half + 0.04
    finally:
        mj.close()
        pb.close()


def _episode(env: PandaTaskEnv, task_id: str, seed: int) -> dict:
    from sim_suites.policies import load_policy

    policy = load_policy("sim_suites.policies:scripted", task_id)
    policy.reset(0)
    obs, info0 = env.reset(seed=seed)
    start = obs["object_pos"].copy()
    while True:
        obs, _, terminated, truncated, info = env.step(policy.act(obs))
        if terminated or truncated:
            break
    return {
        "sampled": info0["randomization"]["object_size_scale"],
        "not_applied": info0["not_applied"],
        "start": start,
        "end": obs["object_pos"].copy(),
        "success": bool(info["is_success"]),
        "quality": float(info["quality"]),
    }


def _play(task_id: str, engine: str, s: tuple[float, float], seeds: tuple[int, ...] = (3,)) -> dict:
    """The last of one environment's episodes on `seeds`, under object_size_scale ∈ s."""
    env = PandaTaskEnv(task_id, engine, randomization={"object_size_scale": s})
    try:
        return [_episode(env, task_id, seed) for seed in seeds][-1]
    finally:
        env.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_peg_wider_than_its_hole_does_not_go_in(engine: str) -> None:
    # Hole half-width = PEG_HALF + clearance/2 = 0.012 + 0.002 = 0.014 m. × 1.2 → 0.0144 m: the
    # peg cannot enter; × 1.05 → 0.0126 m still fits (1.4 mm clearance each side).
    assert PEG_HALF[0] * 1.2 > 0.014 > PEG_HALF[0] * 1.05
    nominal = _play("peg_insert/peg_center", engine, (1.0, 1.0))
    fits = _play("peg_insert/peg_center", engine, (1.05, 1.05))
    wide = _play("peg_insert/peg_center", engine, (1.2, 1.2))
    assert nominal["success"] and fits["success"]
    assert not wide["success"] and wide["quality"] < 0.5
    # The resized peg starts standing on the table: centre at 1.2 × 0.04 m.
    assert wide["start"][2] == pytest.approx(1.2 * PEG_HALF[2], abs=1e-3)


@pytest.mark.parametrize("engine", ENGINES)
def test_same_seed_same_size_and_episode(engine: str) -> None:
    a = _play("pick_place/cube_center", engine, (0.8, 1.2), seeds=(11,))
    # The same seed after an episode with another size in the same environment: the resized
    # part of the last episode leaves nothing behind.
    b = _play("pick_place/cube_center", engine, (0.8, 1.2), seeds=(5, 11))
    other = _play("pick_place/cube_center", engine, (0.8, 1.2), seeds=(5,))
    assert 0.8 <= a["sampled"] <= 1.2 and a["sampled"] == b["sampled"] != other["sampled"]
    np.testing.assert_array_equal(a["end"], b["end"])
    assert a["start"][2] == pytest.approx(a["sampled"] * CUBE_HALF, abs=1e-3)


def test_drawer_records_the_knob_as_not_applied() -> None:
    out = _play("drawer_open/drawer_center", "mujoco", (1.2, 1.2))
    assert "object_size_scale" in out["not_applied"]
    assert "articulated" in out["not_applied"]["object_size_scale"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_cameras_see_the_resized_part(engine: str) -> None:
    def red_pixels(s: float) -> int:
        env = PandaTaskEnv(
            "pick_place/cube_center",
            engine,
            observation_mode="rgb",
            randomization={"object_size_scale": (s, s)},
        )
        try:
            rgb = env.reset(seed=3)[0]["scene_rgb"].astype(int)
        finally:
            env.close()
        return int(np.sum((rgb[..., 0] > 120) & (rgb[..., 0] > 2 * rgb[..., 1])))

    small, large = red_pixels(1.0), red_pixels(1.3)
    # The visible faces' area grows with s² = 1.69; at ~25-40 pixels the edges' quantization
    # moves the ratio by ±0.3 (measured 1.67 in MuJoCo, 1.43 in PyBullet).
    assert small > 10 and 1.25 < large / small < 2.1


def test_sensitivity_sweep_finds_the_knob_not_inert() -> None:
    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    raw["battery"] = {"peg_insert": raw["battery"]["peg_insert"]}
    raw["randomization"] = {"object_size_scale": [0.9, 1.2]}
    raw["sampling"]["drifts"] = ["nominal"]
    for section in ("maintenance", "expansion"):  # their calendars name the other drifts
        raw.pop(section, None)
    result = run_sweep(protocol_from_mapping(raw), engines=["mujoco"], instances_per_family=1)
    high = [e for e in result.effects if e.knob == "object_size_scale" and "high" in e.setting]
    assert high and not high[0].inert
    assert high[0].success_perturbed < high[0].success_nominal
