"""Incident-log throughput: hash-chained appends (single and batched) and chain verification.

Run standalone:  .venv/bin/python benchmarks/incident_bench.py [--n 100000] [--chunks 10]

* single append: every incident in its own transaction (what `incidents report` and a detector
  do), targets >= 5 000 / s;
* batch append: `IncidentStore.append_incidents`, one transaction per chunk (what a bulk import
  or `ingest_safety_events` does);
* verify: `IncidentStore.verify()` over the whole chain, target >= 100 000 rows / s.

Rates are medians over chunks (appends) or repeats (verify) measured in this one run; the
machine's load average is printed beside them because it moves the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from embodied_eval.records import SafetyEvent
from incident_logging.classifier import classify
from incident_logging.record import IncidentRecord
from incident_logging.store import IncidentStore

TEMPLATES = (
    SafetyEvent(kind="contact", contact_force_n=150.0, body_region="chest", permitted=True),
    SafetyEvent(kind="separation", separation_m=0.41, protective_separation_m=0.5),
    SafetyEvent(kind="protective_stop", stop_category=1),
    SafetyEvent(kind="tcp_speed", tcp_speed_mps=0.31, reduced_speed_required=True),
)


def make_records(n: int) -> list[IncidentRecord]:
    """n classified automatic incidents (4 event kinds, 10 events per episode)."""
    bases = []
    for event in TEMPLATES:
        result = classify(event)
        assert result.severity is not None
        measurements = {
            k: v
            for k, v in event.to_dict().items()
            if k not in ("kind", "stop_category", "detail", "source_rule", "step")
            and v not in (None, False, "")
        }
        record = IncidentRecord(
            incident_id="template",
            window="bench-2026-11",
            occurred_at="2026-11-02T10:00:00Z",
            event_type=event.kind,
            source="auto",
            provisional_severity=result.severity,
            detector_rule_id=f"monitor:{event.kind}",
            detector_version="rules-1/bench",
            robot_id="bench-robot",
            stop_category=event.stop_category,
            measurements=measurements,
            what_happened=f"{event.kind} during pick_place",
            episode_id="ep",
            event_ordinal=0,
        )
        bases.append(record.with_classification(result))
    return [
        dataclasses.replace(
            bases[i % len(bases)],
            incident_id=f"INC-{i:07d}",
            episode_id=f"ep-{i // 10:06d}",
            event_ordinal=i % 10,
        )
        for i in range(n)
    ]


def chunked(items: list, chunks: int) -> list[list]:
    size = max(1, len(items) // chunks)
    return [items[i : i + size] for i in range(0, len(items), size)]


class Rates:
    """Per-sample rates by wall clock and by this process's CPU time.

    On a busy machine the wall-clock rate shows what a user sees now; the CPU-time rate (items
    per CPU-second of this process) shows the code's own cost, independent of contention.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def timed(self, items: int, run) -> None:  # type: ignore[no-untyped-def]
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        self.wall.append(items / (time.perf_counter() - wall))
        self.cpu.append(items / max(time.process_time() - cpu, 1e-9))

    def line(self) -> str:
        w, c = statistics.median(self.wall), statistics.median(self.cpu)
        return (
            f"median {w:,.0f}/s wall (min {min(self.wall):,.0f}, max {max(self.wall):,.0f}), "
            f"{c:,.0f}/s per CPU-second"
        )


def bench_single(db: Path, records: list[IncidentRecord], chunks: int) -> Rates:
    rates = Rates()
    with IncidentStore(db) as store:
        for part in chunked(records, chunks):

            def run(part: list[IncidentRecord] = part) -> None:
                for record in part:
                    store.append_incident(record)

            rates.timed(len(part), run)
    return rates


def bench_batch(db: Path, records: list[IncidentRecord], chunks: int) -> Rates:
    rates = Rates()
    with IncidentStore(db) as store:
        for part in chunked(records, chunks):
            rates.timed(len(part), lambda part=part: store.append_incidents(part))
        assert store.head()[0] == len(records) + 1  # + the threshold table record
    return rates


def bench_verify(db: Path, repeats: int) -> tuple[Rates, int]:
    rates = Rates()
    with IncidentStore(db) as store:
        rows = store.head()[0]
        for _ in range(repeats):
            rates.timed(rows, lambda: _verified(store))
    return rates, rows


def _verified(store: IncidentStore) -> None:
    report = store.verify()
    assert report.ok, report.summary()


def _met(wall: float, cpu: float, target: float) -> str:
    if wall >= target:
        return "met"
    return "met per CPU-second only (machine busy)" if cpu >= target else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="incidents per mode")
    parser.add_argument("--chunks", type=int, default=10, help="chunks (rate samples) per mode")
    parser.add_argument("--repeats", type=int, default=5, help="verification repeats")
    args = parser.parse_args()

    print(
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPU(s), load average before {os.getloadavg()[0]:.2f}"
    )
    start = time.perf_counter()
    records = make_records(args.n)
    build_s = time.perf_counter() - start
    print(f"built {args.n} classified records in {build_s:.2f} s ({args.n / build_s:,.0f}/s)")

    with tempfile.TemporaryDirectory() as tmp:
        single = bench_single(Path(tmp) / "single.db", records, args.chunks)
        batch = bench_batch(Path(tmp) / "batch.db", records, args.chunks)
        verify, rows = bench_verify(Path(tmp) / "batch.db", args.repeats)
        size_mb = (Path(tmp) / "batch.db").stat().st_size / 1e6
    chunk = args.n // args.chunks
    single_wall, single_cpu = statistics.median(single.wall), statistics.median(single.cpu)
    batch_wall, batch_cpu = statistics.median(batch.wall), statistics.median(batch.cpu)
    verify_wall, verify_cpu = statistics.median(verify.wall), statistics.median(verify.cpu)
    print(
        f"single append, 1 transaction each, {len(single.wall)} chunks of {chunk}: {single.line()}"
    )
    print(f"batch append, {chunk} per transaction: {batch.line()}")
    print(
        f"ratio batch/single: {batch_wall / single_wall:.1f}x wall, "
        f"{batch_cpu / single_cpu:.1f}x CPU"
    )
    print(f"verify {rows:,} rows, {len(verify.wall)} runs: {verify.line()}; store {size_mb:.0f} MB")
    print(
        f"targets: single >= 5,000/s {_met(single_wall, single_cpu, 5000)}; "
        f"verify >= 100,000 rows/s {_met(verify_wall, verify_cpu, 100_000)}"
    )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
