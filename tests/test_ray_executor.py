"""The Ray executor against a real local Ray instance (one session shared by the module).

- same manifest, same episode records with the sequential, local-pool and Ray executors at 1
  and 2 workers (real MuJoCo episodes);
- a Ray worker killed mid-task (SIGKILL from outside): that attempt is recorded once as an
  error and retried once;
- a driver killed mid-run (SIGKILL) while joined to the cluster with --ray-address: the next
  run resumes and every manifest row is stored exactly once.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from embodied_eval.manifest import plan_manifest
from embodied_eval.plugins import SIM_ENGINES
from embodied_eval.protocol.reader import protocol_from_mapping
from embodied_eval.runner.ray_executor import RayExecutor
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.store.core import Store
from tests.test_runner_executors import nominal_mujoco_specs
from tests.test_runner_support import fake_quality

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
PUSH = [f"push/block_{n}" for n in ("forward", "left", "right", "long", "diagonal")]


@pytest.fixture(scope="module")
def ray_session() -> Iterator[str]:
    """One local 2-CPU Ray for the module; the executor joins it (and leaves it running)."""
    if ray.is_initialized():
        ray.shutdown()
    context = ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=80 * 1024 * 1024,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    yield context.address_info["gcs_address"]
    ray.shutdown()


def comparable(ep) -> dict:
    data = ep.to_dict()
    data.pop("started_at")
    return data


def test_same_manifest_same_records_on_every_executor_and_worker_count(
    tmp_path: Path, ray_session: str
):
    proto = protocol_from_mapping(
        {
            "protocol": {"name": "executors", "version": "1", "base_seed": 21},
            "window": {"id": "w-exec", "start": "2026-11-01", "end": "2026-11-30"},
            "battery": {"push": {"target_quality": 0.8, "instances": PUSH}},
            "drift": {"nominal": {"day": 0}},
            "sampling": {"seeds_per_instance": 1, "real_fraction": 0.0},
            "sim": {"engines": ["mujoco"], "max_steps": 40},
        }
    )
    runs = {}
    for executor, workers in (
        ("sequential", 1),
        ("local", 1),
        ("local", 2),
        ("ray", 1),
        ("ray", 2),
    ):
        name = f"{executor}{workers}"
        summary = run_trials(
            proto,
            RunOptions(sides=("sim",), executor=executor, workers=workers),
            db_path=tmp_path / name / "s.db",
            out_dir=tmp_path / name / "out",
            show_progress=False,
        )
        assert summary.complete and summary.written == 5 and summary.failed == 0
        with Store(tmp_path / name / "s.db") as store:
            runs[name] = sorted((comparable(e) for e in store.episodes()), key=str)
    assert ray.is_initialized()  # the executor joined the session and left it up
    for name, records in runs.items():
        assert records == runs["sequential1"], name


def test_a_ray_worker_killed_mid_task_is_recorded_once_and_retried_once(
    tmp_path: Path, ray_session: str
):
    specs = nominal_mujoco_specs()
    killed: list[int] = []

    def killer() -> None:
        pid_file = tmp_path / "pid"
        deadline = time.monotonic() + 120
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    from tests.ray_support import killable_episode

    fn = functools.partial(killable_episode, str(tmp_path))
    out = list(RayExecutor(2).map_episodes(fn, specs, max_retries=1))
    thread.join(5)
    assert killed
    ids = [o.episode.episode_id for o in out]
    assert len(ids) == len(set(ids)) == 11  # 10 specs once, plus one retry
    [crashed] = [o.episode for o in out if o.episode.status == "error"]
    assert crashed.task_id == "push/block_1" and crashed.attempt == 1
    assert "WorkerCrashedError" in crashed.status_reason or "died" in crashed.status_reason
    [retry] = [
        o.episode for o in out if o.episode.pair_id == crashed.pair_id and o.episode.attempt == 2
    ]
    assert retry.status == "ok"
    assert retry.quality == fake_quality(next(s for s in specs if s.pair_id == crashed.pair_id))
    for o in out:
        if o.episode.status == "ok":
            spec = next(s for s in specs if s.pair_id == o.episode.pair_id)
            assert o.episode.quality == fake_quality(spec)


DRIVER = """
import sys
from embodied_eval.plugins import SIM_ENGINES
SIM_ENGINES["mujoco"] = "tests.ray_support:slow_episode"
from embodied_eval.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _stored(db: Path) -> list[str]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            return [row[0] for row in conn.execute("SELECT episode_id FROM episodes")]
    except sqlite3.OperationalError:  # the store is being created
        return []


def test_resume_after_the_driver_is_killed(tmp_path: Path, ray_session: str, monkeypatch):
    instances = ", ".join(f'{{ task_id = "{t}", params = {{ sleep_s = 0.2 }} }}' for t in PUSH)
    proto_file = tmp_path / "p.toml"
    proto_file.write_text(
        f"""
[protocol]
name = "resume"
version = "1"
base_seed = 4

[window]
id = "w-resume"
start = "2026-11-01"
end = "2026-11-30"

[battery.push]
target_quality = 0.5
instances = [{instances}]

[drift.nominal]
day = 0

[sampling]
seeds_per_instance = 2
real_fraction = 0.0

[sim]
engines = ["mujoco"]
max_steps = 10
"""
    )
    db, out = tmp_path / "s.db", tmp_path / "out"
    args = ["run", str(proto_file), "--side", "sim", "--executor", "ray", "--workers", "2"]
    args += ["--ray-address", ray_session, "--db", str(db), "--out", str(out), "--no-progress"]
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, *args], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while len(_stored(db)) < 2 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait(30)
    before = _stored(db)
    assert 2 <= len(before) < 10, "the driver finished before it could be killed"

    # Resume in this process, on the same cluster (the session the driver had joined).
    monkeypatch.setitem(SIM_ENGINES, "mujoco", "tests.ray_support:slow_episode")
    proto = protocol_from_mapping_file(proto_file)
    summary = run_trials(
        proto,
        RunOptions(sides=("sim",), executor="ray", workers=2),
        db_path=db,
        out_dir=out,
        show_progress=False,
    )
    after = _stored(db)
    planned = {s.episode_id for s in plan_manifest(proto).specs}
    assert summary.complete and summary.written == 10 - len(before)
    assert len(after) == len(set(after)) == 10 and set(after) == planned
    assert set(before) <= set(after)


def protocol_from_mapping_file(path: Path):
    from embodied_eval.protocol.reader import load_protocol

    return load_protocol(path)
