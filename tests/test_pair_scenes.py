"""A pair is one trial in two worlds: the sim half, the twin robot's scene reset and the
technician's setup prompt all start from the pair's one scene (no ROS here; the ROS path's
tracker readings are checked in the bridge runner tests)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sim_suites.env", exc_type=ImportError)

from embodied_eval.protocol.reader import load_protocol
from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import episode_seeds
from real_bridge.interface import episode_manifest
from real_bridge.observation import scene_setup
from real_bridge.twin.settings import TwinSettings
from real_bridge.twin.sim_plant import SimSuitesPlant
from sim_suites.episode import run_episode
from sim_suites.scenes import yaw_of_quat

pytestmark = pytest.mark.timeout(300)

EXAMPLE = Path(__file__).resolve().parents[1] / "embodied_eval" / "data" / "example_protocol.toml"
#: One instance per family and the seeds tried (the example's placement is 0-4 cm, yaw ±0.3 rad,
#: size ×0.9-1.1, plus physics knobs the twin must not take).
TASKS = {
    "pick_place": "pick_place/steel_left",
    "push": "push/rubber_diagonal",
    "drawer_open": "drawer_open/sticky_right",
    "peg_insert": "peg_insert/peg_far",
    "tool_use": "tool_use/rubber_right",
}
SEEDS = (11, 2026, 4_000_000_007)


def spec(task_id: str, seed: int, side: str, engine: str) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"{task_id}-{seed}-{side}-{engine}",
        pair_id=f"{task_id}-{seed}",
        side=side,
        family=task_id.split("/")[0],
        task_id=task_id,
        seed=seed,
        drift_name="day14_worn",
        drift={"payload_kg": 0.3, "friction_scale": 0.8},
        engine=engine,
    )


def test_episode_seeds_split_one_seed_into_three_streams() -> None:
    seeds = episode_seeds(2026)
    # Children 0, 1, 2 of SeedSequence(2026), first 32-bit word each.
    children = np.random.SeedSequence(2026).spawn(3)
    expected = [int(c.generate_state(1, np.uint32)[0]) for c in children]
    assert [seeds.physics, seeds.policy, seeds.scene] == expected
    assert len({seeds.physics, seeds.policy, seeds.scene}) == 3


def test_yaw_of_quat_reads_rotation_about_the_vertical() -> None:
    half = 0.25 / 2.0
    assert yaw_of_quat((np.cos(half), 0.0, 0.0, np.sin(half))) == pytest.approx(0.25)
    assert yaw_of_quat((1.0, 0.0, 0.0, 0.0)) == 0.0


@pytest.fixture(scope="module")
def protocol():
    return load_protocol(EXAMPLE)


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
@pytest.mark.parametrize("family", sorted(TASKS))
def test_sim_twin_and_setup_start_from_the_pairs_scene(protocol, family, engine) -> None:
    task_id = TASKS[family]
    plant = SimSuitesPlant(TwinSettings(engine=engine))
    try:
        offsets = []
        for seed in SEEDS:
            sim = run_episode(spec(task_id, seed, "sim", engine), protocol, max_steps=1).episode
            real_spec = spec(task_id, seed, "real", "ros2")
            manifest = episode_manifest(real_spec, protocol)
            plant.reset_scene(real_spec, manifest)
            pos, quat = plant.object_pose()  # the twin's true pose (its tracker adds noise)
            setup = scene_setup(real_spec, manifest)
            assert sim.scene["source"] == "setup"
            np.testing.assert_allclose(pos, sim.scene["object_pos_m"], atol=2e-6)
            np.testing.assert_allclose(setup.object_pos, sim.scene["object_pos_m"], atol=2e-6)
            assert yaw_of_quat(quat) == pytest.approx(sim.scene["object_yaw_rad"], abs=2e-6)
            # The drawn scene and the physics: the twin takes the scene, never the sim's physics
            # draws (friction here is the drift × the twin's gap, 0.8 × 0.85).
            twin_sampled = plant.env.sampled
            for knob in ("object_xy_offset_m", "object_yaw_rad", "object_size_scale"):
                assert twin_sampled[knob] == pytest.approx(sim.randomization[knob], abs=1e-9)
            assert "friction_scale" in sim.randomization
            assert "friction_scale" not in twin_sampled
            assert plant.env.params.physics.friction_scale == pytest.approx(0.8 * 0.85)
            offsets.append(np.hypot(*sim.scene["object_xy_offset_m"]))
        # The scene really is drawn: three seeds, three placements, each 0-4 cm off nominal.
        assert len({round(o, 6) for o in offsets}) == 3
        assert all(0.0 <= o <= 0.04 for o in offsets)
    finally:
        plant.close()


def test_a_pairs_scene_does_not_depend_on_the_sims_physics_ranges(protocol) -> None:
    """Widening a physics range changes the sim's physics draws, never the scene."""
    task_id = TASKS["push"]
    base = run_episode(spec(task_id, 7, "sim", "mujoco"), protocol, max_steps=1).episode
    wider = dataclasses.replace(
        protocol, randomization={**protocol.randomization, "friction_scale": (0.1, 5.0)}
    )
    other = run_episode(spec(task_id, 7, "sim", "mujoco"), wider, max_steps=1).episode
    assert other.randomization["friction_scale"] != base.randomization["friction_scale"]
    assert other.scene == base.scene


def test_distractors_stand_where_the_sim_put_them_on_the_twin_and_in_the_setup(protocol) -> None:
    """Distractors are part of the pair's scene: the twin's scene reset and the technician's
    setup stand them where the sim half did."""
    task_id = TASKS["pick_place"]
    with_distractors = dataclasses.replace(
        protocol, randomization={**protocol.randomization, "distractor_count": (3.0, 3.0)}
    )
    plant = SimSuitesPlant(TwinSettings(engine="mujoco"))
    try:
        for seed in SEEDS[:2]:
            sim = run_episode(
                spec(task_id, seed, "sim", "mujoco"), with_distractors, max_steps=1
            ).episode
            spots = sim.scene["distractors_xy"]
            assert sim.randomization["distractor_count"] == 3 and len(spots) == 3
            real_spec = spec(task_id, seed, "real", "ros2")
            manifest = episode_manifest(real_spec, with_distractors)
            plant.reset_scene(real_spec, manifest)
            assert plant.env.sampled["distractor_count"] == 3
            for k, (x, y) in enumerate(spots):
                pos, _ = plant.env.backend.body_pose(f"distractor_{k}")
                np.testing.assert_allclose(pos[:2], [x, y], atol=1e-9)
            setup = scene_setup(real_spec, manifest)
            np.testing.assert_allclose(setup.distractors_xy, spots, atol=1e-9)
            assert f"distractor_2 standing at x={spots[2][0]:.3f}" in "\n".join(setup.lines())
    finally:
        plant.close()
