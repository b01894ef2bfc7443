"""Accuracy of the harness's success detector against the twin's oracle.

Starts the twin robot, runs real episodes on it with the detector as the judge — across the four
families, their instances, the example protocol's drift days (nominal, day 7, day 14 worn) and
four policies (the reference policy, and degraded ones so that there are failures: misaligned
grasps with and without action noise, and a slowed-down policy that runs out of steps) — and
compares each detector verdict with the oracle's verdict the harness recorded beside it (the
oracle judges nothing). It writes the confusion counts, overall and per family, into the data
file shipped with the detector (`real_bridge/data/judge_accuracy.json`, keyed by the detector's
name and version) and prints the accuracy table computed from them: sensitivity and specificity
with Wilson 95 % intervals. Every episode's verdicts are appended to a JSON-lines log as it ends,
so an interrupted run keeps what it measured (`--from-log LOG` recomputes the counts from a log
without running anything).

Run: .venv/bin/python benchmarks/judge_accuracy.py [--seeds 2] [--log judge-accuracy.jsonl]
(about 12 s per episode; 120 episodes with the defaults).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from embodied_eval.embodiment.detector_accuracy import (
    COUNT_KEYS,
    accuracy_table,
    format_table,
    tally,
)
from embodied_eval.protocol.reader import example_protocol_path, load_protocol
from embodied_eval.records import EpisodeSpec
from real_bridge.detector import DETECTOR_NAME, DETECTOR_VERSION
from real_bridge.judge_accuracy import ACCURACY_PATH, load_accuracy_file

#: The policies cycled over an instance's seeds: the reference, then the degraded variants.
POLICIES = (
    "sim_suites.policies:scripted",
    "sim_suites.policies:degraded?action_noise=0.3&grasp_offset_m=0.012",
    "sim_suites.policies:degraded?action_noise=0.0&slowdown=0.35",
    "sim_suites.policies:degraded?action_noise=0.0&grasp_offset_m=0.03",
)


def plan(seeds: int, batch: int = 0) -> list[EpisodeSpec]:
    """The episodes: every instance of the example protocol × its drifts × `seeds` seeds, the
    policy cycling through POLICIES with the episode's index; `batch` > 0 gives other seeds
    (and episode ids), to measure more episodes into the same log."""
    protocol = load_protocol(example_protocol_path())
    out = []
    for instance in protocol.instances:
        for drift in protocol.drifts:
            for _ in range(seeds):
                index = len(out)
                pair = f"acc{index:04d}" if batch == 0 else f"acc{batch}-{index:04d}"
                out.append(
                    EpisodeSpec(
                        episode_id=f"{pair}-real-ros2-a1",
                        pair_id=pair,
                        side="real",
                        family=instance.task_id.split("/")[0],
                        task_id=instance.task_id,
                        seed=1000 + 10_000 * batch + index,
                        drift_name=drift.name,
                        drift=dict(drift.params),
                        engine="ros2",
                        attempt=1,
                        target_quality=instance.target_quality or 0.8,
                        policy=POLICIES[(index + batch) % len(POLICIES)],
                    )
                )
    return out


def run_episodes(specs: list[EpisodeSpec], log: Path) -> None:
    """Run `specs` on a fresh twin with the detector judging; append one line per episode."""
    from real_bridge.bridge_config import Deadlines, LoopSettings, load_bridge_config, profile_path
    from real_bridge.discovery import domain_id_for_test
    from real_bridge.ros2_backend import Ros2Backend
    from real_bridge.twin.process import TwinProcess

    done = {json.loads(line)["episode_id"] for line in _lines(log)}
    domain = domain_id_for_test(61)
    with TwinProcess(domain) as twin, tempfile.TemporaryDirectory() as rec:
        print(f"twin ready (pid {twin.pid}, domain {domain})", flush=True)
        config = load_bridge_config(profile_path("twin")).replace(
            domain_id=domain,
            deadlines=Deadlines(discovery_s=30.0, service_s=10.0, state_stale_s=1.0),
            loop=LoopSettings(judge="detector"),
        )
        robot = Ros2Backend(None, config=config)
        try:
            for i, spec in enumerate(specs):
                if spec.episode_id in done:
                    continue
                started = time.monotonic()
                try:
                    ep = robot.run_episode(spec, None, rec).episode
                    row = _row(spec, ep.status, ep.status_reason, ep.control)
                except Exception as exc:  # a lost robot: logged, the measurement goes on
                    row = _row(spec, "error", f"{type(exc).__name__}: {exc}", {})
                row["seconds"] = round(time.monotonic() - started, 1)
                with log.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row, sort_keys=True) + "\n")
                for artifact in Path(rec).glob("*.mcap"):
                    artifact.unlink()  # the recordings are not kept (disk)
                print(
                    f"[{i + 1}/{len(specs)}] {spec.task_id} {spec.drift_name} "
                    f"{row['policy'].split(':')[-1]}: {row['status']} detector={row['detector']} "
                    f"oracle={row['oracle']} ({row['seconds']} s)",
                    flush=True,
                )
        finally:
            robot.disconnect()


def _row(spec: EpisodeSpec, status: str, reason: str, control: dict[str, Any]) -> dict[str, Any]:
    detector = control.get("detector") or {}
    oracle = control.get("oracle") or {}
    return {
        "episode_id": spec.episode_id,
        "task_id": spec.task_id,
        "family": spec.family,
        "drift": spec.drift_name,
        "policy": spec.policy,
        "status": status,
        "reason": reason,
        "detector": detector.get("success") if detector else None,
        "detector_judged": bool(detector),
        "detector_quality": detector.get("quality"),
        "detector_source": detector.get("source"),
        "detector_version": detector.get("version"),
        "oracle": oracle.get("success") if oracle else None,
        "oracle_quality": oracle.get("quality"),
    }


def _lines(log: Path) -> list[str]:
    if not log.is_file():
        return []
    return [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def counts_from_log(log: Path) -> dict[str, Any]:
    """The stored entry for this detector version from a log: counts overall and per family,
    over the episodes whose oracle answered and that the detector saw (judged, or cannot judge)."""
    rows = [json.loads(line) for line in _lines(log)]
    measured = [
        r
        for r in rows
        if r["oracle"] is not None
        and r.get("detector_version") in (DETECTOR_VERSION, None)
        and (r["detector_judged"])
    ]
    by_family: dict[str, list[tuple[bool | None, bool]]] = {}
    for r in measured:
        by_family.setdefault(r["family"], []).append((r["detector"], bool(r["oracle"])))
    every = [pair for pairs in by_family.values() for pair in pairs]
    total = tally(every)
    entry: dict[str, Any] = {k: getattr(total, k) for k in (*COUNT_KEYS, "cannot_judge")}
    entry["episodes"] = len(every)
    entry["by_family"] = {
        family: {k: getattr(tally(pairs), k) for k in (*COUNT_KEYS, "cannot_judge")}
        for family, pairs in sorted(by_family.items())
    }
    entry["drifts"] = sorted({r["drift"] for r in measured})
    entry["policies"] = sorted({r["policy"] for r in measured})
    entry["measured_on"] = "the twin robot against its oracle (benchmarks/judge_accuracy.py)"
    entry["measured_at"] = dt.date.today().isoformat()
    return entry


def store_entry(entry: dict[str, Any], path: Path = ACCURACY_PATH) -> None:
    data = load_accuracy_file(path)
    data.setdefault(DETECTOR_NAME, {})[DETECTOR_VERSION] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="Seeds per instance and drift.")
    parser.add_argument("--log", type=Path, default=Path("judge-accuracy.jsonl"))
    parser.add_argument("--from-log", action="store_true", help="Only recompute from --log.")
    parser.add_argument("--no-store", action="store_true", help="Do not write the data file.")
    parser.add_argument("--limit", type=int, default=0, help="Run only the first N episodes.")
    parser.add_argument("--batch", type=int, default=0, help="Another batch of seeds (0, 1, …).")
    args = parser.parse_args(argv)
    if not args.from_log:
        os.environ.setdefault("MUJOCO_GL", "egl")
        specs = plan(args.seeds, args.batch)
        specs = specs[: args.limit] if args.limit else specs
        print(f"{len(specs)} episodes; log {args.log}; load {os.getloadavg()[0]:.2f}", flush=True)
        run_episodes(specs, args.log)
    entry = counts_from_log(args.log)
    if entry["episodes"] == 0:
        print("no episode with both verdicts in the log", file=sys.stderr)
        return 1
    if not args.no_store:
        store_entry(entry)
        print(f"stored {DETECTOR_NAME} {DETECTOR_VERSION} counts in {ACCURACY_PATH}")
    print(f"{DETECTOR_NAME} {DETECTOR_VERSION}: {entry['episodes']} episodes on the twin")
    print(format_table(accuracy_table(entry)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
