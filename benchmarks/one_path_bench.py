"""Both halves of a pair through one command path and one safety monitor: per family, the sim
half and the in-process robot (the twin's physics on the robot's own clock; the ROS twin with
`--ros`), successes, protective stops and peak contact force, with no reality gap and with the
twin's example gap, and the sim–real outcome agreement over the pairs with the discordant pairs'
causes.

Each pair is one task instance (the family's first) and one seed: the sim half is
`sim_suites.episode.run_episode` of the pair's spec, the real half the same spec on the robot
(`real_bridge.mujoco_robot.mujoco_backend`, `gap = "none"` or `"default"`). Peak force: the net
external force a wrist force/torque sensor reads (the sim episode's `peak_external_force_n`, the
robot's wrench stream `bridge_peak_force_n`). Times are the robot's simulated clock, so nothing
here depends on machine load; the wall time per episode is printed for scale.

Run: .venv/bin/python benchmarks/one_path_bench.py [--seeds 10] [--gaps none,default]
     [--families pick_place,push] [--ros]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

from embodied_eval.embodiment.transfer import episode_cause
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from sim_suites.episode import run_episode
from sim_suites.tasks.catalog import TASK_SPECS


@dataclass
class Half:
    success: bool
    stopped: bool
    peak_n: float
    cause: str


def spec_for(task_id: str, seed: int, side: str, engine: str) -> EpisodeSpec:
    pair = f"{task_id.replace('/', '-')}-{seed}"
    return EpisodeSpec(
        episode_id=f"{pair}-{side}-{engine}-a1",
        pair_id=pair,
        side=side,
        family=task_id.split("/")[0],
        task_id=task_id,
        seed=seed,
        drift_name="nominal",
        engine=engine,
        target_quality=0.8,
        policy="sim_suites.policies:scripted",
    )


def half_of(outcome: EpisodeOutcome, force_key: str) -> Half:
    """One half's outcome, whether it stopped, its peak force and its cause as S2R's discordant
    pairs state it (`episode_cause`)."""
    ep = outcome.episode
    stopped = any(e.kind == "protective_stop" for e in outcome.safety_events)
    peak = ep.control.get(force_key, ep.control.get("peak_contact_n", 0.0))  # (older records)
    return Half(ep.success, stopped, float(peak or 0.0), episode_cause(ep))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--gaps", default="none,default")
    parser.add_argument("--families", default="")
    parser.add_argument("--ros", action="store_true", help="also the ROS twin (its own process, on its simulated clock)")
    args = parser.parse_args()
    first: dict[str, str] = {}
    for task_id, spec in TASK_SPECS.items():
        first.setdefault(spec.family, task_id)
    families = [f for f in first if not args.families or f in args.families.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.seeds} seeds per family")
    sims: dict[tuple[str, int], Half] = {}
    t0 = time.perf_counter()
    for family in families:
        for seed in range(args.seeds):
            outcome = run_episode(spec_for(first[family], seed, "sim", "mujoco"))
            sims[(family, seed)] = half_of(outcome, "peak_external_force_n")
    sim_s = (time.perf_counter() - t0) / max(1, len(sims))
    backends = ["mujoco"] + (["ros2"] if args.ros else [])
    for gap in args.gaps.split(","):
        for backend_name in backends:
            reals = run_real(backend_name, gap, families, first, args.seeds)
            report(gap, backend_name, families, sims, reals, sim_s)


def run_real(
    backend_name: str, gap: str, families: list[str], first: dict[str, str], seeds: int
) -> tuple[dict[tuple[str, int], Half], float]:
    out: dict[tuple[str, int], Half] = {}
    if backend_name == "mujoco":
        from real_bridge.mujoco_robot import mujoco_backend

        runner = mujoco_backend(None, gap=gap, max_steps=400)
        engine = "mujoco_robot"
    else:
        from real_bridge.ros2_backend import Ros2Backend
        from real_bridge.twin.process import TwinProcess

        domain = 40 + os.getpid() % 50
        # On its simulated clock: the outcomes cannot depend on this machine's load.
        twin = TwinProcess(domain, no_gap=gap == "none", sim_time=True).start()
        runner = Ros2Backend(None, domain_id=domain, max_steps=400, profile="twin_sim")
        engine = "ros2"
    t0 = time.perf_counter()
    try:
        with runner:
            for family in families:
                for seed in range(seeds):
                    spec = spec_for(first[family], seed, "real", engine)
                    outcome = runner.run_episode(spec, None, None)
                    out[(family, seed)] = half_of(outcome, "bridge_peak_force_n")
    finally:
        if backend_name != "mujoco":
            twin.stop()
    return out, (time.perf_counter() - t0) / max(1, len(out))


def report(
    gap: str,
    backend_name: str,
    families: list[str],
    sims: dict[tuple[str, int], Half],
    reals_and_time: tuple[dict[tuple[str, int], Half], float],
    sim_s: float,
) -> None:
    reals, real_s = reals_and_time
    print(f"\n## gap {gap}, real half on {backend_name} ({real_s:.2f} s/episode, sim {sim_s:.2f})")
    print("| family | sim ok | sim stops | sim peak N | real ok | real stops | real peak N | agree |")
    print("|---|---|---|---|---|---|---|---|")
    agree_all = 0
    discordant: list[str] = []
    for family in families:
        keys = [k for k in sims if k[0] == family]
        s = [sims[k] for k in keys]
        r = [reals[k] for k in keys]
        agree = sum(a.success == b.success for a, b in zip(s, r, strict=True))
        agree_all += agree
        print(
            f"| {family} | {sum(h.success for h in s)}/{len(s)} | {sum(h.stopped for h in s)} | "
            f"{max(h.peak_n for h in s):.0f} | {sum(h.success for h in r)}/{len(r)} | "
            f"{sum(h.stopped for h in r)} | {max(h.peak_n for h in r):.0f} | {agree}/{len(s)} |"
        )
        for k, a, b in zip(keys, s, r, strict=True):
            if a.success != b.success:
                discordant.append(f"{k[0]} seed {k[1]}: sim {a.cause}; real {b.cause}")
    n = len(sims)
    print(f"agreement {agree_all}/{n} = {agree_all / n:.2f}")
    for line in discordant:
        print(f"- discordant {line}")
    if reals:
        print(f"median real peak {statistics.median(h.peak_n for h in reals.values()):.1f} N")


if __name__ == "__main__":
    main()
