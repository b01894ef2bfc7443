"""Remote policy and Ray benchmark, in one run.

1. **Policy over the websocket.** Each policy in process against the same policy served by
   `embodied-eval policy serve` (a separate process) on loopback, over the same MuJoCo push
   episode (both policies are deterministic, so both runs are the same episode): per-step policy
   latency p50/p99 (observation in → action out, including the wire), and the per-step
   episode time — environment step + policy, what an evaluation waits for — as the ratio
   remote / in-process. Three observation sets:
   - `state`: the scripted policy on the env's state arrays;
   - `state+image`: the same plus a fixed 128×128×3 uint8 frame attached to every observation
     (the env renders nothing: the image's wire cost against a state env's cheap step — the
     worst case for the ratio);
   - `camera rgbd`: the vision policy on the env's own camera observations (scene and wrist
     cameras, 128×128 RGB + depth each, ~230 kB per step; the env renders them at 10 Hz).
   Target: the episode time ratio ≤ 1.5 for image observations.
2. **Ray vs local pool.** `run_trials` on 200 real MuJoCo episodes (5 push instances × 40 seeds,
   60 control steps) with 2 workers each: wall time of the local pool and of Ray (Ray starting
   its own local cluster), their ratio, and Ray's fixed start-up + shutdown cost measured alone.

Prints the load average before and after. Run: `nice -n 10 .venv/bin/python benchmarks/policy_bench.py`.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASK = "push/block_forward"
STEPS = 200
PUSH = [f"push/block_{n}" for n in ("forward", "left", "right", "long", "diagonal")]


def make_env(mode: str):
    from sim_suites.env import PandaTaskEnv

    return PandaTaskEnv(TASK, "mujoco", observation_mode=mode, max_steps=STEPS)


def time_episode(policy, env, image: np.ndarray | None) -> tuple[list[float], float, int]:
    """One episode: per-step policy latencies (ms), the loop's seconds (env step + policy act)
    and the number of steps."""
    obs, _ = env.reset(seed=3)
    policy.reset(0)
    latencies = []
    t_start = time.perf_counter()
    while True:
        if image is not None:
            obs = {**obs, "image": image}
        t0 = time.perf_counter()
        action = policy.act(obs)
        latencies.append((time.perf_counter() - t0) * 1e3)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return latencies, time.perf_counter() - t_start, len(latencies)


def start_server(target: str) -> tuple[subprocess.Popen, int]:
    command = [sys.executable, "-m", "embodied_eval", "policy", "serve"]
    command += [target, "--port", "0", "--task", TASK]
    proc = subprocess.Popen(
        [*command, "--log-file", os.devnull],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    match = re.search(r":(\d+)", proc.stdout.readline().split("ws://", 1)[1])
    assert match
    return proc, int(match.group(1))


REPEATS = 5


def policy_part() -> None:
    from embodied_eval.remote.client import RemotePolicy
    from sim_suites.policies import load_policy

    image = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    cases = (
        ("state", "sim_suites.policies:scripted", "state", None),
        ("state+image", "sim_suites.policies:scripted", "state", image),
        ("camera rgbd", "sim_suites.policies:vision", "rgbd", None),
    )
    print(f"policy: {TASK}, MuJoCo, {REPEATS} episodes each (interleaved), medians")
    for label, target, mode, img in cases:
        proc, port = start_server(target)
        try:
            env = make_env(mode)
            policies = {
                "in-process": load_policy(target, TASK),
                "websocket": RemotePolicy(f"ws://127.0.0.1:{port}", TASK),
            }
            time_episode(policies["websocket"], env, img)  # warm-up (connects)
            lat: dict[str, list[float]] = {name: [] for name in policies}
            loop: dict[str, list[float]] = {name: [] for name in policies}
            steps = 0
            for _ in range(REPEATS):
                for name, policy in policies.items():
                    step_ms, seconds, steps = time_episode(policy, env, img)
                    lat[name] += step_ms
                    loop[name].append(seconds / steps * 1e3)
            print(f"  {label} ({steps} steps per episode)")
            for name in policies:
                p50, p99 = np.percentile(lat[name], [50, 99])
                print(
                    f"    {name:10s} policy latency p50 {p50:7.3f} ms  p99 {p99:7.3f} ms"
                    f"  | episode time per step {statistics.median(loop[name]):7.3f} ms"
                )
            ratio = statistics.median(loop["websocket"]) / statistics.median(loop["in-process"])
            print(f"    episode time ratio websocket / in-process: {ratio:.2f}")
            policies["websocket"].close()
        finally:
            proc.terminate()
            proc.wait(10)


def ray_part() -> None:
    import ray

    from embodied_eval.protocol.reader import protocol_from_mapping
    from embodied_eval.runner.trials import RunOptions, run_trials

    proto = protocol_from_mapping(
        {
            "protocol": {"name": "bench", "version": "1", "base_seed": 1},
            "window": {"id": "w-bench", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 40, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco"], "max_steps": 60},
        }
    )
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    started = time.perf_counter() - t0
    t0 = time.perf_counter()
    ray.shutdown()
    stopped = time.perf_counter() - t0
    print(f"ray: local 2-CPU cluster start {started:.2f} s, shutdown {stopped:.2f} s")
    walls = {}
    for executor in ("local", "ray"):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            summary = run_trials(
                proto,
                RunOptions(sides=("sim",), executor=executor, workers=2),
                db_path=Path(tmp) / "s.db",
                out_dir=Path(tmp) / "out",
                show_progress=False,
            )
            walls[executor] = time.perf_counter() - t0
            assert summary.written == 200 and summary.failed == 0
        print(
            f"  {executor:5s}: 200 episodes in {walls[executor]:.2f} s (2 workers, start-up included)"
        )
    print(
        f"  ratio ray / local pool: {walls['ray'] / walls['local']:.2f} "
        f"(without Ray's start+shutdown: {(walls['ray'] - started - stopped) / walls['local']:.2f})"
    )


def main() -> None:
    print(f"load average before: {os.getloadavg()} on {os.cpu_count()} CPUs")
    policy_part()
    ray_part()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
