"""Trial-ledger throughput: chained episode writes, and the whole-store verify.

Run standalone:  .venv/bin/python benchmarks/ledger_bench.py [--n 100000] [--single 5000]

* single chained writes: `Store.write_episode` (one transaction each, what the runner does per
  episode), target >= 5 000 / s; measured in the same run with the ledger append switched off
  (the write path as it was before the ledger) and with it on, alternating chunks, so the ratio
  is the ledger's cost on the runner's write path;
* whole-store verify (`embodied_eval.store_verify.verify_store`) of a store holding N chained
  episodes (each with a safety event) and N chained incidents, target >= 100 000 rows / s.

Rates are medians over chunks (writes) or repeats (verify) measured in this one run; the load
average is printed beside them because it moves the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from embodied_eval import ledger
from embodied_eval.records import Episode
from embodied_eval.store import Store
from embodied_eval.store_verify import verify_store
from incident_logging.store import IncidentStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incident_bench import make_records


def make_episode(i: int) -> Episode:
    return Episode(
        episode_id=f"p{i:06d}-real-a1",
        pair_id=f"p{i:06d}",
        side="real",
        family="pick_place",
        task_id="pick_place/cube_center",
        seed=i,
        policy="sim_suites.policies:scripted",
        engine="ros2",
        quality=(i % 100) / 100,
        target_quality=0.8,
        duration_s=12.5,
        actions=40,
        control={"rate_hz": 50, "deadline_misses": i % 3},
        started_at="2026-11-02T10:00:00Z",
        window="bench-2026-11",
        protocol_hash="b" * 64,
    )


EVENT = {"kind": "contact", "contact_force_n": 40.0, "body_region": "hand", "permitted": True}


def bench_single(db: Path, n: int, chunks: int) -> tuple[list[float], ...]:
    """Alternate chunks with the ledger append off (the pre-ledger path) and on."""
    on: list[float] = []
    off: list[float] = []
    cpu_on: list[float] = []
    cpu_off: list[float] = []
    real_append = ledger.append_episode

    def skip(*_: Any, **__: Any) -> None:
        return None

    with Store(db) as store:
        i = 0
        per = n // chunks
        for c in range(2 * chunks):
            chained = c % 2 == 1
            ledger.append_episode = real_append if chained else skip  # type: ignore[assignment]
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(per):
                i += 1
                store.write_episode(make_episode(i), [EVENT])
            (on if chained else off).append(per / (time.perf_counter() - start))
            (cpu_on if chained else cpu_off).append(per / (time.process_time() - cpu))
    ledger.append_episode = real_append  # type: ignore[assignment]
    return off, on, cpu_off, cpu_on


def build_store(db: Path, n: int) -> float:
    start = time.perf_counter()
    with Store(db) as store:
        step = 10_000
        for lo in range(0, n, step):
            episodes = [make_episode(i) for i in range(lo, min(n, lo + step))]
            from embodied_eval.store import transaction

            with transaction(store.conn):
                for ep in episodes:
                    store._write_episode_locked(ep, [EVENT])
    with IncidentStore(db) as log:
        records = make_records(n)
        step = 10_000
        for lo in range(0, n, step):
            log.append_incidents(records[lo : lo + step])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="episodes and incidents to verify")
    parser.add_argument("--single", type=int, default=5_000, help="single writes per mode")
    parser.add_argument("--chunks", type=int, default=5, help="chunks per mode")
    parser.add_argument("--repeats", type=int, default=3, help="verify repeats")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPU(s), load average before {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        off, on, cpu_off, cpu_on = bench_single(Path(tmp) / "single.db", args.single, args.chunks)
        m_off, m_on = statistics.median(off), statistics.median(on)
        c_off, c_on = statistics.median(cpu_off), statistics.median(cpu_on)
        print(
            f"single write_episode, 1 transaction each, {args.chunks} chunks of "
            f"{args.single // args.chunks} per mode: without ledger {m_off:,.0f}/s, chained "
            f"{m_on:,.0f}/s; chained/unchained {m_on / m_off:.3f} "
            f"(+{(1 / m_on - 1 / m_off) * 1e6:.0f} µs per episode); per CPU-second "
            f"{c_off:,.0f}/s vs {c_on:,.0f}/s, ratio {c_on / c_off:.3f}"
        )
        db = Path(tmp) / "big.db"
        build_s = build_store(db, args.n)
        print(f"built {args.n:,} episodes + {args.n:,} incidents in {build_s:.1f} s")
        rates = []
        cpu_rates = []
        rows = 0
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            report = verify_store(db)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert report.ok, report.summary()
            rows = report.ledger_records + report.incident_records
            rates.append(rows / wall)
            cpu_rates.append(rows / cpu)
        size_mb = db.stat().st_size / 1e6
    print(
        f"whole-store verify of {rows:,} chained rows (+ {args.n:,} episode rows and "
        f"{args.n:,} safety-event rows re-hashed), {args.repeats} runs: median "
        f"{statistics.median(rates):,.0f} rows/s wall (min {min(rates):,.0f}), "
        f"{statistics.median(cpu_rates):,.0f} rows per CPU-second; store {size_mb:.0f} MB"
    )
    print(
        f"targets: chained single >= 5,000/s {'met' if m_on >= 5000 else 'NOT met'}; "
        f"verify >= 100,000 rows/s {'met' if statistics.median(rates) >= 100_000 else 'NOT met'}"
    )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
