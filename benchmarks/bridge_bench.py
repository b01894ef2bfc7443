"""Bridge benchmark: the twin's 500 Hz state stream across processes, and command→state latency.

Starts the twin robot (`python -m real_bridge.twin`, no reality gap so it applies commands at the
next tick) on its own DDS domain with loopback-only discovery, connects the bridge, and for
DURATION_S seconds:

- counts joint-state messages: the twin stamps tick k with start + k·2 ms and never skips a tick,
  so every gap in the received stamps is a lost message;
- sends position commands one at a time (COMMAND_HZ) and measures, for each, the time from
  publishing it to receiving the state of the tick that applied it (the twin echoes the applied
  command with that tick's stamp). This includes waiting for the next 2 ms tick (0–2 ms).

Targets: 0 lost; p99 latency < 5 ms on an idle machine. Prints medians, percentiles, the
one-way publish→callback time of the state stream (transport and dispatch alone), how far the
twin's ticks ran behind their schedule (CPU contention), and the load average before and after.

Run: .venv/bin/python benchmarks/bridge_bench.py [--seconds 10] [--rate-hz 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from real_bridge.bridge_config import BridgeConfig, Deadlines
from real_bridge.discovery import configure_process, domain_id_for_test
from real_bridge.twin.process import TwinProcess

COMMAND_HZ = 100.0


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
    parser.add_argument("--rate-hz", type=float, default=500.0)
    args = parser.parse_args(argv)
    domain = domain_id_for_test(0)
    load_before = os.getloadavg()
    configure_process(domain)
    from real_bridge.bridge_link import BridgeLink

    with TwinProcess(domain, rate_hz=args.rate_hz, no_gap=True) as twin:
        config = BridgeConfig(domain_id=domain, deadlines=Deadlines(discovery_s=20.0))
        link = BridgeLink(config)
        try:
            link.wait_ready(config.deadlines.discovery_s)
            ok, message = link.set_enabled(True, 5.0)
            assert ok, message
            time.sleep(1.0)  # let the stream settle before measuring
            first_count = link.state_count
            link.stamp_log = []
            link.transit_log = []
            latencies: list[float] = []
            missed = 0
            period_ns = round(1e9 / args.rate_hz)
            base = link.latest_state()
            assert base is not None
            names, home = base.names[:7], base.position[:7].copy()
            t_end = time.monotonic() + args.seconds
            k = 0
            next_send = time.monotonic()
            while time.monotonic() < t_end:
                now = time.monotonic()
                if now < next_send:
                    time.sleep(min(next_send - now, 0.002))
                    continue
                next_send += 1.0 / COMMAND_HZ
                target = home.copy()
                target[0] += 0.01 * np.sin(0.1 * k)  # a small, always-new set-point
                k += 1
                sent = time.monotonic()
                command_id = link.publish_command(names, target)
                echo = None

                def echoed(cid: str = command_id) -> bool:
                    nonlocal echo
                    echo = link.applied_echo(cid)
                    return echo is not None

                if not link.wait_until(echoed, 0.5):
                    missed += 1
                    continue
                stamp_ns = echo[0]  # type: ignore[index]
                sample = None

                def arrived(stamp: int = stamp_ns) -> bool:
                    nonlocal sample
                    sample = link.state_with_stamp(stamp)
                    return sample is not None

                if not link.wait_until(arrived, 0.5):
                    missed += 1
                    continue
                latencies.append(sample.received_s - sent)  # type: ignore[union-attr]
            window_count = link.state_count - first_count
            recent = list(link.stamp_log)
            transit_ms = np.array(link.transit_log, dtype=float) / 1e6
        finally:
            link.close()
    load_after = os.getloadavg()
    stamps = np.array(recent, dtype=np.int64)
    duplicates = len(stamps) - len(np.unique(stamps))
    received, lost = stream_loss(stamps, period_ns)
    lat_ms = np.array(latencies) * 1e3
    print(f"bridge benchmark: twin state stream at {args.rate_hz:g} Hz for {args.seconds:g} s")
    print(f"  states received in window: {window_count} ({window_count / args.seconds:.1f}/s)")
    print(
        f"  stamps checked: {received}; lost (gaps in the twin's tick stamps): {lost}; "
        f"duplicates: {duplicates}"
    )
    print(
        f"  command→state latency over {len(lat_ms)} round trips ({missed} unanswered): "
        f"p50 {np.percentile(lat_ms, 50):.3f} ms, p90 {np.percentile(lat_ms, 90):.3f} ms, "
        f"p99 {np.percentile(lat_ms, 99):.3f} ms, max {lat_ms.max():.3f} ms"
    )
    print(f"  target p99 < 5 ms: {'met' if np.percentile(lat_ms, 99) < 5.0 else 'NOT met'}")
    print(
        f"  state publish→bridge callback (transport + dispatch, one way): "
        f"p50 {np.percentile(transit_ms, 50):.3f} ms, p99 {np.percentile(transit_ms, 99):.3f} ms"
    )
    print(
        f"  twin tick lag behind its schedule: mean {twin.exit_info.get('mean_tick_lag_us', 0)} µs, "
        f"max {twin.exit_info.get('max_tick_lag_us', 0)} µs (CPU contention shows up here)"
    )
    print(f"  twin: {twin.exit_info}")
    print(
        f"  load average (1/5/15 min) before {tuple(round(x, 2) for x in load_before)}, "
        f"after {tuple(round(x, 2) for x in load_after)}; {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
