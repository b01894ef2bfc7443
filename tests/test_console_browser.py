"""The live console in a real browser (Playwright driving Chromium).

- Against a stored window the page shows the store's numbers (the hand-checked vectors of
  tests/console_support.py); without the token the page is 401.
- During a live sim run two pages update without a reload, agree with each other, and pause and
  stop the run from their buttons (the stop after its confirmation); each page is opened with
  its own operator's link, and both requests are chained ledger records naming that operator.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from embodied_eval.console.access import Operators
from embodied_eval.console.app import ConsoleServer
from embodied_eval.live_channel import LiveState
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.live import operator_requests
from embodied_eval.runner.trials import RunOptions, run_trials
from tests.browser_support import browser, cell, latency_ms, open_page
from tests.console_support import stored_window
from tests.test_console import SIM_PROTOCOL

__all__ = ["browser"]
pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_the_page_shows_the_stored_windows_numbers_and_needs_the_token(browser, tmp_path: Path):
    protocol, db, _ = stored_window(tmp_path)
    with ConsoleServer(db, protocol, port=0, max_retries=0) as server:
        page = browser.new_page()
        assert page.goto(server.url.split("?")[0]).status == 401
        page = open_page(browser, server.url)
        real0, real7 = "real/ros2/pick_place/d0", "real/ros2/pick_place/d7"
        assert cell(page, f"{real0}/run") == "13/18"
        assert cell(page, f"{real0}/successes") == "9/12"
        assert cell(page, f"{real0}/interval") == "[0.4677, 0.9111]"  # Wilson 95 % of 9/12
        assert cell(page, f"{real0}/aborted") == "1"
        assert cell(page, f"{real0}/errors") == "0"
        assert cell(page, f"{real7}/successes") == "18/18"
        assert cell(page, "sim/mujoco/pick_place/d0/successes") == "3/4"
        assert cell(page, "sim/mujoco/pick_place/d7/run") == "0/18"
        assert page.inner_text('[data-side="real"] b') == "31 / 36"
        assert page.get_attribute("[data-stopping]", "data-stopping") == "undecided"
        assert "27/30 real successes" in page.inner_text("#stopping")
        assert "[0.6513, 0.9921]" in page.inner_text("#stopping")  # the mixture CS at 27/30
        assert page.is_disabled("#stop")  # no run attached


def test_a_live_sim_run_updates_two_pages_which_pause_and_stop_it(browser, tmp_path: Path):
    pytest.importorskip("sim_suites.episode")
    # 200 planned episodes (about 30 s): the run is still going when the page pauses it after
    # its third episode, whatever the order of the pages' connections and the run's start.
    protocol = protocol_from_mapping(
        {**SIM_PROTOCOL, "sampling": {**SIM_PROTOCOL["sampling"], "seeds_per_instance": 40}}
    )
    db, out = tmp_path / "store.db", tmp_path / "out"
    live = LiveState("technician")
    result: dict = {}

    def run() -> None:
        result["summary"] = run_trials(
            protocol,
            RunOptions(sides=("sim",), executor="sequential"),
            db_path=db,
            out_dir=out,
            show_progress=False,
            live=live,
        )

    # The page needs a manifest to show: escrow it before the pages open (the run does so too).
    run_trials(
        protocol, RunOptions(sides=("sim",), dry_run=True), db_path=db, out_dir=out,
        show_progress=False,
    )  # fmt: skip
    operators = Operators.issue(["ana", "bo"])
    with ConsoleServer(db, protocol, live=live, port=0, operators=operators) as server:
        first, second = (
            open_page(browser, server.url_for("ana")),
            open_page(browser, server.url_for("bo")),
        )
        assert (first.inner_text("#user"), second.inner_text("#user")) == ("ana", "bo")
        for page in (first, second):
            page.evaluate("window.__marker = 'no reload'")
            assert page.inner_text('[data-side="sim"] b') == "0 / 200"
        thread = threading.Thread(target=run)
        thread.start()
        for page in (first, second):  # the pages show the run as running before anything else
            page.wait_for_selector('body[data-run-status="running"]', timeout=30_000)
        first.wait_for_function(
            "document.querySelector('[data-side=\"sim\"] b').textContent.split(' / ')[0] >= 3",
            timeout=60_000,
        )
        first.click("#pause")
        for page in (first, second):
            page.wait_for_selector('body[data-run-status="paused"]', timeout=30_000)
        time.sleep(1.0)  # the episode in progress is stored; then nothing moves
        done = first.inner_text('[data-side="sim"] b')
        time.sleep(1.5)
        assert first.inner_text('[data-side="sim"] b') == done
        second.wait_for_function(
            f"document.querySelector('[data-side=\"sim\"] b').textContent === {done!r}"
        )
        assert cell(first, "sim/mujoco/push/d0/successes") == cell(
            second, "sim/mujoco/push/d0/successes"
        )
        second.click("#stop")  # confirmation accepted by the page's dialog handler
        thread.join(60)
        assert not thread.is_alive()
        for page in (first, second):
            page.wait_for_selector('body[data-run-status="finished"]', timeout=30_000)
            assert page.evaluate("window.__marker") == "no reload"
            assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        latency = latency_ms([first, second])
    summary = result["summary"]
    assert summary.interrupted
    records = operator_requests(db, "w-live")
    assert [(r["action"], r["by"], r["via"]) for r in records] == [
        ("pause", "ana", "page"),
        ("stop", "bo", "page"),
    ]
    print(f"event-to-page latency: {latency}")
    assert latency["n"] > 0 and latency["median"] < 500.0
