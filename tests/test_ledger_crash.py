"""Crash safety of the trial ledger: SIGKILL at random moments while a run (one episode per
transaction) and an import (batches) write concurrently into one store leaves a store whose
every episode is either stored and chained, or absent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from embodied_eval.store.core import Store
from embodied_eval.store.verify_store import verify_store

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

WRITER = r"""
import sys
from embodied_eval.store.core import Store
from tests.conftest import make_episode

db, mode, tag = sys.argv[1], sys.argv[2], sys.argv[3]
with Store(db) as store:
    print("ready", flush=True)
    i = 0
    while True:
        if mode == "run":
            i += 1
            store.write_episode(
                make_episode(episode_id=f"{tag}-{i}", pair_id=f"{tag}-{i}", window="w1"),
                [{"kind": "contact", "n": i}],
            )
        else:
            batch = [
                make_episode(episode_id=f"{tag}-{i + k}", pair_id=f"{tag}-{i + k}", window="w1")
                for k in range(25)
            ]
            i += 25
            store.write_episodes(
                batch, source={"importer": "ida", "source_file": "x.csv", "source_sha256": "0" * 64}
            )
"""


def _start(db: Path, mode: str, tag: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), mode, tag],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_random_sigkills_during_concurrent_writes_leave_a_valid_chain(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    Store(db).close()
    rng = np.random.default_rng(20261124)
    stored_before = 0
    for round_no in range(3):
        run = _start(db, "run", f"run{round_no}")
        imp = _start(db, "import", f"imp{round_no}")
        # Kill each writer at its own random moment, mid-write most of the time.
        delays = rng.uniform(0.2, 1.2, size=2)
        order = sorted(zip(delays, (run, imp), strict=True), key=lambda pair: pair[0])
        start = time.monotonic()
        for delay, proc in order:
            time.sleep(max(0.0, start + delay - time.monotonic()))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.returncode == -signal.SIGKILL
        report = verify_store(db)
        assert report.ok, report.summary()
        with Store(db) as store:
            count = len(store.episode_ids())
        assert report.counts["episodes"] == count
        assert count > stored_before  # both writers got some episodes in before the kill
        stored_before = count
    with Store(db) as store:
        imported = store.conn.execute(
            "SELECT COUNT(*) FROM episode_chain WHERE json_extract(body, '$.kind') = 'import'"
        ).fetchone()[0]
    assert imported >= 1
