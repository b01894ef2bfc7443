"""Meta-World as a sim engine: its v3 tasks, reset, success signal and expert policies.

An instance `metaworld/<task>` (e.g. `metaworld/pick-place-v3`) runs Meta-World's own benchmark
environment for the task, `gymnasium.make("Meta-World/MT1", env_name=<task>, seed=<scene seed>,
terminate_on_success=True)`: the suite draws its 50 goal/object layouts and picks the episode's
layout from that seed, exactly as a bare Meta-World evaluation with that seed does. The seed is
the pair's scene seed (`embodied_eval.seeds.episode_seeds`); the physics seed draws the protocol's
randomization (`sim_suites.suites.suite_knobs`), applied to the suite's MuJoCo model before its
reset. Success is the suite's `info["success"]` at the last step (episodes end on success, as in
Meta-World's own evaluation, or after the suite's 500 steps or the protocol's `max_steps`).

`policy = "metaworld:expert"` runs the suite's bundled scripted expert of the task
(`metaworld.policies.ENV_POLICY_MAP`); any Gymnasium policy factory `factory(env, seed)` or policy
server works as well. Every record carries `control.suite` = {name, version, task} and a `scene`
with the suite's seed, the object's start and the goal.

Meta-World is optional: without it the engine raises an `EvalError` saying how to install it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import warnings
from collections.abc import Callable, Mapping, Sequence
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
from sim_suites.suites.mujoco_compat import patch_metaworld
from sim_suites.suites.suite_episode import check_suite_engine, run_suite_episode
from sim_suites.suites.suite_knobs import apply_suite_randomization

#: The engine's name in `[sim] engines` and the family of its instances.
SUITE = "metaworld"
#: The package release this engine was written and tested against.
SUITE_VERSION = "3.1.1"
#: How to install it without letting its MuJoCo pin replace the project's MuJoCo.
INSTALL_HINT = f"pip install --no-deps metaworld=={SUITE_VERSION}"
#: The suite's Gymnasium id of one task's benchmark environment.
SUITE_ENV_ID = "Meta-World/MT1"
#: Seeds Meta-World accepts (it seeds `numpy.random.seed`, which takes 32 bits).
MAX_SUITE_SEED = 2**32 - 1

#: Meta-World 3.1.1's v3 tasks (`metaworld.env_dict.ALL_V3_ENVIRONMENTS`), in its order.
TASKS: tuple[str, ...] = (
    "assembly-v3", "basketball-v3", "bin-picking-v3", "box-close-v3",
    "button-press-topdown-v3", "button-press-topdown-wall-v3", "button-press-v3",
    "button-press-wall-v3", "coffee-button-v3", "coffee-pull-v3", "coffee-push-v3",
    "dial-turn-v3", "disassemble-v3", "door-close-v3", "door-lock-v3", "door-open-v3",
    "door-unlock-v3", "hand-insert-v3", "drawer-close-v3", "drawer-open-v3", "faucet-open-v3",
    "faucet-close-v3", "hammer-v3", "handle-press-side-v3", "handle-press-v3",
    "handle-pull-side-v3", "handle-pull-v3", "lever-pull-v3", "pick-place-wall-v3",
    "pick-out-of-hole-v3", "pick-place-v3", "plate-slide-v3", "plate-slide-side-v3",
    "plate-slide-back-v3", "plate-slide-back-side-v3", "peg-insert-side-v3",
    "peg-unplug-side-v3", "soccer-v3", "stick-push-v3", "stick-pull-v3", "push-v3",
    "push-wall-v3", "push-back-v3", "reach-v3", "reach-wall-v3", "shelf-place-v3",
    "sweep-into-v3", "sweep-v3", "window-open-v3", "window-close-v3",
)  # fmt: skip


def task_catalog() -> dict[str, list[str]]:
    """The engine's task catalog: family "metaworld" and one task id per suite task."""
    return {SUITE: [f"{SUITE}/{task}" for task in TASKS]}


def suite_task(task_id: str) -> str:
    """The suite's task name of a task id ("metaworld/reach-v3" → "reach-v3"); EvalError if
    the id is not in the catalog."""
    family, _, task = task_id.partition("/")
    if family != SUITE or task not in TASKS:
        raise EvalError(
            f"task_id: {task_id!r} is not a Meta-World task (expected metaworld/<task>, e.g. "
            f"metaworld/pick-place-v3; `embodied-eval protocol tasks` lists them)",
            key="task_id",
        )
    return task


def suite_version() -> str:
    """The installed Meta-World's version; EvalError with the install command when it is absent.

    Importing it also puts the MuJoCo compatibility shim in place when this MuJoCo needs it.
    """
    try:
        import metaworld  # noqa: F401  (registers the suite's Gymnasium ids)
    except ImportError:
        raise EvalError(
            f"engine metaworld: Meta-World is not installed; install with `{INSTALL_HINT}` "
            "(`make test` does)",
            key="engine",
        ) from None
    patch_metaworld()
    return importlib.metadata.version("metaworld")


def suite_record(task: str) -> dict[str, str]:
    """What every episode record says about where it came from: suite, package version, task."""
    return {"name": SUITE, "version": suite_version(), "task": task}


def make_suite_env(task: str, seed: int, **render: Any) -> Any:
    """Meta-World's own benchmark environment of one task, seeded as a bare evaluation seeds it.

    Args:
        task: the suite's task name ("pick-place-v3").
        seed: the suite's seed (0 ≤ seed < 2**32): it fixes the 50 layouts and the episode's pick.
        render: `render_mode`, `width`, `height`, `camera_name` for the suite's renderer.
    """
    suite_version()
    if not 0 <= seed <= MAX_SUITE_SEED:
        raise EvalError(f"Meta-World seeds lie in [0, 2**32), got {seed}", key="scene_seed")
    return gymnasium.make(
        SUITE_ENV_ID,
        env_name=task,
        seed=int(seed),
        terminate_on_success=True,
        disable_env_checker=True,
        **render,
    )


@functools.cache
def observation_space(task: str) -> spaces.Box:
    """The task's observation space with the goal observable, as the benchmark environment
    returns its observations (the suite's own wrapper keeps the goal-hidden space)."""
    suite_version()
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    env = ALL_V3_ENVIRONMENTS[task]()
    try:
        # As the suite's `set_task` does for a goal-observable task: drop the cached space.
        env._partially_observable = False
        del env.sawyer_observation_space
        space = env.sawyer_observation_space
        return spaces.Box(space.low, space.high, dtype=np.float64)
    finally:
        env.close()


class MetaWorldTaskEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """One Meta-World task as the harness runs it (registered as `embodied/MetaWorld-v0`).

    `reset(seed=s)` splits s with `episode_seeds`: the scene seed seeds the suite (its layout;
    `options={"scene_seed": k}` sets it directly), the physics seed draws the randomization. The
    reset `info` carries `randomization` (applied / not_applied), `scene` and `suite`.
    Observations and actions are the suite's: 39 numbers (hand, gripper, objects, previous
    frame, goal) and 4 in [-1, 1] (hand displacement, gripper effort).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 80}  # noqa: RUF012

    def __init__(
        self,
        task_id: str = "metaworld/reach-v3",
        randomization: Mapping[str, Sequence[float]] | None = None,
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ) -> None:
        self.task_id = task_id
        self.task = suite_task(task_id)
        self.suite = suite_record(self.task)
        self.ranges = {k: (float(v[0]), float(v[1])) for k, v in (randomization or {}).items()}
        if render_mode not in (None, "rgb_array"):
            raise EvalError(f"render_mode {render_mode!r}: expected rgb_array", key="render_mode")
        self.render_mode = render_mode
        self.size = (int(width), int(height))
        self.action_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.observation_space = observation_space(self.task)
        self._suite: Any = None

    @property
    def sawyer(self) -> Any:
        """The suite's own environment object of the current episode (after `reset`)."""
        if self._suite is None:
            raise EvalError("the Meta-World environment must be reset before use", key="reset")
        return self._suite.unwrapped

    @property
    def dt(self) -> float:
        """Simulated seconds per step (the suite's frame skip × its timestep)."""
        return float(self.sawyer.dt)

    @property
    def data(self) -> Any:
        """The suite's `mujoco.MjData` (actuator forces for the energy account)."""
        return self.sawyer.data

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
        self.close()
        render: dict[str, Any] = {}
        if self.render_mode is not None:
            render = {
                "render_mode": self.render_mode,
                "width": self.size[0],
                "height": self.size[1],
            }
        self._suite = make_suite_env(self.task, scene_seed, **render)
        randomization = apply_suite_randomization(
            self._suite.unwrapped, self.ranges, np.random.default_rng(seeds.physics)
        )
        observation, info = self._suite.reset()
        sawyer = self.sawyer
        scene = scene_record(
            "setup",
            sawyer._get_pos_objects()[:3],
            sawyer._get_quat_objects()[:4],
            goal_pos_m=[round(float(v), 6) for v in sawyer._target_pos],
            suite_seed=scene_seed,
        )
        info = {**info, "randomization": randomization, "scene": scene, "suite": dict(self.suite)}
        return np.asarray(observation, dtype=np.float64), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._suite_env().step(action)
        return (
            np.asarray(observation, dtype=np.float64),
            float(reward),
            bool(terminated),
            bool(truncated),
            dict(info),
        )

    def render(self) -> Any:
        return self._suite_env().render()

    def close(self) -> None:
        if self._suite is not None:
            self._suite.close()
            self._suite = None

    def _suite_env(self) -> Any:
        if self._suite is None:
            raise EvalError("the Meta-World environment must be reset before use", key="reset")
        return self._suite


def expert_policy(env: Any, seed: int) -> Callable[[np.ndarray], np.ndarray]:
    """`metaworld:expert`: the suite's bundled scripted expert of the environment's task.

    Meta-World clips each action to [-1, 1] itself before it moves the hand; the expert's raw
    action (its proportional gains overshoot) is clipped the same way here, so the harness's
    action check sees what the suite applies. `seed` is unused: the expert is deterministic.
    """
    task_env = env.unwrapped
    if not isinstance(task_env, MetaWorldTaskEnv):
        raise EvalError(
            "policy metaworld:expert runs on the metaworld engine only (instances "
            "metaworld/<task>)",
            key="policy",
        )
    from metaworld.policies import ENV_POLICY_MAP

    expert_class: Any = ENV_POLICY_MAP[task_env.task]
    expert = expert_class()

    def act(observation: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Constant(s) may be too high": the overshoot
            action = expert.get_action(observation)
        return np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)

    return act


def run_episode(
    spec: EpisodeSpec,
    protocol: Protocol,
    *,
    max_steps: int | None = None,
    record_dir: str | Path | None = None,
    started_at: str | None = None,
) -> EpisodeOutcome:
    """Run one manifest row on Meta-World (the `metaworld` sim engine).

    Args:
        spec: the manifest row; `spec.task_id` is `metaworld/<task>`, `spec.policy` is
            `metaworld:expert`, a Gymnasium policy factory or a policy server URL.
        protocol: its `[randomization]` ranges, `max_steps` and action rule apply.
        max_steps, record_dir, started_at: as `suite_episode.run_suite_episode`.
    """
    check_suite_engine(spec, SUITE)
    env = MetaWorldTaskEnv(spec.task_id, randomization=protocol.randomization)
    return run_suite_episode(
        spec,
        protocol,
        env,
        env_id=SUITE_ENV_ID,
        control={"suite": env.suite},
        max_steps=max_steps,
        record_dir=record_dir,
        started_at=started_at,
    )
