"""What each reality-gap knob of the twin robot does to the reference policy's real AR.

For each setting — the twin without a gap, its default gap, and one knob changed from the
default at a time (the twin's own flags, or a drift the manifest carries) — starts the twin,
runs the reference policy on the real side over ROS 2 for --per-setting episodes (cycling over
one instance of each family, seeds 1, 2, ...) and reports the success rate with its Wilson 95 %
interval. Success is the twin's ground truth (the oracle): this measures the policy on the
robot, not a judge. The table printed is the reality-gap table of docs/technician.md.

Outcomes: S success, F failure, s safety stop, a aborted, e error.

Run: .venv/bin/python benchmarks/reality_gap_knobs.py [--per-setting 12] [--max-steps 400]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from embodied_eval.records import EpisodeSpec
from embodied_eval.stats.proportions import wilson_bounds
from real_bridge.bridge_config import Deadlines, LoopSettings, load_bridge_config, profile_path
from real_bridge.discovery import domain_id_for_test
from real_bridge.ros2_backend import Ros2Backend
from real_bridge.twin.process import TwinProcess

TASKS = (
    "pick_place/cube_center",
    "push/block_forward",
    "drawer_open/drawer_center",
    "peg_insert/peg_center",
)

#: (name, twin flags, drift the manifest carries)
SETTINGS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("no gap (nominal simulator)", {"no_gap": True}, {}),
    ("default gap", {}, {}),
    ("actuator delay 20 → 80 ms", {"actuator_delay_s": 0.08}, {}),
    ("drift latency_steps = 3 (+60 ms)", {}, {"latency_steps": 3}),
    ("firmware 5.0.0 (gains ×0.7, +1 step)", {}, {"firmware": "5.0.0"}),
    ("firmware 5.1.0-lowrate (25 Hz, +2 steps)", {}, {"firmware": "5.1.0-lowrate"}),
    ("payload +0.5 kg (drift)", {}, {"payload_kg": 0.5}),
    ("contacts softer: solref 0.04 → 0.08 s", {"contact_timeconst_s": 0.08}, {}),
    ("friction ×0.85 → ×0.3", {"friction_scale": 0.3}, {}),
    ("servo gain ×0.9 → ×0.4", {"actuator_gain_scale": 0.4}, {}),
]


def spec(i: int, drift: dict[str, Any]) -> EpisodeSpec:
    task = TASKS[i % len(TASKS)]
    return EpisodeSpec(
        episode_id=f"knob-{i}-real-ros2-a1",
        pair_id=f"knob-{i}",
        side="real",
        family=task.split("/")[0],
        task_id=task,
        seed=1 + i // len(TASKS),
        drift_name="knob" if drift else "nominal",
        drift=drift,
        engine="ros2",
    )


def run_setting(domain: int, flags: dict[str, Any], drift: dict[str, Any], n: int, steps: int):
    config = load_bridge_config(profile_path("twin")).replace(
        domain_id=domain,
        deadlines=Deadlines(discovery_s=20.0, service_s=5.0, state_stale_s=1.0, judge_s=5.0),
        loop=LoopSettings(judge="oracle", max_steps=steps),
    )
    successes, outcomes = 0, []
    with TwinProcess(domain, **flags), Ros2Backend(None, config=config) as robot:
        for i in range(n):
            ep = robot.run_episode(spec(i, drift), None, None).episode
            ok = ep.status == "ok" and ep.quality >= ep.target_quality
            successes += ok
            outcomes.append(ep.status if ep.status != "ok" else ("S" if ok else "F"))
    return successes, outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-setting", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--only", default="", help="run only settings whose name contains this")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"| setting | AR (n = {args.per_setting}) | Wilson 95 % | outcomes |")
    print("|---|---|---|---|")
    for k, (name, flags, drift) in enumerate(SETTINGS):
        if args.only and args.only not in name:
            continue
        started = time.monotonic()
        s, outcomes = run_setting(
            domain_id_for_test(40 + k), flags, drift, args.per_setting, args.max_steps
        )
        low, high = wilson_bounds(s, args.per_setting, 0.95)
        print(
            f"| {name} | {s}/{args.per_setting} = {s / args.per_setting:.2f} | "
            f"[{low:.2f}, {high:.2f}] | {''.join(o[0] for o in outcomes)} "
            f"({time.monotonic() - started:.0f} s) |",
            flush=True,
        )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
