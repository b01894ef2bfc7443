"""Does the example battery discriminate? The reference policy's AR per family and engine.

Runs the protocol's sim policy (the scripted reference) on every instance of every family with
`--seeds` seeds each, under the protocol's randomization and the nominal drift, in each engine,
and prints per family × engine the successes/n, AR and its 95 % Wilson and Clopper–Pearson
intervals. A family whose AR lies outside [0.2, 0.8] is marked: at the ceiling or the floor a
battery cannot tell policies apart.

Seeds are the manifest's: seed k of an instance is `derive_seed(base_seed, "<task_id>:s<k>")`, so
seed 0 is the episode a one-seed run of the protocol plays.

Run: .venv/bin/python benchmarks/battery.py [--protocol P] [--seeds 6] [--engines mujoco,pybullet]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from embodied_eval.protocol.reader import Protocol, example_protocol_path, load_protocol
from embodied_eval.records import EpisodeSpec
from embodied_eval.seeds import derive_seed
from embodied_eval.stats.proportions import clopper_pearson_interval, wilson_interval
from sim_suites.episode import run_episode

#: A family's reference AR should lie in this band for the battery to discriminate.
BAND = (0.2, 0.8)


def family_outcomes(
    protocol: Protocol, engine: str, family: str, seeds: int
) -> tuple[list[bool], dict[str, int]]:
    """Success of each (instance, seed) episode of a family, and the end statuses seen."""
    wins: list[bool] = []
    statuses: dict[str, int] = {}
    for inst in protocol.families[family]:
        for k in range(seeds):
            spec = EpisodeSpec(
                episode_id=f"battery-{engine}-{inst.task_id.replace('/', '-')}-s{k}",
                pair_id=f"battery-{inst.task_id}-s{k}",
                side="sim",
                family=family,
                task_id=inst.task_id,
                seed=derive_seed(protocol.base_seed, f"{inst.task_id}:s{k}"),
                drift_name="nominal",
                engine=engine,
                policy=protocol.sim_policy,
                target_quality=inst.target_quality,
            )
            ep = run_episode(spec, protocol).episode
            wins.append(bool(ep.success))
            statuses[ep.status] = statuses.get(ep.status, 0) + 1
    return wins, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", type=Path, default=example_protocol_path())
    parser.add_argument("--seeds", type=int, default=6, help="seeds per instance")
    parser.add_argument("--engines", default="mujoco,pybullet")
    parser.add_argument("--families", default="", help="comma-separated (default: all)")
    args = parser.parse_args()
    protocol = load_protocol(args.protocol)
    families = [f for f in args.families.split(",") if f] or list(protocol.families)
    print(f"protocol {args.protocol.name}, {args.seeds} seeds per instance, nominal drift")
    print(f"load average before: {os.getloadavg()}")
    header = f"{'family':12s} {'engine':9s} {'s/n':>7s} {'AR':>5s}  {'Wilson 95%':>15s}"
    print(f"{header}  {'CP 95%':>15s}  statuses")
    for family in families:
        for engine in args.engines.split(","):
            t0 = time.perf_counter()
            wins, statuses = family_outcomes(protocol, engine, family, args.seeds)
            s, n = sum(wins), len(wins)
            w, cp = wilson_interval(s, n), clopper_pearson_interval(s, n)
            ar = s / n
            mark = "" if BAND[0] <= ar <= BAND[1] else "  OUTSIDE [0.2, 0.8]"
            status = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
            print(
                f"{family:12s} {engine:9s} {s:3d}/{n:<3d} {ar:5.2f}  "
                f"[{w.low:.2f}, {w.high:.2f}]    [{cp.low:.2f}, {cp.high:.2f}]  {status}"
                f"  ({time.perf_counter() - t0:.0f} s){mark}",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
