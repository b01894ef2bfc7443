"""Episodes per second: the full harness episode vs a bare loop, per engine, in one run.

Harness: `sim_suites.episode.run_episode` with domain randomization, safety monitors, fault
book-keeping, QC/energy signals, the Episode record and a trajectory file written per episode.
Bare loop: the same physics model, controller, contact grasp rule and scripted policy stepping the same
task to the same completion rule, with nominal parameters and nothing else.

Per observation mode: `state`, and `rgb` (two 128×128 cameras at 10 Hz). In rgb mode the harness
replays the actions of the state episode of the same seed (same trajectory, so the difference is
the cost of the cameras) and the bare loop renders the same two cameras at the same rate.

Also prints the reference policy's AR per family and engine, nominal and under strong DR
(`--ar-seeds 0` skips that part), and the vision policy's AR (`--vision-seeds`, MuJoCo; Wilson 95 %
intervals) nominal, under the protocol's DR, with its day-14 drift, and in a dim cell.

Run: .venv/bin/python benchmarks/sim_bench.py [--episodes 8] [--ar-seeds 2] [--vision-seeds 1]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.records import EpisodeSpec
from embodied_eval.stats.proportions import wilson_bounds
from sim_suites.controller import ArmController, capped_velocity
from sim_suites.engines.base import InitialState, PhysicsParams
from sim_suites.engines.factory import make_backend
from sim_suites.episode import run_episode
from sim_suites.grasping import both_fingers_press
from sim_suites.policies import scripted
from sim_suites.rendering.appearance import Appearance
from sim_suites.rendering.feed import CAMERA_RATE_HZ
from sim_suites.robot import FINGER_MAX_M, HOME_Q, panda_kinematics
from sim_suites.scenes import episode_seeds
from sim_suites.tasks import TASK_SPECS, TaskState, make_task
from sim_suites.tasks.base import COMPLETION_HOLD_STEPS
from sim_suites.variations import STRONG_RANDOMIZATION

TASK = "pick_place/cube_center"
IMAGE = (128, 128)
MAX_STEPS = 400
SUBSTEPS = 10
DT = 0.02


def bare_episode(engine_state: dict[str, Any], seed: int, render_every: int = 0) -> int:
    """One episode of the bare loop; returns the number of control steps.

    With `render_every` > 0 both cameras are drawn (RGB) every that many control steps.
    """
    backend, task, kin = engine_state["backend"], engine_state["task"], engine_state["kin"]
    controller = ArmController(kin)
    policy = engine_state["policy"]
    backend.reset(InitialState(arm_q=HOME_Q.copy(), finger_q=FINGER_MAX_M), PhysicsParams())
    controller.reset(HOME_Q)
    policy.reset(seed)
    goal = task.goal_pos(np.zeros(2))
    name = task.object_name
    complete = 0
    zeros4 = np.zeros(4)
    for step in range(MAX_STEPS):
        q, _ = backend.joint_state()
        rots, origins = kin.link_frames(q[:7])
        tcp, _ = kin.tcp_from_frames(rots[6], origins[6])
        pos, _ = backend.body_pose(name)
        point = task.tracked_point(pos)
        attached = both_fingers_press(*backend.finger_contact_forces(name))
        obs = {
            "tcp_pos": tcp,
            "tcp_target": controller.tcp_target,
            "object_pos": point,
            "object_visible": np.ones(1),
            "goal_pos": goal,
            "grasped": np.array([1.0 if attached else 0.0]),
            "gripper_width": np.array([q[7] + q[8]]),
            "obstacle": zeros4,
        }
        if render_every and step % render_every == 0:
            backend.render("scene", False)
            backend.render("wrist", False)
        action = policy.act(obs)
        cmd = controller.command(
            capped_velocity(action), float(action[3]), DT, q[:7], tcp, rots, origins
        )
        backend.step(cmd.arm_cmd, cmd.finger, SUBSTEPS)
        q, _ = backend.joint_state()
        tcp = kin.forward(q[:7])[0]
        point = task.tracked_point(backend.body_pose(name)[0])
        held = both_fingers_press(*backend.finger_contact_forces(name))
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

    def __init__(self) -> None:
        self.policy = scripted(TASK)
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


def throughput(engine: str, episodes: int, record_dir: Path, mode: str) -> dict[str, float]:
    """Median episode wall times (s) and episodes/s for the harness and the bare loop."""
    task = make_task(TASK)
    cameras = mode == "rgb"
    state: dict[str, Any] = {
        "backend": make_backend(engine, task.scene(), image_size=IMAGE if cameras else None),
        "task": task,
        "kin": panda_kinematics(),
        "policy": scripted(TASK),
    }
    render_every = round(50 / CAMERA_RATE_HZ) if cameras else 0
    if cameras:
        state["backend"].reset(InitialState(HOME_Q.copy(), FINGER_MAX_M), PhysicsParams())
        state["backend"].set_appearance(Appearance())
    policies: dict[int, Any] = {}
    for seed in range(episodes + 1):
        if cameras:
            recorder = Recorder()
            run_episode(spec_for(TASK, engine, seed), policy=recorder)
            policies[seed] = Replay(recorder.actions)
        else:
            policies[seed] = None
    # Build and warm the cache.
    run_episode(spec_for(TASK, engine, 0), policy=policies[0], record_dir=record_dir)
    bare_episode(state, 0, render_every)
    harness_s, bare_s, harness_steps, bare_steps = [], [], [], []
    harness_cpu, bare_cpu = [], []
    for seed in range(1, episodes + 1):
        # Interleave the two so load changes hit both alike. CPU time of this process is
        # reported next to wall time: on a shared machine it is the steadier of the two.
        t0, c0 = time.perf_counter(), time.process_time()
        spec = spec_for(TASK, engine, seed)
        ep = run_episode(spec, policy=policies[seed], record_dir=record_dir).episode
        harness_s.append(time.perf_counter() - t0)
        harness_cpu.append(time.process_time() - c0)
        harness_steps.append(ep.actions)
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
    }


def reference_ar(engine: str, seeds: int, strong: bool) -> dict[str, float]:
    """AR of the scripted policy per family over all instances × `seeds` seeds."""
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
    return {family: float(np.mean(w)) for family, w in wins.items()}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--ar-seeds", type=int, default=2)
    parser.add_argument("--vision-seeds", type=int, default=1)
    parser.add_argument("--engines", default="mujoco,pybullet")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    # Trajectory files go to a RAM disk when there is one, so the figure measures the harness
    # (serialize + atomic write) rather than the disk's fsync latency.
    ram = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=ram) as tmp:
        engines = args.engines.split(",")
        per_episode: dict[tuple[str, str], tuple[float, float]] = {}
        for engine, mode in itertools.product(engines, ("state", "rgb")):
            r = throughput(engine, args.episodes, Path(tmp), mode)
            per_episode[engine, mode] = (r["harness_s"], r["harness_cpu_s"])
            print(
                f"{engine:9s} {mode:5s} {TASK}: harness median {r['harness_s']:.3f} s/episode "
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
        for engine in engines:
            (rgb_s, rgb_cpu), (state_s, state_cpu) = (
                per_episode[engine, "rgb"],
                per_episode[engine, "state"],
            )
            print(
                f"{engine:9s} rgb/state harness episode time: wall {rgb_s / state_s:.2f}, "
                f"CPU {rgb_cpu / state_cpu:.2f} (target <= 3 in MuJoCo)"
            )
    print(f"load average after: {os.getloadavg()}")
    if args.ar_seeds > 0:
        for engine in ("mujoco", "pybullet"):
            for strong in (False, True):
                ar = reference_ar(engine, args.ar_seeds, strong)
                label = "strong DR" if strong else "protocol DR"
                n = 5 * args.ar_seeds
                cells = ", ".join(f"{f} {v:.2f}" for f, v in ar.items())
                print(f"reference AR {engine:9s} {label:11s} (n={n}/family): {cells}")
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
