"""Meta-World as a sim engine: the MuJoCo 4.0 shim, the harness reproducing the bare suite, the
record's provenance, randomization through the suite's model, check_env and determinism.

Hand-computed values: Meta-World steps at dt = frame_skip 5 × timestep 0.0025 s = 0.0125 s, so an
episode of n steps lasts n × 0.0125 s of simulated time. Its pick-place object ("obj") weighs
0.75 kg in the suite's model, so object_mass_scale = 3 makes it 2.25 kg. Its gripper servos have
kp = 400 (gain 400, bias −400); actuator_gain_scale = 0.5 makes them 200 / −200.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from embodied_eval.cli.main import main
from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.protocol.task_catalog import check_instances
from embodied_eval.records import EpisodeSpec
from embodied_eval.runner.options import RunOptions, run_settings
from embodied_eval.seeds import episode_seeds
from sim_suites.suites import meta_world, mujoco_compat
from sim_suites.suites.meta_world import MetaWorldTaskEnv, expert_policy, run_episode
from sim_suites.suites.suite_knobs import apply_suite_randomization
from tests.suite_support import suite_protocol_text, suite_spec

pytestmark = pytest.mark.timeout(300)

TASKS = ["metaworld/reach-v3", "metaworld/push-v3", "metaworld/pick-place-v3"]


def protocol_text(
    instances: list[str] = TASKS, randomization: str = "", real_fraction: float = 0.0
) -> str:
    return suite_protocol_text(
        "metaworld", instances, policy="metaworld:expert", max_steps=500,
        randomization=randomization, real_fraction=real_fraction,
    )  # fmt: skip


def make_protocol(**kw: object):
    return protocol_from_mapping(tomllib.loads(protocol_text(**kw)))  # type: ignore[arg-type]


def spec(task_id: str, seed: int, policy: str = "metaworld:expert") -> EpisodeSpec:
    return suite_spec(task_id, seed, policy, f"mw-{task_id.split('/')[1]}-{seed}")


def bare_episode(task: str, seed: int) -> tuple[bool, int, list[np.ndarray]]:
    """The suite on its own: `Meta-World/MT1` with the seed, its expert's raw actions."""
    from metaworld.policies import ENV_POLICY_MAP

    mujoco_compat.patch_metaworld()
    env = gymnasium.make("Meta-World/MT1", env_name=task, seed=seed, terminate_on_success=True)
    expert = ENV_POLICY_MAP[task]()
    obs, _ = env.reset()
    observations, done, info = [obs], False, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while not done:
            obs, _, terminated, truncated, info = env.step(expert.get_action(obs))
            observations.append(obs)
            done = terminated or truncated
    env.close()
    return bool(info["success"]), len(observations) - 1, observations


# ------------------------------------------------------------------ the MuJoCo 4.0 shim


def test_write_eq_data_pads_an_old_row_into_a_wider_one() -> None:
    data = np.full((2, 12), 7.0)
    mujoco_compat.write_eq_data(data, 1, mujoco_compat.METAWORLD_WELD_ROW)
    assert data[1].tolist() == [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5, 0]
    assert data[0].tolist() == [7.0] * 12  # other rows untouched
    narrow = np.full((1, 11), 7.0)
    mujoco_compat.write_eq_data(narrow, 0, mujoco_compat.METAWORLD_WELD_ROW)
    assert narrow[0].tolist() == [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5]
    with pytest.raises(ValueError, match="do not fit"):
        mujoco_compat.write_eq_data(np.zeros((1, 10)), 0, mujoco_compat.METAWORLD_WELD_ROW)


def test_shim_resets_the_weld_of_a_mujoco_model() -> None:
    import mujoco

    model = mujoco.MjModel.from_xml_string(
        """<mujoco><worldbody>
             <body name="mocap" mocap="true"/>
             <body name="hand"><freejoint/><geom size="0.02"/></body>
           </worldbody>
           <equality><weld body1="mocap" body2="hand"/></equality></mujoco>"""
    )
    model.eq_data[0, :] = 9.0

    class Holder:
        pass

    holder = Holder()
    holder.model = model  # type: ignore[attr-defined]
    mujoco_compat.reset_mocap_welds(holder)
    width = model.eq_data.shape[1]
    assert model.eq_data[0].tolist() == [0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5] + [0] * (width - 11)


def test_metaworld_builds_on_this_mujoco_with_the_shim() -> None:
    import mujoco
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    assert mujoco_compat.needs_patch() == (mujoco.mjNEQDATA != 11)
    assert mujoco_compat.patch_metaworld() == mujoco_compat.needs_patch()
    env = ALL_V3_ENVIRONMENTS["reach-v3"]()  # fails in reset_mocap_welds without the shim
    weld = int(mujoco.mjtEq.mjEQ_WELD)
    rows = [i for i in range(env.model.neq) if int(env.model.eq_type[i]) == weld]
    assert rows and env.model.eq_data[rows[0], 6] == -1.0 and env.model.eq_data[rows[0], 10] == 5.0
    env.close()


# ------------------------------------------------------------------ catalog and errors


def test_catalog_lists_every_task_of_the_installed_suite() -> None:
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    assert list(meta_world.TASKS) == list(ALL_V3_ENVIRONMENTS)
    catalog = meta_world.task_catalog()
    assert list(catalog) == ["metaworld"]
    assert "metaworld/pick-place-v3" in catalog["metaworld"] and len(catalog["metaworld"]) == 50
    check_instances(make_protocol())  # the three tasks are in the engine's catalog
    with pytest.raises(EvalError, match=r"did you mean 'metaworld/pick-place-v3'"):
        check_instances(make_protocol(instances=["metaworld/pick-place-v9"]))


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "metaworld", None)  # import metaworld -> ImportError
    with pytest.raises(EvalError) as err:
        meta_world.suite_version()
    assert "pip install --no-deps metaworld==3.1.1" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_suite_protocol_refuses_a_real_side() -> None:
    with pytest.raises(EvalError, match="no real counterpart"):
        run_settings(make_protocol(real_fraction=0.5), RunOptions())
    with pytest.raises(EvalError, match="no real counterpart"):
        run_settings(make_protocol(), RunOptions(sides=("real",)))
    settings = run_settings(make_protocol(real_fraction=0.5), RunOptions(sides=("sim",)))
    assert settings.engines == ("metaworld",)


def test_expert_needs_the_metaworld_engine() -> None:
    env = gymnasium.make("Pusher-v5")
    with pytest.raises(EvalError, match="metaworld engine only"):
        expert_policy(env, 0)
    env.close()


# ------------------------------------------------------------------ the harness reproduces the suite


@pytest.mark.parametrize("task_id", TASKS)
def test_harness_episode_matches_the_bare_suite(task_id: str, tmp_path: Path) -> None:
    seed = 11
    episode = run_episode(spec(task_id, seed), make_protocol(), record_dir=tmp_path).episode
    scene_seed = episode_seeds(seed).scene
    success, steps, observations = bare_episode(task_id.split("/")[1], scene_seed)
    assert success and episode.quality == 1.0  # the expert succeeds, both ways
    assert episode.actions == steps == episode.control["steps"]
    assert episode.duration_s == pytest.approx(steps * 0.0125, abs=1e-9)
    # The same trajectory: every observation the policy saw, step for step.
    trace = np.load(episode.artifacts[0].path)
    np.testing.assert_array_equal(trace["obs.observation"], np.asarray(observations[:-1]))
    assert episode.control["suite"] == {
        "name": "metaworld",
        "version": importlib.metadata.version("metaworld"),
        "task": task_id.split("/")[1],
    }
    assert episode.scene["suite_seed"] == scene_seed
    assert episode.control["env_id"] == "Meta-World/MT1" and episode.control["terminated"]


def test_same_seed_same_trajectory_other_seed_other_scene(tmp_path: Path) -> None:
    proto = make_protocol(randomization="friction_scale = [0.8, 1.2]")
    runs = [
        run_episode(spec("metaworld/push-v3", s), proto, record_dir=tmp_path / f"{s}-{k}").episode
        for s, k in ((4, 0), (4, 1), (5, 0))
    ]
    a, b = (np.load(e.artifacts[0].path) for e in runs[:2])
    np.testing.assert_array_equal(a["obs.observation"], b["obs.observation"])
    np.testing.assert_array_equal(a["action"], b["action"])
    assert runs[0].randomization == runs[1].randomization
    assert runs[0].scene == runs[1].scene and runs[0].scene != runs[2].scene
    assert runs[0].randomization != runs[2].randomization


# ------------------------------------------------------------------ randomization


def test_knobs_act_on_the_suite_model_or_are_recorded_as_not_applied() -> None:
    env = meta_world.make_suite_env("pick-place-v3", 0)
    sawyer = env.unwrapped
    model = sawyer.model
    friction = model.geom_friction[:, 0].copy()
    obj = model.body("obj").id
    hand_mass = model.body_mass[model.body("right_l6").id]
    table_mass = model.body_mass[model.body("tablelink").id]
    light = model.light_diffuse.copy()
    ranges = {
        "friction_scale": (2.0, 2.0),
        "object_mass_scale": (3.0, 3.0),
        "link_mass_scale": (1.5, 1.5),
        "actuator_gain_scale": (0.5, 0.5),
        "lighting_scale": (0.5, 0.5),
        "object_xy_offset_m": (0.0, 0.02),
        "sensor_noise_std": (0.0, 0.01),
        "camera_offset_m": (0.0, 0.03),
    }
    record = apply_suite_randomization(sawyer, ranges, np.random.default_rng(0))
    assert record["applied"] == {
        "actuator_gain_scale": 0.5,
        "friction_scale": 2.0,
        "lighting_scale": 0.5,
        "link_mass_scale": 1.5,
        "object_mass_scale": 3.0,
    }
    assert set(record["not_applied"]) == {
        "object_xy_offset_m",
        "sensor_noise_std",
        "camera_offset_m",
    }
    assert record["not_applied"]["camera_offset_m"] == "no counterpart in the suite's model"
    np.testing.assert_allclose(model.geom_friction[:, 0], 2.0 * friction)
    assert model.body_mass[obj] == pytest.approx(2.25)
    assert model.body_mass[model.body("right_l6").id] == pytest.approx(1.5 * hand_mass)
    assert model.body_mass[model.body("tablelink").id] == table_mass  # not the robot
    assert model.actuator_gainprm[:, 0].tolist() == [200.0, 200.0]
    assert model.actuator_biasprm[:, 1].tolist() == [-200.0, -200.0]
    np.testing.assert_allclose(model.light_diffuse, 0.5 * light)
    env.close()


def test_episode_records_what_was_applied_and_what_not() -> None:
    proto = make_protocol(
        randomization="object_mass_scale = [1.2, 1.2]\nobject_yaw_rad = [-0.2, 0.2]"
    )
    episode = run_episode(spec("metaworld/reach-v3", 2), proto).episode
    assert episode.randomization["applied"] == {"object_mass_scale": 1.2}
    assert episode.randomization["not_applied"] == {
        "object_yaw_rad": "the suite places its objects itself from the scene seed"
    }
    assert episode.drift["applied"] is False


# ------------------------------------------------------------------ the registry entry


@pytest.mark.parametrize("task_id", ["metaworld/pick-place-v3"])
def test_check_env_on_the_registered_suite_env(task_id: str) -> None:
    from gymnasium.utils.env_checker import check_env

    import sim_suites  # noqa: F401  (registers the ids)

    env = gymnasium.make(
        "embodied/MetaWorld-v0", task_id=task_id, randomization={"friction_scale": (0.9, 1.1)}
    )
    assert isinstance(env.unwrapped, MetaWorldTaskEnv)
    check_env(env.unwrapped, skip_render_check=True)
    obs_a, info_a = env.reset(seed=21)
    obs_b, info_b = env.reset(seed=21)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert info_a["randomization"] == info_b["randomization"]
    assert env.observation_space.contains(obs_a)
    env.close()


# ------------------------------------------------------------------ the CLI


def test_cli_runs_a_suite_protocol_and_refuses_a_real_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "protocol.toml"
    path.write_text(protocol_text(instances=["metaworld/reach-v3"]))
    db = tmp_path / "store.db"
    code = main(["run", str(path), "--db", str(db), "--out", str(tmp_path / "out"),
                 "--executor", "sequential"])  # fmt: skip
    assert code == 0
    from embodied_eval.store.core import Store

    with Store(db) as store:
        (episode,) = store.episodes()
    assert episode.engine == "metaworld" and episode.quality == 1.0
    assert episode.control["suite"]["task"] == "reach-v3"
    capsys.readouterr()
    path.write_text(protocol_text(instances=["metaworld/reach-v3"], real_fraction=1.0))
    code = main(["run", str(path), "--db", str(tmp_path / "b.db"), "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "no real counterpart" in err and len(err.splitlines()) == 1
