"""Executors: same results everywhere, crashes and timeouts recorded and retried, clean stops."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from embodied_eval.manifest import plan_manifest
from embodied_eval.records import EpisodeSpec
from embodied_eval.runner.executors import LocalPoolExecutor, SequentialExecutor, batch_size
from tests.test_runner_support import (
    SLEEP_ENV,
    crashing_episode,
    fake_episode,
    fake_quality,
    hanging_episode,
    raising_episode,
    tiny_protocol,
)

pytestmark = pytest.mark.timeout(120)


def nominal_mujoco_specs() -> list[EpisodeSpec]:
    """The 10 nominal-drift mujoco specs of the tiny protocol (5 instances x 2 seeds)."""
    m = plan_manifest(tiny_protocol())
    return [s for s in m.side("sim", ["mujoco"]) if s.drift_name == "nominal"]


def test_sequential_records_an_exception_and_retries_it_as_a_new_attempt():
    specs = nominal_mujoco_specs()
    out = list(SequentialExecutor().map_episodes(raising_episode, specs, max_retries=1))
    # 10 specs, one raises on attempt 1 -> 10 + 1 outcomes.
    assert len(out) == 11
    errors = [o.episode for o in out if o.episode.status == "error"]
    assert len(errors) == 1
    bad = errors[0]
    assert bad.task_id == "push/block_2" and bad.attempt == 1
    assert "RuntimeError" in bad.status_reason and "gripper model exploded" in bad.status_reason
    retry = next(
        o.episode for o in out if o.episode.pair_id == bad.pair_id and o.episode.attempt == 2
    )
    assert retry.status == "ok" and retry.seed == bad.seed
    assert retry.episode_id == bad.episode_id[: -len("a1")] + "a2"


def test_no_retries_left_means_one_attempt():
    out = list(SequentialExecutor().map_episodes(raising_episode, nominal_mujoco_specs(), 0))
    assert len(out) == 10
    assert sum(o.episode.status == "error" for o in out) == 1


def test_local_pool_gives_the_same_outcomes_as_sequential():
    specs = nominal_mujoco_specs()
    pool = list(LocalPoolExecutor(2).map_episodes(fake_episode, specs))
    assert sorted((o.episode.episode_id, o.episode.quality) for o in pool) == sorted(
        (s.episode_id, fake_quality(s)) for s in specs
    )
    assert not multiprocessing.active_children()


def test_a_worker_that_dies_mid_episode_is_recorded_and_retried():
    specs = nominal_mujoco_specs()
    out = list(LocalPoolExecutor(2).map_episodes(crashing_episode, specs, max_retries=1))
    ids = [o.episode.episode_id for o in out]
    assert len(ids) == len(set(ids)) == 11  # every spec once, plus the crashed one's retry
    crashed = [o.episode for o in out if o.episode.status == "error"]
    assert len(crashed) == 1
    assert crashed[0].task_id == "push/block_1" and crashed[0].attempt == 1
    assert "died" in crashed[0].status_reason
    retry = [
        o.episode for o in out if o.episode.pair_id == crashed[0].pair_id and o.episode.attempt == 2
    ]
    assert len(retry) == 1 and retry[0].status == "ok"
    assert retry[0].quality == fake_quality(
        next(s for s in specs if s.pair_id == crashed[0].pair_id)
    )
    assert {o.episode.pair_id for o in out} == {s.pair_id for s in specs}


def test_an_episode_past_its_time_limit_is_killed_recorded_and_retried():
    specs = nominal_mujoco_specs()
    out = list(
        LocalPoolExecutor(2).map_episodes(hanging_episode, specs, max_retries=1, timeout_s=1.0)
    )
    assert len(out) == 11
    hung = [o.episode for o in out if o.episode.status == "error"]
    assert len(hung) == 1 and hung[0].task_id == "push/block_3"
    assert "timed out after 1 s" in hung[0].status_reason
    assert hung[0].duration_s >= 1.0
    assert not multiprocessing.active_children()


def test_stop_abandons_episodes_in_flight_and_leaves_no_workers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(SLEEP_ENV, "0.3")
    stop = threading.Event()
    got = []
    for outcome in LocalPoolExecutor(2).map_episodes(
        fake_episode, nominal_mujoco_specs(), stop=stop
    ):
        got.append(outcome)
        stop.set()
    assert 1 <= len(got) < 10
    assert not multiprocessing.active_children()


def test_batch_size_targets_a_quarter_second_per_task():
    def size(durations: list[float], remaining: int) -> int:
        return batch_size(durations, remaining, 2, 0.25, 32)

    # No timings yet: one episode per task.
    assert size([], 100) == 1
    # 10 ms episodes: 0.25 / 0.01 = 25 per task; fair share ceil(100 / (2 * 2)) = 25.
    assert size([0.01] * 5, 100) == 25
    # Only 10 left: ceil(10 / 4) = 3 per task keeps both workers busy to the end.
    assert size([0.01] * 5, 10) == 3
    # 0.5 s episodes: int(0.25 / 0.5) = 0 -> at least 1.
    assert size([0.5], 100) == 1
    # 1 ms episodes: 250 by time and a fair share of ceil(1000 / 4) = 250, capped by max_batch.
    assert size([0.001], 1000) == 32


def test_ray_executor_without_ray_says_how_to_install_it():
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ray is installed")
    from embodied_eval.errors import EvalError
    from embodied_eval.runner.ray_executor import RayExecutor

    with pytest.raises(EvalError, match=r"embodied-eval\[ray\]"):
        list(RayExecutor(2).map_episodes(fake_episode, nominal_mujoco_specs()))
