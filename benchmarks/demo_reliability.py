"""Does `make demo` work the first time, every time? Runs the demo N times from fresh output
folders and prints, per run: exit code, wall time, whether the real side halted, the real
episodes that ended aborted or error (with the first abort's reason), the largest homing residual,
and the policy loop's worst p99 and total deadline misses; then the load average, and whether the
runs are the same run: the demo's real side runs the twin on its simulated clock, so the same seed
must give the same episodes whatever the machine's load.

Same run means: every stored episode (both sides) agrees in status, reason, quality, action count,
duration, judge verdict, scene, randomization draw and drift, and the real side's recorded
`/joint_states` decode to the same stamps, positions and velocities. Each run prints a digest of
each (SHA-256, first 16 hex digits).

Each run is a separate process (`python -m embodied_eval.demo --out <fresh folder>`), as a lab's
first `make demo` is; the folders are removed afterwards unless --keep. `--compare DIR ...` only
compares demo output folders made before (e.g. by five `make demo` runs, each folder copied).

Run: .venv/bin/python benchmarks/demo_reliability.py [--runs 10] [--keep DIR]
     .venv/bin/python benchmarks/demo_reliability.py --compare run-1 run-2 ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from embodied_eval.store.core import Store

HALT_MARKERS = ("real side stopped", "could not run", "did not finish")
#: An episode's fields that must not depend on the machine (its start and write times may).
OUTCOME_FIELDS = (
    "status",
    "status_reason",
    "quality",
    "actions",
    "duration_s",
    "judge",
    "interventions",
    "scene",
    "randomization",
    "drift",
)


def outcome_digest(db: Path) -> tuple[int, str]:
    """(episodes, digest) of every stored episode's machine-independent fields, by episode id."""
    rows = sqlite3.connect(db).execute(
        "SELECT episode_id, record_json FROM episodes ORDER BY episode_id"
    )
    digest, n = hashlib.sha256(), 0
    for episode_id, text in rows:
        record = json.loads(text)
        judge = {k: v for k, v in (record.get("judge") or {}).items() if not k.endswith("_at")}
        kept = {k: record.get(k) for k in OUTCOME_FIELDS} | {"judge": judge}
        digest.update(episode_id.encode())
        digest.update(json.dumps(kept, sort_keys=True, default=str).encode())
        n += 1
    return n, digest.hexdigest()[:16]


def joint_state_digest(folder: Path) -> tuple[int, str]:
    """(messages, digest) of the real recordings' /joint_states: stamps, positions, velocities."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    digest, n = hashlib.sha256(), 0
    for path in sorted(folder.glob("run/artifacts/*-real-*/*.mcap")):
        with path.open("rb") as handle:
            reader = make_reader(handle, decoder_factories=[DecoderFactory()])
            for _, _, _, msg in reader.iter_decoded_messages(topics=["/joint_states"]):
                stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
                digest.update(repr((stamp, list(msg.position), list(msg.velocity))).encode())
                n += 1
    return n, digest.hexdigest()[:16]


def fingerprint(folder: Path) -> tuple[tuple[int, str], tuple[int, str]]:
    """A demo output folder's outcome and joint-state digests."""
    db = folder / "store.db"
    return (outcome_digest(db) if db.exists() else (0, "-")), joint_state_digest(folder)


def print_identity(folders: list[Path]) -> bool:
    """Print each folder's digests; whether all folders are the same run."""
    prints = []
    for folder in folders:
        (episodes, outcomes), (states, joints) = fingerprint(folder)
        prints.append((outcomes, joints))
        print(f"{folder}: {episodes} episodes {outcomes}; {states} real joint states {joints}")
    same = len(set(prints)) == 1
    print(
        f"same outcomes and recorded joint states in all {len(folders)} runs: {'yes' if same else 'no'}"
    )
    return same


def real_episode_summary(db: Path) -> dict[str, Any]:
    """Outcome counts and loop/homing figures of the real episodes in a demo's store."""
    out: dict[str, Any] = {
        "real": 0,
        "aborted": 0,
        "errors": 0,
        "first_abort": "",
        "homing_max_rad": 0.0,
        "loop_p99_max_ms": 0.0,
        "deadline_misses": 0,
    }
    if not db.exists():
        return out
    try:
        episodes = [e for e in Store(db).episodes() if e.side == "real"]
    except (sqlite3.Error, Exception) as exc:  # a store the run left unreadable is a finding
        out["first_abort"] = f"store unreadable: {exc}"
        return out
    for e in episodes:
        out["real"] += 1
        if e.status in ("aborted", "error"):
            out["aborted" if e.status == "aborted" else "errors"] += 1
            out["first_abort"] = out["first_abort"] or e.status_reason[:90]
        c = e.control
        out["homing_max_rad"] = max(out["homing_max_rad"], float(c.get("homing_residual_rad", 0.0)))
        out["loop_p99_max_ms"] = max(
            out["loop_p99_max_ms"], float(c.get("loop_latency_p99_ms", 0.0))
        )
        out["deadline_misses"] += int(c.get("loop_deadline_misses", 0))
    return out


def run_once(folder: Path, log: Path) -> dict[str, Any]:
    started = time.monotonic()
    with log.open("w") as handle:
        proc = subprocess.run(
            [sys.executable, "-m", "embodied_eval.demo", "--out", str(folder)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
    text = log.read_text(errors="replace")
    return {
        "exit": proc.returncode,
        "seconds": time.monotonic() - started,
        "halted": any(m in text for m in HALT_MARKERS),
        **real_episode_summary(folder / "store.db"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--keep", type=Path, default=None, help="keep each run's folder here")
    parser.add_argument(
        "--compare", type=Path, nargs="+", default=None, help="only compare these demo folders"
    )
    args = parser.parse_args()
    if args.compare:
        return 0 if print_identity(args.compare) else 1
    root = args.keep or Path(tempfile.mkdtemp(prefix="demo-reliability-"))
    root.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}")
    header = (
        f"{'run':>3} {'exit':>4} {'s':>6} {'halted':>6} {'real':>4} {'abort':>5} {'error':>5} "
        f"{'homing max rad':>14} {'loop p99 max ms':>15} {'misses':>6}  first abort"
    )
    print(header)
    results = []
    for i in range(1, args.runs + 1):
        folder = root / f"run-{i:02d}"
        r = run_once(folder, root / f"run-{i:02d}.log")
        r["fingerprint"] = fingerprint(folder)
        results.append(r)
        print(
            f"{i:>3} {r['exit']:>4} {r['seconds']:>6.0f} {('yes' if r['halted'] else 'no'):>6} "
            f"{r['real']:>4} {r['aborted']:>5} {r['errors']:>5} {r['homing_max_rad']:>14.3f} "
            f"{r['loop_p99_max_ms']:>15.1f} {r['deadline_misses']:>6}  {r['first_abort']}",
            flush=True,
        )
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    clean = sum(r["exit"] == 0 and not r["halted"] and not r["aborted"] for r in results)
    print(
        f"clean runs: {clean}/{len(results)}; exits non-zero: "
        f"{sum(r['exit'] != 0 for r in results)}; halts: {sum(r['halted'] for r in results)}; "
        f"aborted real episodes: {sum(r['aborted'] for r in results)}"
    )
    same = len({r["fingerprint"] for r in results}) == 1
    for i, r in enumerate(results, 1):
        (episodes, outcomes), (states, joints) = r["fingerprint"]
        print(f"run {i}: {episodes} episodes {outcomes}; {states} real joint states {joints}")
    print(
        f"same outcomes and recorded joint states in all {len(results)} runs: {'yes' if same else 'no'}"
    )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if clean == len(results) and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
