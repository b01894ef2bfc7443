"""Kill the runner (SIGKILL, Ctrl-C) at random moments; the resumed store equals an unbroken run's.

Each run is a subprocess of the real CLI (`python -m tests.test_runner_support run ...`, the CLI
with sim engines and the robot backend pointed at the small functions in that module), running
both sides at once: sims on a 2-worker spawn pool, real episodes in the runner's real-side thread.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.records import Episode
from embodied_eval.store.core import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = ROOT / "tests" / "data" / "runner_tiny.toml"


def command(tmp: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.test_runner_support",
        "run",
        str(PROTOCOL),
        "--db",
        str(tmp / "store.db"),
        "--out",
        str(tmp / "out"),
        "--executor",
        "local",
        "--workers",
        "2",
        "--no-progress",
        "--robot-option",
        "p=0.7",
        "--robot-option",
        "sleep_s=0.15",
    ]


def start(tmp: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUNNER_TEST_SLEEP_S": "0.08"}
    return subprocess.Popen(
        command(tmp),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the test can find and reap its workers
    )


def group_alive(pgid: int) -> bool:
    """True while a process of group `pgid` is still running (zombies waiting to be reaped by
    whoever adopted them do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            return True
    return False


def finish(tmp: Path) -> str:
    proc = start(tmp)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()
    return out.decode()


def stored_count(tmp: Path) -> int:
    """Episodes in the store so far (0 while it does not exist yet)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{tmp / 'store.db'}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
    except sqlite3.Error:
        return 0


def comparable(ep: Episode) -> tuple:
    data = ep.to_dict()
    data.pop("started_at")
    data.pop("duration_s")
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in data.items()))


def episodes(tmp: Path) -> list[Episode]:
    with Store(tmp / "store.db") as store:
        return store.episodes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[Episode]:
    tmp = tmp_path_factory.mktemp("reference")
    finish(tmp)
    eps = episodes(tmp)
    assert len(eps) == 48  # 40 sim + 8 real
    return eps


def assert_same_as_reference(tmp: Path, reference: list[Episode]) -> None:
    got = episodes(tmp)
    ids = [e.episode_id for e in got]
    assert len(ids) == len(set(ids))
    slots = [(e.pair_id, e.side, e.engine) for e in got]
    assert len(slots) == len(set(slots)), "a manifest row was counted twice"
    assert sorted(map(comparable, got)) == sorted(map(comparable, reference))


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    tmp_path: Path, reference: list[Episode]
):
    rng = np.random.default_rng(20261122)
    kills = 0
    killed: list[int] = []
    for _ in range(3):
        before = stored_count(tmp_path)
        proc = start(tmp_path)
        # A random moment after this run has started writing episodes.
        deadline = time.monotonic() + 60
        while stored_count(tmp_path) == before and proc.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        time.sleep(float(rng.uniform(0.0, 0.8)))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)  # the runner only: its workers must notice alone
            kills += 1
            killed.append(proc.pid)
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 15
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        orphans = group_alive(proc.pid)
        if orphans:
            os.killpg(proc.pid, signal.SIGKILL)
        assert not orphans, "pool workers outlived the killed runner"
    assert kills >= 1
    assert len(episodes(tmp_path)) < 48
    finish(tmp_path)
    assert_same_as_reference(tmp_path, reference)
    # The killed runners' worker-marker folders were cleaned up by the run that finished.
    tmp = Path(tempfile.gettempdir())
    assert not [d for pid in killed for d in tmp.glob(f"embodied-eval-workers-{pid}-*")]


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(
    tmp_path: Path, reference: list[Episode]
):
    proc = start(tmp_path)
    # Ctrl-C once episodes are being written (not while Python is still importing).
    deadline = time.monotonic() + 60
    while stored_count(tmp_path) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal sends Ctrl-C to the whole group
    out, _ = proc.communicate(timeout=60)
    text = out.decode()
    assert proc.returncode == 130, text
    assert "interrupted" in text
    summaries = list((tmp_path / "out").glob("summary-*.json"))
    assert len(summaries) == 1 and json.loads(summaries[0].read_text())["interrupted"] is True
    assert 0 < len(episodes(tmp_path)) < 48
    finish(tmp_path)
    assert_same_as_reference(tmp_path, reference)
