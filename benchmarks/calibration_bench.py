"""Calibration's cost: fitting 20 recorded episodes of 400 steps, and a calibrated sim episode.

1. Records 20 episodes of 400 loop steps on the twin's own physics with a known gap (payload
   0.4 kg, delay 40 ms, gain × 0.9, bandwidth 8 Hz; `real_bridge.calibration.offline_twin`, no
   ROS needed) and times `calibrate_episodes` with the default parameters on `--workers`
   processes (target: < 120 s on 2 cores). Prints the recovered values.
2. Times sim episodes (reference policy, up to 400 steps) with and without a calibration's
   reality gap, interleaved, median of `--episodes` each; an episode ends when its task does, so
   the comparison is per control step (target: the calibrated one within 5 %).

Run: .venv/bin/python benchmarks/calibration_bench.py [--episodes 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from embodied_eval.records import EpisodeSpec
from real_bridge.calibration.fit import calibrate_episodes
from real_bridge.calibration.offline_twin import excitation_commands, record_offline
from real_bridge.calibration.params import DEFAULT_PARAMS
from real_bridge.twin.settings import TwinGap

TASK = "pick_place/cube_center"
GAP = TwinGap(
    friction_scale=1.0, contact_timeconst_s=0.0, link_mass_scale=1.0, object_mass_scale=1.0,
    payload_kg=0.4, actuator_gain_scale=0.9, joint_damping_scale=1.0, actuator_delay_s=0.04,
    actuator_bandwidth_hz=8.0, sensor_noise_std=0.0005, object_pose_noise_m=0.002,
)  # fmt: skip


def fit_time(workers: int) -> None:
    rng = np.random.default_rng(2026)
    started = time.monotonic()
    episodes = [
        record_offline(GAP, TASK, seed, {}, excitation_commands(400, rng), rng)
        for seed in range(20)
    ]
    print(f"recorded 20 × 400 steps in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    result = calibrate_episodes(episodes, DEFAULT_PARAMS, workers=workers)
    wall = time.monotonic() - started
    print(f"calibrate 20 episodes × 400 steps, {len(DEFAULT_PARAMS)} parameters, {workers} "
          f"workers: {wall:.1f} s wall ({result.evaluations} replays of an episode set, "
          f"{result.episode_replays} episode replays; target < 120 s)")  # fmt: skip
    for name, e in result.estimates.items():
        state = "identified" if e.identified else f"not identified ({e.reason})"
        print(f"  {name}: {e.value:.4g} [{e.low:.4g}, {e.high:.4g}] {state}")
    print(f"  validation joints {result.before['joint_rms_mrad']:.2f} → "
          f"{result.after['joint_rms_mrad']:.2f} mrad RMS")  # fmt: skip


def episode_time(n: int) -> None:
    from sim_suites.episode import run_episode
    from sim_suites.variations import RealityGap as SimGap

    calibrated = SimGap(payload_kg=0.4, actuator_gain_scale=0.9, actuator_delay_steps=2)
    times: dict[str, list[float]] = {"nominal": [], "calibrated": []}
    steps: dict[str, list[int]] = {"nominal": [], "calibrated": []}
    for i in range(n):
        for label, gap in (("nominal", None), ("calibrated", calibrated)):
            spec = EpisodeSpec(
                episode_id=f"b{i}-sim-mujoco-a1", pair_id=f"b{i}", side="sim",
                family="pick_place", task_id=TASK, seed=i + 1, drift_name="nominal",
            )  # fmt: skip
            started = time.perf_counter()
            episode = run_episode(spec, None, max_steps=400, reality_gap=gap).episode
            times[label].append(time.perf_counter() - started)
            steps[label].append(max(1, int(episode.actions)))
    a, b = statistics.median(times["nominal"]), statistics.median(times["calibrated"])
    # An episode ends when its task does: the cost of a calibration is the cost per step.
    per = {k: statistics.median(t / s for t, s in zip(times[k], steps[k], strict=True))
           for k in times}  # fmt: skip
    print(f"sim episode (up to 400 steps; median of {n}): nominal {a * 1e3:.0f} ms over "
          f"{statistics.median(steps['nominal']):.0f} steps, calibrated {b * 1e3:.0f} ms over "
          f"{statistics.median(steps['calibrated']):.0f} steps")  # fmt: skip
    print(f"  per step: nominal {per['nominal'] * 1e3:.3f} ms, calibrated "
          f"{per['calibrated'] * 1e3:.3f} ms; ratio {per['calibrated'] / per['nominal']:.3f} "
          "(target within 5 %)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    episode_time(args.episodes)
    fit_time(args.workers)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
