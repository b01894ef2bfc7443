"""Playwright driving the system's Chromium (Playwright's own browser download is not used):
skipped cleanly when either is missing (`make test` installs both)."""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
        if (found := shutil.which(name))
    ),
    None,
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no chromium binary on PATH (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Any, url: str) -> Any:
    """A new page on `url`, its confirmation dialogs accepted, once its event stream delivered
    the first state."""
    page = browser.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(url)
    page.wait_for_selector("body[data-state-version]", timeout=30_000)
    return page


def cell(page: Any, key: str) -> str:
    return str(page.inner_text(f'[data-cell="{key}"]')).strip()


def latency_ms(pages: list[Any]) -> dict[str, float]:
    """Event-to-page latency (median, p99, n) over every event the pages received."""
    values = sorted(v for p in pages for v in p.evaluate("window.__consoleLatencies"))
    if not values:
        return {"n": 0}
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return {"n": len(values), "median": statistics.median(values), "p99": p99}
