"""run_trials with small real engine functions: recording, resume, retries, stopping, Gymnasium."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from embodied_eval.canonical import file_sha256
from embodied_eval.manifest import plan_manifest, verify_manifest_file
from embodied_eval.plugins import INCIDENT_LOG, ROBOT_BACKENDS, SIM_ENGINES
from embodied_eval.records import Episode
from embodied_eval.runner.summary import run_history
from embodied_eval.runner.trials import RunOptions, run_trials
from embodied_eval.runner.work import GymSource
from embodied_eval.store.core import Store
from embodied_eval.store.verify_store import verify_store
from tests import test_runner_support as support
from tests.test_runner_support import HERE, tiny_protocol

pytestmark = pytest.mark.timeout(120)

SEQ = RunOptions(executor="sequential")


@pytest.fixture(autouse=True)
def fake_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:fake_episode")
    monkeypatch.setitem(SIM_ENGINES, "pybullet", f"{HERE}:fake_episode")
    monkeypatch.setitem(ROBOT_BACKENDS, "fake", f"{HERE}:FakeBackend")
    monkeypatch.setitem(INCIDENT_LOG, "ingest_safety_events", f"{HERE}:recording_ingest")
    support.INGEST_CALLS.clear()


def run(tmp_path: Path, proto=None, options: RunOptions = SEQ, **kw):
    return run_trials(
        proto or tiny_protocol(),
        options,
        db_path=tmp_path / "store.db",
        out_dir=tmp_path / "out",
        show_progress=False,
        **kw,
    )


def stored(tmp_path: Path) -> list[Episode]:
    with Store(tmp_path / "store.db") as store:
        return store.episodes()


def comparable(ep: Episode) -> dict:
    """An episode without its wall-clock fields (start time, duration)."""
    data = ep.to_dict()
    data.pop("started_at")
    data.pop("duration_s")
    return data


def test_a_run_records_every_manifest_row_escrows_the_manifest_and_summarizes(tmp_path: Path):
    proto = tiny_protocol()
    summary = run(tmp_path, proto, RunOptions(executor="sequential", robot_options={"p": 1.0}))
    manifest = plan_manifest(proto)
    episodes = stored(tmp_path)
    # 20 pairs x 2 engines + floor(0.4 * 20 + 0.5) = 8 real episodes.
    assert len(episodes) == 48 == summary.written
    assert {e.episode_id for e in episodes} == {s.episode_id for s in manifest.specs}
    assert all(e.window == "w-test" and e.protocol_hash == proto.protocol_hash for e in episodes)
    rows = {(r["side"], r["engine"]): r for r in summary.rows}
    assert rows[("sim", "mujoco")]["planned"] == rows[("sim", "mujoco")]["done"] == 20
    assert rows[("real", "fake")]["planned"] == rows[("real", "fake")]["done"] == 8
    assert rows[("real", "fake")]["successes"] == 8  # p = 1.0: every real episode succeeds
    sim_successes = sum(e.success for e in episodes if e.engine == "mujoco")
    assert rows[("sim", "mujoco")]["successes"] == sim_successes
    assert summary.complete and not summary.interrupted
    # Escrow: the file verifies, and the store holds the same manifest under its hash.
    assert verify_manifest_file(summary.manifest_path).manifest_hash == manifest.manifest_hash
    with Store(tmp_path / "store.db") as store:
        assert store.manifest(manifest.manifest_hash) == manifest.to_dict()
        assert len(run_history(store, manifest.manifest_hash)) == 1
        events = store.safety_events()
    # Safety events are stored with their episodes and handed to the incident log.
    assert events and all(ev["kind"] == "contact" for ev in events)
    calls = support.INGEST_CALLS
    assert calls == [(str(tmp_path / "store.db"), "runner-tiny")]
    saved = json.loads(
        (tmp_path / "out" / f"summary-{manifest.manifest_hash[:12]}.json").read_text()
    )
    assert saved["written"] == 48


def test_rerunning_a_finished_run_writes_nothing(tmp_path: Path):
    run(tmp_path)
    before = sorted(e.to_json() for e in stored(tmp_path))
    again = run(tmp_path)
    assert again.written == 0 and again.complete
    assert sorted(e.to_json() for e in stored(tmp_path)) == before


def test_resume_runs_exactly_the_missing_rows_and_replays_them(tmp_path: Path):
    run(tmp_path)
    before = {e.episode_id: e for e in stored(tmp_path)}
    lost = sorted(before)[::7]  # as if the run had died before these were written
    # The store such a run leaves: the manifest and every other episode, chained (the store is
    # append-only, so it is rebuilt rather than edited).
    partial = tmp_path / "partial" / "store.db"
    with Store(tmp_path / "store.db") as old, Store(partial) as new:
        for m in old.manifests():
            h = m["manifest_hash"]
            new.write_manifest(h, m["protocol_hash"], m["window"], old.manifest(h))
        for ep in old.episodes():
            if ep.episode_id not in lost:
                events = old.safety_events(ep.episode_id)
                new.write_episode(
                    ep, [{k: v for k, v in e.items() if k != "ordinal"} for e in events]
                )
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"store.db{suffix}").unlink(missing_ok=True)
    partial.rename(tmp_path / "store.db")
    again = run(tmp_path)
    assert again.written == len(lost)
    after = {e.episode_id: e for e in stored(tmp_path)}
    assert after.keys() == before.keys()
    assert all(comparable(after[i]) == comparable(before[i]) for i in lost)
    assert verify_store(tmp_path / "store.db").ok


def test_an_exception_in_an_episode_is_an_error_with_its_traceback_then_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:raising_episode")
    opts = RunOptions(executor="sequential", sides=("sim",), engines=("mujoco",), max_retries=0)
    run(tmp_path, options=opts)
    errors = [e for e in stored(tmp_path) if e.status == "error"]
    # push/block_2, seed index 0, two drifts -> two errored attempts.
    assert len(errors) == 2 and all(e.task_id == "push/block_2" for e in errors)
    art = errors[0].artifacts[0]
    assert not Path(art.path).is_absolute()  # kept relative to the store's folder
    assert art.kind == "traceback" and file_sha256(tmp_path / art.path) == art.sha256
    assert "RuntimeError: gripper model exploded" in (tmp_path / art.path).read_text()
    assert not errors[0].success and not errors[0].scored
    # Resume with a retry allowed: exactly the two errored rows get attempt 2.
    again = run(tmp_path, options=RunOptions(**{**opts.__dict__, "max_retries": 1}))
    assert again.written == 2
    retries = [e for e in stored(tmp_path) if e.attempt == 2]
    assert sorted(e.pair_id for e in retries) == sorted(e.pair_id for e in errors)
    assert all(e.status == "ok" for e in retries)
    row = again.rows[0]
    assert (row["planned"], row["done"], row["attempts"]) == (20, 20, 22)


def test_an_engine_returning_the_wrong_episode_is_recorded_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(SIM_ENGINES, "mujoco", f"{HERE}:mislabelling_episode")
    opts = RunOptions(executor="sequential", sides=("sim",), engines=("mujoco",), max_retries=0)
    run(tmp_path, options=opts)
    episodes = stored(tmp_path)
    assert len(episodes) == 20 and all(e.status == "error" for e in episodes)
    assert "seed=" in episodes[0].status_reason


def test_same_protocol_same_outcomes_on_sequential_and_local_pool(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    run(a, options=RunOptions(executor="sequential", sides=("sim",)))
    run(b, options=RunOptions(executor="local", workers=2, sides=("sim",)))
    assert sorted(map(comparable, stored(a)), key=str) == sorted(
        map(comparable, stored(b)), key=str
    )


def many_real_pairs(**stopping: object):
    """40 real pairs in run order (8 seeds x 5 instances, one drift), stopping enabled."""
    return tiny_protocol(
        drift={"nominal": {"day": 0}},
        sampling={"seeds_per_instance": 8, "real_fraction": 1.0},
        stopping={"enabled": True, "ar_threshold": 0.75, **stopping},
    )


@pytest.mark.parametrize(
    ("p", "stopping", "decision", "trials"),
    [
        # Mixture CS at 95 %, all successes: low end = (1/(20(n+1)))^(1/n); n = 21: 0.7484 < 0.75,
        # n = 22: (1/460)^(1/22) = exp(-6.1312/22) = 0.7568 >= 0.75 -> pass after 22 trials.
        (1.0, {}, "pass", 22),
        # All failures: high end = 1 - (1/(20(n+1)))^(1/n); n = 4: 0.6838 < 0.75 already, but
        # min_trials = 5 -> fail after 5 trials (high end 1 - (1/120)^(1/5) = 0.6162).
        (0.0, {}, "fail", 5),
        # SPRT p0 0.75 vs p1 0.90, α 0.05, β 0.10: ln A = ln 18 = 2.8904, a success adds
        # ln 1.2 = 0.18232 -> 2.8904 / 0.18232 = 15.85 -> pass after 16 trials.
        (1.0, {"method": "sprt", "p1": 0.9}, "pass", 16),
        # ln B = ln(0.1/0.95) = -2.2513, a failure adds ln 0.4 = -0.9163 -> 3 trials would do;
        # min_trials = 2 -> fail after 3 trials.
        (0.0, {"method": "sprt", "p1": 0.9, "min_trials": 2}, "fail", 3),
    ],
)
def test_anytime_stopping_stops_the_real_side_when_decided(
    tmp_path: Path, p: float, stopping: dict, decision: str, trials: int
):
    proto = many_real_pairs(**stopping)
    opts = RunOptions(executor="sequential", sides=("real",), robot_options={"p": p})
    summary = run(tmp_path, proto, opts)
    assert summary.stopping is not None
    assert summary.stopping["decision"] == decision
    assert summary.stopping["trials"] == trials
    assert summary.real_stopped.startswith("anytime stopping")
    assert len(stored(tmp_path)) == trials
    assert not summary.interrupted and summary.complete
    # Resuming replays the decision from the store and runs no more real trials.
    again = run(tmp_path, proto, opts)
    assert again.written == 0
    assert again.stopping is not None and again.stopping["decision"] == decision
    assert "decided earlier" in again.real_stopped


def test_a_robot_that_keeps_aborting_stops_the_real_side(tmp_path: Path):
    opts = RunOptions(executor="sequential", sides=("real",), robot_options={"abort": True})
    summary = run(tmp_path, options=opts)
    # Row 1: a1 aborted, a2 aborted (its one retry); row 2: a1 aborted -> 3 in a row.
    attempts = sorted((e.pair_id, e.attempt) for e in stored(tmp_path))
    assert len(attempts) == 3 and [a for _, a in attempts].count(2) == 1
    assert "aborted 3 episodes in a row" in summary.real_stopped
    assert "protective stop latched" in summary.real_stopped
    assert not summary.complete  # re-running continues with the rows left


def test_a_backend_exception_is_an_error_with_traceback_and_is_retried(tmp_path: Path):
    opts = RunOptions(
        executor="sequential", sides=("real",), robot_options={"raise_on": "push/block_0"}
    )
    run(tmp_path, options=opts)
    errors = [e for e in stored(tmp_path) if e.status == "error"]
    assert errors and all(e.task_id == "push/block_0" and e.attempt == 1 for e in errors)
    assert "ConnectionError: bridge lost" in (tmp_path / errors[0].artifacts[0].path).read_text()
    retried = {e.pair_id for e in stored(tmp_path) if e.attempt == 2}
    assert retried == {e.pair_id for e in errors}


def test_a_robot_that_cannot_connect_leaves_the_sim_side_running(tmp_path: Path):
    opts = RunOptions(executor="sequential", robot_options={"fail_connect": True})
    summary = run(tmp_path, options=opts)
    assert "did not answer" in summary.real_error
    assert sum(e.side == "sim" for e in stored(tmp_path)) == 40
    assert not any(e.side == "real" for e in stored(tmp_path))


def test_a_stop_request_keeps_what_finished_and_the_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(support.SLEEP_ENV, "0.02")
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    first = run(tmp_path, options=RunOptions(executor="sequential", sides=("sim",)), stop=stop)
    timer.cancel()
    assert first.interrupted and 0 < first.written < 40
    second = run(tmp_path, options=RunOptions(executor="sequential", sides=("sim",)))
    assert first.written + second.written == 40
    ids = [e.episode_id for e in stored(tmp_path)]
    assert len(ids) == len(set(ids)) == 40 and all(i.endswith("-a1") for i in ids)


def test_a_gymnasium_environment_as_the_sim_side(tmp_path: Path):
    proto = tiny_protocol(drift={"nominal": {"day": 0}})  # 10 pairs, max_steps 20
    good = RunOptions(
        executor="sequential",
        sides=("sim",),
        policy=f"{HERE}:balance_policy",
        gym=GymSource("CartPole-v1", f"{HERE}:cartpole_quality"),
    )
    run(tmp_path / "good", proto, good)
    episodes = stored(tmp_path / "good")
    assert len(episodes) == 10 and all(e.engine == "gymnasium" for e in episodes)
    # The balancing policy keeps the pole up for all 20 steps: q = 20/20 = 1 >= q* = 0.5.
    assert all(e.control["steps"] == 20 and e.quality == 1.0 and e.success for e in episodes)

    rand = RunOptions(
        executor="sequential",
        sides=("sim",),
        policy="embodied_eval.runner.gym_side:random_policy",
        gym=GymSource("CartPole-v1", f"{HERE}:cartpole_quality"),
    )
    run(tmp_path / "rand", proto, rand)
    run(tmp_path / "rand2", proto, rand)
    first, second = stored(tmp_path / "rand"), stored(tmp_path / "rand2")
    for e in first:
        assert e.quality == e.control["steps"] / 20
        assert e.success == (e.control["steps"] >= 10)
    assert sorted(map(comparable, first), key=str) == sorted(map(comparable, second), key=str)
    assert any(e.quality < 1.0 for e in first)  # random pushes drop the pole within 20 steps


def test_progress_bars_per_side_and_family_on_a_terminal(tmp_path: Path):
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    run_trials(
        tiny_protocol(),
        RunOptions(executor="sequential", robot_options={"p": 1.0}),
        db_path=tmp_path / "store.db",
        out_dir=tmp_path / "out",
        console=console,
        show_progress=True,
    )
    text = buffer.getvalue()
    for bar in ("sim · mujoco", "sim · pybullet", "real · fake", "push"):
        assert bar in text
    assert "20/20" in text and "8/8" in text
