"""Trial-ledger throughput: chained episode writes, and the whole-store verify.

Run standalone:  .venv/bin/python benchmarks/ledger_bench.py [--n 100000] [--single 5000]

* single chained writes: `Store.write_episode` with one safety event (one transaction each, what
  the runner does per episode; the episodes are built before the clock starts), target >= 5 000/s;
  measured in the same run with the ledger append switched off (the write path without the
  ledger) and with it on, alternating chunks, so the ratio is the ledger's cost on the runner's
  write path (target: within 5 %);
* whole-store verify (`embodied_eval.store_verify.verify_store`) of a store holding N chained
  episodes (each with a safety event) and N chained incidents, target >= 100 000 rows / s.

Each rate is printed per wall-clock second and per CPU-second of this process (user + system):
on a shared machine the wall rate falls with the load, the CPU rate much less. Rates are medians
over chunks (writes) or repeats (verify) measured in this one run; the load average is printed
before and after because it moves the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from embodied_eval.records import Episode
from embodied_eval.store import ledger
from embodied_eval.store.core import Store
from embodied_eval.store.verify_store import verify_store
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


def _cpu() -> float:
    """User + system CPU seconds of this process (SQLite's writes are system time)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_single(db: Path, n: int, chunks: int) -> dict[str, dict[str, list[float]]]:
    """Alternate chunks with the ledger append off (the write path without the ledger) and on;
    per mode, the per-chunk rates: wall and per CPU-second. Episodes and their safety events
    are built before each chunk is timed (building them is the runner's work, not the write's)."""
    rates: dict[str, dict[str, list[float]]] = {
        mode: {"wall": [], "cpu": []} for mode in ("unchained", "chained")
    }
    real_append = ledger.append_episode

    def skip(*_: Any, **__: Any) -> None:
        return None

    with Store(db) as store:
        i = 0
        per = n // chunks
        for c in range(2 * chunks):
            mode = "chained" if c % 2 == 1 else "unchained"
            ledger.append_episode = real_append if mode == "chained" else skip  # type: ignore[assignment]
            episodes = [make_episode(i + k) for k in range(1, per + 1)]
            i += per
            start, cpu = time.perf_counter(), _cpu()
            for ep in episodes:
                store.write_episode(ep, [EVENT])
            wall, cpu = time.perf_counter() - start, _cpu() - cpu
            rates[mode]["wall"].append(per / wall)
            rates[mode]["cpu"].append(per / cpu if cpu > 0 else float("inf"))
    ledger.append_episode = real_append  # type: ignore[assignment]
    return rates


def build_store(db: Path, n: int) -> float:
    start = time.perf_counter()
    with Store(db) as store:
        step = 10_000
        for lo in range(0, n, step):
            episodes = [make_episode(i) for i in range(lo, min(n, lo + step))]
            from embodied_eval.store.core import transaction

            with transaction(store.conn):
                for ep in episodes:
                    store._write_episode_locked(ep, [EVENT])
    with IncidentStore(db) as log:
        records = make_records(n)
        step = 10_000
        for lo in range(0, n, step):
            log.append_incidents(records[lo : lo + step])
    return time.perf_counter() - start


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="episodes and incidents to verify")
    parser.add_argument("--single", type=int, default=5_000, help="single writes per mode")
    parser.add_argument("--chunks", type=int, default=5, help="chunks per mode")
    parser.add_argument("--repeats", type=int, default=3, help="verify repeats")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPU(s); load average before {_load()}"
    )
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        single = bench_single(Path(tmp) / "single.db", args.single, args.chunks)
        print(
            f"\nsingle writes: Store.write_episode with one safety event, one transaction each "
            f"(as the runner writes); {args.chunks} alternating chunks of "
            f"{args.single // args.chunks} per mode, medians"
        )
        print(f"  {'mode':10} {'wall /s':>9} {'µs wall':>8} {'per CPU-s':>10} {'µs CPU':>7}")
        for mode, r in single.items():
            w, c = med(r["wall"]), med(r["cpu"])
            print(f"  {mode:10} {w:9,.0f} {1e6 / w:8.0f} {c:10,.0f} {1e6 / c:7.0f}")
        on, off = single["chained"], single["unchained"]
        m_on, m_off = med(on["wall"]), med(off["wall"])
        c_on, c_off = med(on["cpu"]), med(off["cpu"])
        print(
            f"  chained/unchained: wall {m_on / m_off:.3f}, per CPU-second {c_on / c_off:.3f} "
            f"(the ledger adds {(1 / m_on - 1 / m_off) * 1e6:+.0f} µs wall, "
            f"{(1 / c_on - 1 / c_off) * 1e6:+.0f} µs CPU per episode)"
        )
        db = Path(tmp) / "big.db"
        build_s = build_store(db, args.n)
        print(f"\nbuilt {args.n:,} episodes + {args.n:,} incidents in {build_s:.1f} s")
        rates: list[float] = []
        cpu_rates: list[float] = []
        rows = 0
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), _cpu()
            report = verify_store(db)
            wall, cpu = time.perf_counter() - start, _cpu() - cpu
            assert report.ok, report.summary()
            rows = report.ledger_records + report.incident_records
            rates.append(rows / wall)
            cpu_rates.append(rows / cpu)
        size_mb = db.stat().st_size / 1e6
    v_wall = med(rates)
    print(
        f"whole-store verify (verify_store) of {rows:,} chained rows (+ {args.n:,} episode rows "
        f"and {args.n:,} safety-event rows re-hashed), {args.repeats} runs: median "
        f"{v_wall:,.0f} rows/s wall (min {min(rates):,.0f}), {med(cpu_rates):,.0f} rows per "
        f"CPU-second; store {size_mb:.0f} MB"
    )
    print(
        f"\ntargets: chained single >= 5,000/s: {m_on:,.0f}/s wall "
        f"{'met' if m_on >= 5000 else 'NOT met'} ({c_on:,.0f} per CPU-second); "
        f"chained within 5 % of unchained: {m_on / m_off:.3f} wall, {c_on / c_off:.3f} CPU; "
        f"verify >= 100,000 rows/s: {v_wall:,.0f} wall "
        f"{'met' if v_wall >= 100_000 else 'NOT met'} ({med(cpu_rates):,.0f} per CPU-second)"
    )
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
