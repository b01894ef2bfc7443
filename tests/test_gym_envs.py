"""Third-party Gymnasium environments as the sim side: Gymnasium's MuJoCo Pusher-v5 and
Reacher-v5, and Gymnasium-Robotics' PointMaze_UMaze-v3.

Hand-computed values: Pusher-v5 steps at dt = frame_skip 5 × timestep 0.01 s = 0.05 s, so 12
steps are 0.6 s of simulated time; Reacher-v5 at dt = 2 × 0.01 s = 0.02 s, so 12 steps are
0.24 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.rollout.gym_physics import apply_randomization
from embodied_eval.runner.gym_side import RANDOM_POLICY
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.runner.work import GymSource
from embodied_eval.store.core import Store

pytestmark = pytest.mark.timeout(180)

HERE = "tests.test_gym_envs"
TASKS = [f"reach/point_{i}" for i in range(5)]

PROTOCOL_TOML = """
[protocol]
name = "gym-third-party"
version = "1"
base_seed = 5

[window]
id = "w-gym"
start = "2026-11-01"
end = "2026-11-30"

[battery.reach]
target_quality = 0.5
instances = {instances}

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 1
real_fraction = 0.0

[randomization]
friction_scale = [0.5, 1.5]
link_mass_scale = [0.8, 1.2]
object_xy_offset_m = [0.0, 0.01]

[sim]
engines = ["mujoco"]
max_steps = 12
"""


def steps_quality(rollout: Any) -> float:
    """q = the fraction of the step limit the rollout ran."""
    return rollout.steps / rollout.max_steps


def maze_quality(rollout: Any) -> float:
    """q = 1 when PointMaze reports success (its info key is "success", not "is_success")."""
    return 1.0 if rollout.final_info.get("success") else 0.0


def write_protocol(tmp_path: Path, instances: str) -> Path:
    path = tmp_path / "protocol.toml"
    path.write_text(PROTOCOL_TOML.format(instances=instances))
    return path


def stored(db: Path):
    with Store(db) as store:
        return store.episodes()


def test_a_run_where_every_episode_fails_exits_non_zero_with_the_first_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    proto = write_protocol(tmp_path, repr(TASKS).replace("'", '"'))
    code = main(
        [
            "run",
            str(proto),
            "--side",
            "sim",
            "--gym-id",
            "Pusher-v5",
            "--policy",
            "embodied_eval.runner.gym_side:random_policy",
            "--executor",
            "sequential",
            "--max-retries",
            "0",
            "--db",
            str(tmp_path / "s.db"),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "5 of the 5 episode(s) settled by this run ended `error`; first error:" in err
    assert "the environment's info has no 'is_success'" in err
    assert "Traceback" not in err


def test_pusher_is_recorded_under_its_own_id_with_simulated_time_and_randomization(
    tmp_path: Path,
):
    import gymnasium

    proto = protocol_from_mapping(
        {
            "protocol": {"name": "g", "version": "1", "base_seed": 5},
            "window": {"id": "w-gym", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"reach": {"target_quality": 0.5, "instances": TASKS}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "randomization": {"friction_scale": [0.5, 1.5], "object_xy_offset_m": [0.0, 0.01]},
            "sim": {"max_steps": 12},
        }
    )
    options = RunOptions(
        executor="sequential",
        sides=("sim",),
        policy=RANDOM_POLICY,
        gym=GymSource("Pusher-v5", f"{HERE}:steps_quality"),
    )
    summary = run_trials(
        proto, options, db_path=tmp_path / "s.db", out_dir=tmp_path / "o", show_progress=False
    )
    assert summary.written == 5 and summary.failed == 0
    episodes = stored(tmp_path / "s.db")
    manifest = plan_manifest(
        proto,
        engines=["gymnasium"],
        sim_policy="embodied_eval.runner.gym_side:random_policy",
        real_policy="embodied_eval.runner.gym_side:random_policy",  # --policy names both sides
        sim_source=options.gym.label,
        sim_task="Pusher-v5",
    )
    seeds = {s.pair_id: s.seed for s in manifest.specs}
    for ep in episodes:
        assert (ep.family, ep.task_id, ep.engine) == ("Pusher-v5", "Pusher-v5", "gymnasium")
        assert ep.status == "ok" and ep.quality == 1.0 and ep.actions == 12
        assert ep.duration_s == pytest.approx(0.6, abs=1e-9)  # 12 x 0.05 s
        assert ep.control["duration_source"] == "simulated"
        applied, skipped = ep.randomization["applied"], ep.randomization["not_applied"]
        assert set(applied) == {"friction_scale"} and 0.5 <= applied["friction_scale"] <= 1.5
        assert skipped == {
            "object_xy_offset_m": "no generic equivalent on an arbitrary MuJoCo model"
        }
        assert ep.energy_wh > 0.0
        assert ep.drift["applied"] is False
    # Seeds are the manifest's.
    assert {ep.pair_id: ep.seed for ep in episodes} == seeds
    # The friction scale drawn for an episode really lands in the model: same generator, fresh env.
    env = gymnasium.make("Pusher-v5")
    before = env.unwrapped.model.geom_friction[:, 0].copy()
    done = apply_randomization(env, {"friction_scale": (0.5, 1.5)}, np.random.default_rng(1))
    scale = done["applied"]["friction_scale"]
    assert scale == pytest.approx(np.random.default_rng(1).uniform(0.5, 1.5))
    assert np.allclose(env.unwrapped.model.geom_friction[:, 0], before * scale)
    env.close()


def test_reacher_mapped_per_instance_keeps_the_protocol_task_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    instances = ", ".join(
        f'{{ task_id = "{t}", env_id = "Reacher-v5", make_kwargs = {{ reward_dist_weight = 2.0 }} }}'
        for t in TASKS
    )
    proto = write_protocol(tmp_path, f"[{instances}]")
    code = main(
        [
            "run",
            str(proto),
            "--side",
            "sim",
            "--engine",
            "gymnasium",
            "--policy",
            RANDOM_POLICY,
            "--executor",
            "sequential",
            "--quality",
            f"{HERE}:steps_quality",
            "--db",
            str(tmp_path / "s.db"),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    episodes = stored(tmp_path / "s.db")
    assert sorted(ep.task_id for ep in episodes) == TASKS
    for ep in episodes:
        assert ep.family == "reach" and ep.control["env_id"] == "Reacher-v5"
        assert ep.duration_s == pytest.approx(0.24, abs=1e-9)  # 12 x 0.02 s
        assert set(ep.randomization["applied"]) == {"friction_scale", "link_mass_scale"}


def test_a_gymnasium_robotics_maze_runs_randomized_and_without_dt_in_wall_time(tmp_path: Path):
    import gymnasium

    proto = protocol_from_mapping(
        {
            "protocol": {"name": "g", "version": "1", "base_seed": 5},
            "window": {"id": "w-gym", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"reach": {"target_quality": 0.5, "instances": TASKS}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "randomization": {"friction_scale": [0.9, 1.1]},
            "sim": {"max_steps": 5},
        }
    )
    options = RunOptions(
        executor="sequential",
        sides=("sim",),
        policy=RANDOM_POLICY,
        gym=GymSource("gymnasium_robotics:PointMaze_UMaze-v3", f"{HERE}:maze_quality"),
    )
    run_trials(
        proto, options, db_path=tmp_path / "s.db", out_dir=tmp_path / "o", show_progress=False
    )
    episodes = stored(tmp_path / "s.db")
    assert len(episodes) == 5
    for ep in episodes:
        assert ep.status == "ok" and ep.task_id == "PointMaze_UMaze-v3" and ep.actions == 5
        # The maze exposes its point robot's MjModel: friction is applied through it.
        assert 0.9 <= ep.randomization["applied"]["friction_scale"] <= 1.1
        assert ep.control["duration_source"] == "wall"  # the maze env has no dt
    # An environment without a MuJoCo model: every knob is recorded as not applied.
    env = gymnasium.make("CartPole-v1")
    assert apply_randomization(env, {"friction_scale": (0.9, 1.1)}, np.random.default_rng(0)) == {
        "applied": {},
        "not_applied": {"friction_scale": "the environment exposes no MuJoCo model"},
    }
    env.close()
