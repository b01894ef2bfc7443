"""Benchmark: the full embodiment report on 100k episodes with 10k-resample intervals.

Target: ≤ 2 s for `compute_embodiment` (building the episode records is not timed).

    .venv/bin/python benchmarks/metrics_bench.py [--episodes 100000] [--resamples 10000]
        [--repeats 5]

Prints the median of `--repeats` runs at `--resamples` and at 1/10 of them, their ratio, the
ratio to the 2 s target, and the slowest parts (one profiled run).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from typing import Any

import numpy as np

from embodied_eval.embodiment import compute_embodiment
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.records import Episode, ExposureEntry, Fault, Incident

TARGET_S = 2.0
FAMILIES = ("pick_place", "push", "drawer_open", "peg_insert")
INSTANCES = 25  # per family: 100 task instances (the bootstrap clusters)


def make_protocol():
    battery = {
        fam: {"instances": [f"{fam}/i{i:02d}" for i in range(INSTANCES)], "qc_tolerance": 0.02}
        for fam in FAMILIES
    }
    return protocol_from_mapping(
        {
            "protocol": {"name": "bench", "version": "1", "base_seed": 1},
            "window": {"id": "bench", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": battery,
            "embodiment": {"L": 0.2, "U": 0.95},
            "price_card": {"wear_per_hour": 1.5, "operator_per_hour": 45.0},
        }
    )


def make_data(n_episodes: int, rng: np.random.Generator):
    """Pairs on 100 task instances with per-instance success rates; 2 % retries; faults on 5 %."""
    pairs = n_episodes // 2
    tasks = [f"{fam}/i{i:02d}" for fam in FAMILIES for i in range(INSTANCES)]
    p_real = rng.uniform(0.6, 0.95, len(tasks))
    p_sim = np.clip(p_real + rng.normal(0.05, 0.03, len(tasks)), 0, 1)
    task_of = rng.integers(0, len(tasks), pairs)
    z_real = rng.random(pairs) < p_real[task_of]
    z_sim = rng.random(pairs) < p_sim[task_of]
    faulty = rng.random(pairs) < 0.05
    recovered = rng.random(pairs) < 0.8
    episodes: list[Episode] = []
    for k in range(pairs):
        task = tasks[task_of[k]]
        common = {
            "pair_id": f"p{k:06d}",
            "family": task.split("/")[0],
            "task_id": task,
            "seed": k,
            "policy": "sim_suites.policies:scripted",
            "target_quality": 0.8,
            "started_at": "2026-11-02T10:00:00Z",
            "window": "bench",
        }
        faults: tuple[Fault, ...] = ()
        if faulty[k]:
            faults = (
                Fault(
                    kind="grasp_slip" if k % 2 else "occlusion",
                    recovered_autonomously=bool(recovered[k]),
                    repair_s=0.0 if recovered[k] else 300.0,
                    episode_id=f"p{k:06d}-real-a1",
                ),
            )
        episodes.append(
            Episode(
                episode_id=f"p{k:06d}-sim-a1",
                side="sim",
                engine="mujoco",
                quality=0.9 if z_sim[k] else 0.5,
                duration_s=20.0,
                qc=0.8,
                **common,
            )
        )
        episodes.append(
            Episode(
                episode_id=f"p{k:06d}-real-a1",
                side="real",
                engine="ros2",
                quality=0.9 if z_real[k] else 0.5,
                duration_s=60.0,
                energy_wh=2.0,
                qc=0.75,
                faults=faults,
                **common,
            )
        )
    retries = [
        e.replace(episode_id=e.episode_id[:-1] + "2", attempt=2, quality=0.9, faults=())
        for e in episodes
        if e.side == "real" and not e.success and rng.random() < 0.1
    ]
    incidents = [
        Incident(incident_id=f"nm-{i}", occurred_at="2026-11-03T10:00:00Z", severity="near_miss")
        for i in range(3)
    ]
    ledger = [
        ExposureEntry(
            entry_id="x1",
            window="bench",
            start="2026-11-01T00:00:00Z",
            end="2027-11-01T00:00:00Z",
            active_hours=pairs * 60.0 / 3600.0,
            how_measured="episode_durations",
        )
    ]
    return episodes + retries, incidents, ledger


def time_report(
    args: tuple[Any, ...], resamples: int, repeats: int
) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of `repeats` full reports (CPU time is less disturbed by load)."""
    wall, cpu = [], []
    for i in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        compute_embodiment(*args, rng=np.random.default_rng(i), resamples=resamples)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()

    t0 = time.perf_counter()
    episodes, incidents, ledger = make_data(opts.episodes, np.random.default_rng(20261122))
    build_s = time.perf_counter() - t0
    args: tuple[Any, ...] = (episodes, [], incidents, ledger, make_protocol())
    compute_embodiment(*args, rng=np.random.default_rng(0), resamples=100)  # warm-up

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    small_r = max(100, opts.resamples // 10)
    full, full_cpu = time_report(args, opts.resamples, opts.repeats)
    small, small_cpu = time_report(args, small_r, opts.repeats)
    med_full, med_small = statistics.median(full), statistics.median(small)
    cpu_full, cpu_small = statistics.median(full_cpu), statistics.median(small_cpu)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"episodes: {len(episodes)} ({opts.episodes} + retries); records built in {build_s:.1f} s"
    )
    print(
        f"machine: {os.cpu_count()} CPUs, 1-min load average {load_before:.2f} before, "
        f"{load:.2f} after"
    )
    print(
        f"{opts.resamples} resamples: median wall {med_full:.3f} s (min {min(full):.3f}, max "
        f"{max(full):.3f}, {opts.repeats} runs); median CPU {cpu_full:.3f} s"
    )
    print(f"{small_r} resamples: median wall {med_small:.3f} s; median CPU {cpu_small:.3f} s")
    print(
        f"ratio {opts.resamples}/{small_r} resamples: wall {med_full / med_small:.2f}, "
        f"CPU {cpu_full / cpu_small:.2f}"
    )
    print(
        f"vs target {TARGET_S:.1f} s: wall {med_full / TARGET_S:.2f}, CPU "
        f"{cpu_full / TARGET_S:.2f} of the target"
    )

    profiler = cProfile.Profile()
    profiler.enable()
    compute_embodiment(*args, rng=np.random.default_rng(99), resamples=opts.resamples)
    profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(
        r"embodiment/(reliability|transfer|composite|throughput|safety|selection|beyond)"
    )
    lines = [ln for ln in buf.getvalue().splitlines() if "embodiment/" in ln and ".py:" in ln]
    lines = lines[:10]
    print("slowest parts (cumulative s, one profiled run):")
    for ln in lines:
        parts = ln.split()
        print(f"  {float(parts[3]):7.3f}  {parts[-1].split('embodied_eval/')[-1]}")


if __name__ == "__main__":
    main()
