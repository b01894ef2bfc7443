"""Executors: run many episodes, yield each outcome as it finishes, retry failed attempts.

One small interface, `map_episodes(fn, specs, max_retries, timeout_s)`, with three
implementations: `SequentialExecutor` (in process), `LocalPoolExecutor` (a spawn process pool on
this machine, the default) and `RayExecutor` (a Ray cluster; `embodied_eval.runner.ray_executor`).

Retry rules, the same everywhere: an outcome whose status is in `retry_on` (default: `error`) is
yielded like any other (it is a record) and, while `attempt <= max_retries`, its spec is run again
as the next attempt (new episode id, same seed). A worker that dies mid-episode or an episode that
runs past `timeout_s` yields an `error` outcome for that attempt and is retried the same way.
Episodes that were merely in flight beside a crash are re-run under the same attempt: they were
never recorded, and their seed makes the re-run the same episode.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.runner.executor_base import (
    THREAD_ENV,
    EpisodeFn,
    Executor,
    batch_size,
    call_safely,
    retry_spec,
)
from embodied_eval.runner.outcomes import error_outcome

#: Marker folders are "<tmp>/embodied-eval-workers-<runner pid>-<random>".
MARKER_PREFIX = "embodied-eval-workers-"

#: A pool that breaks this many times in a row with no episode to blame is given up on.
MAX_UNATTRIBUTED_BREAKS = 3


class SequentialExecutor:
    """Runs episodes one after another in this process.

    For debugging and for the real side. `timeout_s` cannot be enforced in process and is ignored;
    a crash of the process stops the run (resume picks it up).
    """

    name = "sequential"

    def map_episodes(
        self,
        fn: EpisodeFn,
        specs: Iterable[EpisodeSpec],
        max_retries: int = 1,
        timeout_s: float | None = None,
        *,
        retry_on: Sequence[str] = ("error",),
        stop: threading.Event | None = None,
    ) -> Iterator[EpisodeOutcome]:
        queue = deque(specs)
        while queue:
            if stop is not None and stop.is_set():
                return
            spec = queue.popleft()
            outcome = call_safely(fn, spec)
            yield outcome
            retry = retry_spec(spec, outcome, max_retries, retry_on)
            if retry is not None:
                queue.appendleft(retry)


# --------------------------------------------------------------------------- worker side

_MARKER_DIR: str | None = None


def _marker_path() -> Path | None:
    return None if _MARKER_DIR is None else Path(_MARKER_DIR) / f"{os.getpid()}.json"


def _write_marker(episode_id: str) -> None:
    """Say which episode this worker is running (and since when) before running it.

    If the worker dies, the marker it leaves names the episode to blame; a worker the pool
    terminates on purpose removes its marker first (`_on_sigterm`).
    """
    path = _marker_path()
    if path is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"episode_id": episode_id, "started": time.time()}))
    os.replace(tmp, path)


def _clear_marker() -> None:
    path = _marker_path()
    if path is not None:
        path.unlink(missing_ok=True)


def _on_sigterm(signum: int, _frame: Any) -> None:
    _clear_marker()
    os._exit(128 + signum)


def _exit_with_parent(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def _worker_init(marker_dir: str) -> None:
    """Set up a pool worker: markers, one BLAS thread, stdout to stderr, ignore Ctrl-C, die with
    the parent."""
    global _MARKER_DIR
    _MARKER_DIR = marker_dir
    for name in THREAD_ENV:
        os.environ[name] = "1"
    # Anything a worker prints (simulator banners, policy debugging) goes to stderr: stdout is
    # the runner's, e.g. for `--json`.
    sys.stdout.flush()
    os.dup2(2, 1)
    # The parent owns Ctrl-C: it stops the run and decides what to abandon.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    parent = multiprocessing.parent_process()
    if parent is not None:
        # A runner killed with SIGKILL must not leave workers running episodes nobody records.
        threading.Thread(target=_exit_with_parent, args=(parent.sentinel,), daemon=True).start()


def _run_batch(fn: EpisodeFn, specs: Sequence[EpisodeSpec]) -> list[tuple[EpisodeOutcome, float]]:
    """Run a batch of episodes in a worker; returns (outcome, wall seconds) per spec."""
    results = []
    for spec in specs:
        _write_marker(spec.episode_id)
        t0 = time.monotonic()
        outcome = call_safely(fn, spec)
        results.append((outcome, time.monotonic() - t0))
    _clear_marker()
    return results


# --------------------------------------------------------------------------- parent side


def _read_markers(marker_dir: Path) -> dict[str, tuple[int, float]]:
    """episode_id -> (worker pid, start time) for every episode a worker says it is running."""
    out: dict[str, tuple[int, float]] = {}
    for path in marker_dir.glob("*.json"):
        try:
            data = json.loads(path.read_text())
            out[str(data["episode_id"])] = (int(path.stem), float(data["started"]))
        except (OSError, ValueError, KeyError):
            continue  # being rewritten right now; seen on the next poll
    return out


def _remove_stale_marker_dirs() -> None:
    """Delete marker folders left by runners that were killed (their pid no longer exists)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{MARKER_PREFIX}*-*"):
        pid_text = folder.name[len(MARKER_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # alive, someone else's
            continue


class _ThreadEnv:
    """Sets THREAD_ENV to 1 while a pool lives (spawned workers copy the environment)."""

    def __enter__(self) -> None:
        self.saved = {name: os.environ.get(name) for name in THREAD_ENV}
        for name in THREAD_ENV:
            os.environ[name] = "1"

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class LocalPoolExecutor:
    """A process pool on this machine (spawn start method, OMP_NUM_THREADS=1 in workers).

    Short episodes are batched: once a few episodes have finished, each task carries about
    `batch_target_s` seconds of episodes (at most `max_batch`), since per-task overhead would
    otherwise eat the speed-up. A worker that dies breaks the whole pool (BrokenProcessPool): the
    pool is rebuilt, the episode the dead worker was running is recorded as an `error` attempt and
    retried, and every other unfinished episode is resubmitted under its own attempt.
    """

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        *,
        batch_target_s: float = 0.25,
        max_batch: int = 32,
        poll_s: float = 0.05,
    ) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.batch_target_s = batch_target_s
        self.max_batch = max(1, max_batch)
        self.poll_s = poll_s

    def _new_pool(self, marker_dir: Path) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
            initargs=(str(marker_dir),),
        )

    def map_episodes(
        self,
        fn: EpisodeFn,
        specs: Iterable[EpisodeSpec],
        max_retries: int = 1,
        timeout_s: float | None = None,
        *,
        retry_on: Sequence[str] = ("error",),
        stop: threading.Event | None = None,
    ) -> Iterator[EpisodeOutcome]:
        pending: deque[EpisodeSpec] = deque(specs)
        if not pending:
            return
        _remove_stale_marker_dirs()
        marker_dir = Path(tempfile.mkdtemp(prefix=f"{MARKER_PREFIX}{os.getpid()}-"))
        durations: list[float] = []
        in_flight: dict[Future[list[tuple[EpisodeOutcome, float]]], list[EpisodeSpec]] = {}
        timed_out: dict[int, str] = {}
        unattributed = 0
        env = _ThreadEnv()
        env.__enter__()
        pool = self._new_pool(marker_dir)
        finished = False
        last_scan = 0.0
        try:
            while pending or in_flight:
                if stop is not None and stop.is_set():
                    return
                broken = False
                while pending and len(in_flight) < 2 * self.workers:
                    size = batch_size(
                        durations, len(pending), self.workers, self.batch_target_s, self.max_batch
                    )
                    batch = [pending.popleft() for _ in range(min(size, len(pending)))]
                    try:
                        in_flight[pool.submit(_run_batch, fn, batch)] = batch
                    except BrokenProcessPool:  # a worker died since the last look
                        pending.extendleft(reversed(batch))
                        broken = True
                        break
                done: set[Future[list[tuple[EpisodeOutcome, float]]]] = set()
                if not broken:
                    done, _ = wait(
                        list(in_flight), timeout=self.poll_s, return_when=FIRST_COMPLETED
                    )
                for future in done:
                    if future.exception() is not None:
                        if isinstance(future.exception(), BrokenProcessPool):
                            broken = True
                            continue
                        raise future.exception()  # type: ignore[misc]
                    batch = in_flight.pop(future)
                    for spec, (outcome, seconds) in zip(batch, future.result(), strict=True):
                        durations.append(seconds)
                        yield outcome
                        retry = retry_spec(spec, outcome, max_retries, retry_on)
                        if retry is not None:
                            pending.appendleft(retry)
                if broken:
                    pool.shutdown(wait=True)  # every old worker has exited: markers are final
                    blamed = yield from self._recover(
                        in_flight, pending, marker_dir, timed_out, max_retries, retry_on
                    )
                    unattributed = 0 if blamed else unattributed + 1
                    if unattributed >= MAX_UNATTRIBUTED_BREAKS:
                        raise EvalError(
                            f"the local worker pool broke {unattributed} times without an episode "
                            "to blame: workers die while starting (a script that starts the "
                            "runner needs an `if __name__ == '__main__':` guard) or run out of "
                            "memory; rerun with --executor sequential to see the cause",
                            key="executor",
                        )
                    pool = self._new_pool(marker_dir)
                    continue
                now = time.monotonic()
                if timeout_s is not None and now - last_scan >= 0.5:
                    last_scan = now
                    self._kill_overdue(pool, marker_dir, timeout_s, timed_out)
            finished = True
        finally:
            if finished:
                pool.shutdown(wait=True)
            else:
                _kill_pool(pool)
            env.__exit__()
            shutil.rmtree(marker_dir, ignore_errors=True)

    def _kill_overdue(
        self,
        pool: ProcessPoolExecutor,
        marker_dir: Path,
        timeout_s: float,
        timed_out: dict[int, str],
    ) -> None:
        """SIGKILL a worker whose episode has run past `timeout_s` (the pool then breaks)."""
        ours = {p.pid for p in (getattr(pool, "_processes", None) or {}).values()}
        for _episode_id, (pid, started) in _read_markers(marker_dir).items():
            if pid in ours and pid not in timed_out and time.time() - started > timeout_s:
                timed_out[pid] = f"timed out after {timeout_s:g} s (worker killed)"
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _recover(
        self,
        in_flight: dict[Future[list[tuple[EpisodeOutcome, float]]], list[EpisodeSpec]],
        pending: deque[EpisodeSpec],
        marker_dir: Path,
        timed_out: dict[int, str],
        max_retries: int,
        retry_on: Sequence[str],
    ) -> Generator[EpisodeOutcome, None, bool]:
        """After a break: yield finished results, blame the dead worker's episode, requeue the rest.

        Returns (as the generator's value) whether an episode could be blamed.
        """
        markers = _read_markers(marker_dir)
        blamed = False
        requeue: list[EpisodeSpec] = []
        for future, batch in list(in_flight.items()):
            del in_flight[future]
            if future.done() and future.exception() is None:
                for spec, (outcome, _seconds) in zip(batch, future.result(), strict=True):
                    yield outcome
                    retry = retry_spec(spec, outcome, max_retries, retry_on)
                    if retry is not None:
                        requeue.append(retry)
                continue
            for spec in batch:
                if spec.episode_id not in markers:
                    requeue.append(spec)
                    continue
                blamed = True
                pid, started = markers[spec.episode_id]
                reason = timed_out.get(
                    pid, "the worker process running this episode died (crash, os._exit or kill)"
                )
                outcome = error_outcome(spec, reason, duration_s=max(0.0, time.time() - started))
                yield outcome
                retry = retry_spec(spec, outcome, max_retries, retry_on)
                if retry is not None:
                    requeue.append(retry)
        pending.extendleft(reversed(requeue))
        for path in marker_dir.iterdir():
            path.unlink(missing_ok=True)
        timed_out.clear()
        return blamed


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what has not started, kill workers mid-episode, reap them."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=10)


def make_executor(
    name: str,
    workers: int | None = None,
    *,
    ray_address: str | None = None,
    ray_working_dir: str | None = None,
) -> Executor:
    """The executor called `name`: "sequential", "local" or "ray"."""
    if name == "sequential":
        return SequentialExecutor()
    if name == "local":
        return LocalPoolExecutor(workers)
    if name == "ray":
        from embodied_eval.runner.ray_executor import RayExecutor

        return RayExecutor(workers, address=ray_address, working_dir=ray_working_dir)
    raise EvalError(f"executor {name!r} is not one of sequential, local, ray", key="executor")


__all__ = [
    "THREAD_ENV",
    "EpisodeFn",
    "Executor",
    "LocalPoolExecutor",
    "SequentialExecutor",
    "batch_size",
    "make_executor",
    "retry_spec",
]
