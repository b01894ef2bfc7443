"""Runner benchmark: a 2-worker local pool against the sequential executor, in one run.

Two workloads, each timed REPEATS times per executor (alternating), reporting medians and the
speed-up ratio sequential / pool:

1. `executor`: `map_episodes` alone on a CPU-bound synthetic episode of about 0.15 s (pure Python
   arithmetic, calibrated here), so the ratio shows the executor's own overhead.
2. `runner`: `run_trials` end to end on real MuJoCo episodes (one family of 5 push instances x 12
   seeds, up to 300 control steps, about 0.2 s each), including the manifest, the store writes and
   the pool start-up (each worker imports the simulators and builds its models: ~0.75 s CPU).

On an idle 2-core machine the target is a ratio >= 1.7. Other jobs on the machine eat into it, so
the load average is printed before and after, with the CPU seconds each variant used (parent plus
workers): a pool that uses about the sequential CPU but no less wall time was starved of cores. Run: `.venv/bin/python benchmarks/runner_bench.py`.
"""

from __future__ import annotations

import functools
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from embodied_eval.manifest import plan_manifest
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.runner.executors import LocalPoolExecutor, SequentialExecutor

# `embodied_eval.runner.trials` (store, pandas) is imported inside `time_runner` only: pool
# workers re-import this script as their main module, and should not pay for pandas.

REPEATS = 3
WORKERS = 2
TARGET_S = 0.15


def busy(iterations: int) -> int:
    """Pure-Python arithmetic: CPU work that releases no lock and touches no memory to speak of."""
    total = 0
    for i in range(iterations):
        total = (total + i * i) % 1_000_003
    return total


def synthetic_episode(iterations: int, spec: EpisodeSpec) -> EpisodeOutcome:
    """A CPU-bound stand-in episode (`iterations` of `busy`), deterministic per spec."""
    value = busy(iterations + spec.seed % 7)
    return EpisodeOutcome(episode=spec.to_episode((value % 1000) / 999))


def calibrate(target_s: float) -> int:
    """Iterations of `busy` that take about `target_s` of CPU here (median of 3).

    CPU time, not wall time, so other jobs on the machine do not shrink the episodes.
    """
    n = 200_000
    t0 = time.process_time()
    busy(n)
    per_iter = (time.process_time() - t0) / n
    n = int(target_s / per_iter)
    times = []
    for _ in range(3):
        t0 = time.process_time()
        busy(n)
        times.append(time.process_time() - t0)
    return int(n * target_s / statistics.median(times))


def bench_protocol(engine: str = "mujoco"):
    return protocol_from_mapping(
        {
            "protocol": {"name": "runner-bench", "version": "1", "base_seed": 3},
            "window": {"id": "bench", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {
                "push": {
                    "instances": [
                        "push/block_forward",
                        "push/block_left",
                        "push/block_right",
                        "push/block_long",
                        "push/block_diagonal",
                    ]
                }
            },
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 12, "real_fraction": 0.0},
            "sim": {"engines": [engine], "max_steps": 300},
        }
    )


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (pool workers), s."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def time_executor(executor, fn, specs) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one pass of `map_episodes` over `specs`."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    count = sum(1 for _ in executor.map_episodes(fn, specs))
    assert count == len(specs)
    return time.perf_counter() - t0, cpu_seconds() - c0


def time_runner(executor: str, proto, root: Path, index: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `run_trials` into a fresh store."""
    from embodied_eval.runner.trials import RunOptions, run_trials

    folder = root / f"{executor}-{index}"
    c0, t0 = cpu_seconds(), time.perf_counter()
    summary = run_trials(
        proto,
        RunOptions(sides=("sim",), executor=executor, workers=WORKERS),
        db_path=folder / "store.db",
        out_dir=folder / "out",
        show_progress=False,
    )
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    assert summary.complete and summary.written == 60, summary.rows
    return elapsed, cpu


def report(
    name: str, episodes: int, seq: list[tuple[float, float]], pool: list[tuple[float, float]]
) -> None:
    s_wall = statistics.median(w for w, _ in seq)
    p_wall = statistics.median(w for w, _ in pool)
    s_cpu = statistics.median(c for _, c in seq)
    p_cpu = statistics.median(c for _, c in pool)
    print(
        f"{name:>9}: {episodes} episodes | sequential median {s_wall:6.2f} s "
        f"({s_wall / episodes * 1000:5.0f} ms/episode) | {WORKERS}-worker pool median "
        f"{p_wall:6.2f} s | ratio {s_wall / p_wall:4.2f}"
    )
    print(
        f"           CPU used (parent + workers): sequential {s_cpu:6.2f} s, pool {p_cpu:6.2f} s; "
        f"wall runs sequential {[round(w, 2) for w, _ in seq]}, pool {[round(w, 2) for w, _ in pool]}"
    )


def main() -> int:
    print(f"cores {os.cpu_count()}, load average before {os.getloadavg()}")
    proto = bench_protocol()
    specs = list(plan_manifest(proto).specs)

    iterations = calibrate(TARGET_S)
    fn = functools.partial(synthetic_episode, iterations)
    seq_times, pool_times = [], []
    for _ in range(REPEATS):
        seq_times.append(time_executor(SequentialExecutor(), fn, specs))
        pool_times.append(time_executor(LocalPoolExecutor(WORKERS), fn, specs))
    report("executor", len(specs), seq_times, pool_times)

    seq_times, pool_times = [], []
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp:
        root = Path(tmp)
        # One untimed sequential run so both executors meet warm file caches.
        time_runner("sequential", proto, root, -1)
        for i in range(REPEATS):
            seq_times.append(time_runner("sequential", proto, root, i))
            pool_times.append(time_runner("local", proto, root, i))
    report("runner", len(specs), seq_times, pool_times)
    print(f"load average after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
