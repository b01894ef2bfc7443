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

Targets (idle 2-core machine): p99 < 10 ms, 0 deadline misses at 50 Hz, 0 states lost. The twin
and the harness run in real time on purpose, as with a real robot: deadline misses and a lost
stream only exist there (on the twin's simulated clock the loop waits for the robot).

The episode runs twice by default (`--console both`): without a console, then with the run's
live console attached (`run --console-port`: the live feed thread, the web server) and a
headless Chromium (Playwright) showing its page for the whole episode; the second run also
reports the event-to-page latency — an event published every 100 ms during the episode, from
`LiveState.publish` to the page's handler (wall clock; median, p99) — and the camera frames the
page showed. `--console off` / `on` runs one of the two.

Run: .venv/bin/python benchmarks/bridge_bench.py [--seconds 10] [--console both|off|on]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


#: The window the console shows beside the benchmark episode (its manifest is escrowed).
CONSOLE_PROTOCOL = {
    "protocol": {"name": "bridge-bench", "version": "1", "base_seed": 3, "m_min": 1},
    "window": {"id": "w-bench", "start": "2026-11-01", "end": "2026-11-30"},
    "battery": {"pick_place": {"instances": ["pick_place/cube_center"]}},
    "drift": {"nominal": {"day": 0}},
    "sampling": {"real_fraction": 1.0},
}


@contextlib.contextmanager
def console_with_browser(tmp: Path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A LiveState served by the console with a headless Chromium on its page; yields the live
    state and a dict filled at exit with the page's latencies and frames."""
    import shutil

    from playwright.sync_api import sync_playwright

    from embodied_eval.console.app import ConsoleServer
    from embodied_eval.live_channel import LiveState
    from embodied_eval.manifest import plan_manifest
    from embodied_eval.protocol.reader import protocol_from_mapping
    from embodied_eval.store.core import Store

    protocol = protocol_from_mapping(CONSOLE_PROTOCOL)
    manifest = plan_manifest(protocol)
    db = tmp / "console.db"
    with Store(db) as store:
        store.write_manifest(
            manifest.manifest_hash, protocol.protocol_hash, protocol.window_id, manifest.to_dict()
        )
    live = LiveState("bench")
    found: dict[str, Any] = {}
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with ConsoleServer(db, protocol, live=live, port=0) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_selector("body[data-state-version]", timeout=30_000)
        yield live, found
        page.wait_for_timeout(500)
        found["latencies_ms"] = page.evaluate("window.__consoleLatencies")
        found["frames"] = int(page.evaluate("Number(document.body.dataset.frame || 0)"))
        browser.close()


def ping(live: Any, stop: threading.Event) -> None:
    """An event every 100 ms: what the event-to-page latency is measured on."""
    n = 0
    while not stop.wait(0.1):
        n += 1
        live.publish("ping", {"n": n})


def run_once(spec: Any, steps: int, domain: int, with_console: bool) -> dict[str, Any]:
    from real_bridge.ros2_backend import Ros2Backend

    out: dict[str, Any] = {"load_before": os.getloadavg()}
    with TwinProcess(domain, camera_hz=30.0) as twin, tempfile.TemporaryDirectory() as tmp:
        config = load_bridge_config(profile_path("twin")).replace(
            domain_id=domain,
            deadlines=Deadlines(discovery_s=20.0),
            loop=LoopSettings(judge="oracle", rate_hz=RATE_HZ, max_steps=steps),
        )
        with contextlib.ExitStack() as stack:
            robot = Ros2Backend(None, config=config)
            page: dict[str, Any] = {}
            pinger = threading.Event()
            if with_console:
                live, page = stack.enter_context(console_with_browser(Path(tmp)))
                robot.attach_live(live)
                threading.Thread(target=ping, args=(live, pinger), daemon=True).start()
            with robot:
                link = robot.ros2_robot()
                link.stamp_log = []
                images_before = link.stream_counts().images
                outcome = robot.run_episode(spec, None, tmp)
                stamps = np.array(link.stamp_log, dtype=np.int64)
                out["images"] = link.stream_counts().images - images_before
            pinger.set()
        out["page"] = page
    out["twin"] = twin.exit_info  # its counters, printed as it exits
    out["episode"] = outcome.episode
    out["stream"] = stream_loss(stamps, 2_000_000)
    out["load_after"] = os.getloadavg()
    return out


def report(name: str, run: dict[str, Any], steps: int) -> bool:
    ep = run["episode"]
    c = ep.control
    received, lost = run["stream"]
    recorded = c.get("bridge_recorded_messages", {})
    print(f"real-side benchmark ({name}): harness policy loop at {RATE_HZ:g} Hz for {steps} steps")
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
        f"  camera: {run['images']} images received, "
        f"{recorded.get('/camera/image_raw/compressed', 0)} recorded as PNG"
    )
    page = run["page"]
    if page:
        values = sorted(page.get("latencies_ms", []))
        if values:
            p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
            print(
                f"  console + browser: event → page latency median "
                f"{statistics.median(values):.1f} ms, p99 {p99:.1f} ms over {len(values)} events "
                f"(target < 500 ms); the page showed {page.get('frames', 0)} camera frames"
            )
        else:
            print("  console + browser: no event reached the page")
    print(f"  twin: {run['twin']}")
    print(
        f"  load average (1/5/15 min) before {tuple(round(x, 2) for x in run['load_before'])}, "
        f"after {tuple(round(x, 2) for x in run['load_after'])}; {os.cpu_count()} CPUs"
    )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--console", choices=("both", "off", "on"), default="both")
    args = parser.parse_args(argv)
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
    modes = {"both": (False, True), "off": (False,), "on": (True,)}[args.console]
    for k, with_console in enumerate(modes):
        run = run_once(spec, steps, domain_id_for_test(k), with_console)
        report("with the console and a browser" if with_console else "no console", run, steps)
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
