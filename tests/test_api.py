"""The notebook API (`import embodied_eval as ee`), driven by the developer guide's own example.

The window is `tests.test_certificate.build_window`: 25 pairs, real fails on 4 and sim on 2, one
near-miss recorded at 2026-11-10T12:00:00Z, 500 exposure hours. By hand: 25 real episodes with
21 successes (AR = 21/25 = 0.84), 25 sim episodes with 23 successes.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import embodied_eval as ee
from tests.test_certificate import build_window

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "developer.md"

pytestmark = pytest.mark.timeout(120)


def readme_example() -> str:
    section = GUIDE.read_text(encoding="utf-8").split("## Python API", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "docs/developer.md has no Python API example"
    return match.group(1)


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_window(tmp_path_factory.mktemp("api"))


def test_readme_example_runs_and_gives_typed_frames(window: tuple[Path, Path]) -> None:
    protocol, db = window
    scope: dict[str, object] = {"db": db, "protocol": protocol}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), "docs/developer.md", "exec"), scope)
    episodes = scope["episodes"]
    assert isinstance(episodes, pd.DataFrame)
    assert len(episodes) == 50  # 25 pairs (5 families × 5 instances, day 0) × sim + real
    assert episodes["success"].dtype == bool
    assert isinstance(episodes["started_at"].dtype, pd.DatetimeTZDtype)
    assert str(episodes["started_at"].dt.tz) == "UTC"
    assert isinstance(episodes["drift"].iloc[0], dict)
    real = episodes[episodes.side == "real"]
    assert (len(real), int(real.success.sum())) == (25, 21)  # real fails on 4 of the 25 pairs
    sim = episodes[episodes.side == "sim"]
    assert (len(sim), int(sim.success.sum())) == (25, 23)
    incidents = scope["incidents"]
    assert isinstance(incidents, pd.DataFrame)
    assert list(incidents.severity) == ["near_miss"]
    assert incidents.occurred_at.iloc[0] == pd.Timestamp("2026-11-10T12:00:00Z")
    table = scope["table"]
    assert isinstance(table, pd.DataFrame)
    ar = table.set_index("metric").loc["AR"]
    assert ar["value"] == pytest.approx(0.84)
    assert ar["low"] < 0.84 < ar["high"]
    assert "AAI-2" in scope["report"].to_json()["gates"]  # type: ignore[attr-defined]
    assert out.getvalue().strip().splitlines()[-1] in ("pass", "fail", "inconclusive",
                                                       "evidence_missing")  # fmt: skip


def test_open_store_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ee.EvalError, match="does not exist"):
        ee.open_store(tmp_path / "nope.db")


def test_import_stays_cheap() -> None:
    """`import embodied_eval` loads neither pandas nor numpy (the API loads on first use)."""
    code = (
        "import sys, embodied_eval as ee; "
        "assert callable(ee.open_store); "
        "print('pandas' in sys.modules, 'numpy' in sys.modules)"
    )
    plain = "import sys, embodied_eval; print('pandas' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.returncode == 0
