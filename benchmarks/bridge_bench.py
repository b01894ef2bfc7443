"""Real-side benchmark: the harness's policy loop against the twin robot over DDS.

Starts the twin robot (`python -m real_bridge.twin`: 500 Hz joint states and wrench, a 128×128
camera at 30 Hz, the object tracker) on its own domain with loopback-only discovery, and runs one
real episode of the reference policy in this process at 50 Hz for --seconds, recording everything
to MCAP (camera images compressed to PNG) as a real episode does. Reports:

- observation→command latency of the loop (taking the observation to the command on the wire,
  after `publish` returned): p50 / p99 / max, and deadline misses (a command not on the wire
  before the next 20 ms tick);
- the 500 Hz state stream: the twin stamps tick k with start + k·2 ms and never skips a tick, so
  every gap in the received stamps is a lost message;
- camera images received and recorded; the twin's tick lag; the load average before and after.

Targets (idle 2-core machine): p99 < 10 ms, 0 deadline misses at 50 Hz, 0 states lost.

Run: .venv/bin/python benchmarks/bridge_bench.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from embodied_eval.records import EpisodeSpec
from real_bridge.bridge_config import Deadlines, LoopSettings, load_bridge_config, profile_path
from real_bridge.discovery import domain_id_for_test
from real_bridge.twin.process import TwinProcess

RATE_HZ = 50.0


def stream_loss(stamps_ns: np.ndarray, period_ns: int) -> tuple[int, int]:
    """(received, lost) from the stamps of a stream that never skips a tick.

    Args:
        stamps_ns: (n,) received stamps in arrival order, ns.
        period_ns: the tick period, ns.
    Returns:
        received n, and lost = Σ (gap / period − 1) over consecutive stamps (0 when none).
    """
    ordered = np.sort(stamps_ns)
    ticks = np.rint(np.diff(ordered) / period_ns).astype(np.int64)
    return len(ordered), int(np.sum(np.maximum(ticks - 1, 0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    from real_bridge.ros2_backend import Ros2Backend

    domain = domain_id_for_test(0)
    load_before = os.getloadavg()
    steps = round(args.seconds * RATE_HZ)
    spec = EpisodeSpec(
        episode_id="bench-real-ros2-a1",
        pair_id="bench",
        side="real",
        family="pick_place",
        task_id="pick_place/cube_center",
        seed=3,
        drift_name="nominal",
        engine="ros2",
        policy="sim_suites.policies:scripted",
    )
    with TwinProcess(domain, camera_hz=30.0) as twin, tempfile.TemporaryDirectory() as tmp:
        config = load_bridge_config(profile_path("twin")).replace(
            domain_id=domain,
            deadlines=Deadlines(discovery_s=20.0),
            loop=LoopSettings(judge="oracle", rate_hz=RATE_HZ, max_steps=steps),
        )
        with Ros2Backend(None, config=config) as robot:
            link = robot.ros2_robot()
            link.stamp_log = []
            images_before = link.stream_counts().images
            outcome = robot.run_episode(spec, None, tmp)
            stamps = np.array(link.stamp_log, dtype=np.int64)
            images = link.stream_counts().images - images_before
        ep = outcome.episode
    load_after = os.getloadavg()
    c = ep.control
    received, lost = stream_loss(stamps, 2_000_000)
    recorded = c.get("bridge_recorded_messages", {})
    print(f"real-side benchmark: harness policy loop at {RATE_HZ:g} Hz for {steps} steps")
    print(f"  episode: {ep.status} ({ep.status_reason}); oracle q = {ep.quality:.3f}")
    print(
        f"  observation→command latency: p50 {c['loop_latency_p50_ms']:.3f} ms, "
        f"p99 {c['loop_latency_p99_ms']:.3f} ms, max {c['loop_latency_max_ms']:.3f} ms; "
        f"deadline misses {c['loop_deadline_misses']} of {c['loop_steps']}"
    )
    met = c["loop_latency_p99_ms"] < 10.0 and c["loop_deadline_misses"] == 0
    print(f"  target p99 < 10 ms and 0 misses: {'met' if met else 'NOT met'}")
    print(f"  500 Hz state stream: {received} stamps received, {lost} lost (gaps in tick stamps)")
    print(
        f"  camera: {images} images received, "
        f"{recorded.get('/camera/image_raw/compressed', 0)} recorded as PNG"
    )
    print(f"  twin: {twin.exit_info}")
    print(
        f"  load average (1/5/15 min) before {tuple(round(x, 2) for x in load_before)}, "
        f"after {tuple(round(x, 2) for x in load_after)}; {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
