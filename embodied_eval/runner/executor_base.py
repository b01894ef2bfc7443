"""What every executor shares: the episode function type, the Executor interface, retry rules,
batch sizing and the guard that turns an escaped exception into an `error` outcome.

The sequential and local-pool executors (`executors`) and the Ray executor (`ray_executor`) both
build on this module, so neither imports the other.
"""

from __future__ import annotations

import math
import statistics
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from embodied_eval.manifest import next_attempt
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.runner.outcomes import error_outcome

EpisodeFn = Callable[[EpisodeSpec], EpisodeOutcome]

#: Thread-count variables set to 1 in worker processes: parallelism comes from the workers, and
#: BLAS/OpenMP threads in each of them would oversubscribe the cores.
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class Executor(Protocol):
    """Runs episodes and yields their outcomes in completion order."""

    name: str

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
        """Run `fn(spec)` for every spec (and retries); yield each outcome as it finishes.

        Args:
            fn: runs one episode and returns its outcome (picklable for process executors).
            specs: the manifest rows to run.
            max_retries: retries per manifest row; attempt a is retried while a <= max_retries.
            timeout_s: wall-clock limit per episode, s (None: no limit).
            retry_on: statuses that trigger a retry.
            stop: when set, stop starting episodes, abandon those in flight (they were not
                recorded and will be re-run on resume) and return.
        """
        ...


def retry_spec(
    spec: EpisodeSpec, outcome: EpisodeOutcome, max_retries: int, retry_on: Sequence[str]
) -> EpisodeSpec | None:
    """The next attempt of `spec` when `outcome` calls for a retry and retries are left."""
    if outcome.episode.status in retry_on and spec.attempt <= max_retries:
        return next_attempt(spec)
    return None


def batch_size(
    durations: Sequence[float], remaining: int, workers: int, target_s: float, max_batch: int
) -> int:
    """Episodes per task for a process or Ray pool: about `target_s` seconds of work each.

    Args:
        durations: wall seconds of the episodes finished so far (the last 64 are used).
        remaining: episodes still waiting to be submitted.
        workers: tasks that run at once.
        target_s: wall seconds of episodes one task should carry.
        max_batch: most episodes per task.

    Returns:
        The batch size, at least 1 (exactly 1 before any episode has finished).
    """
    if not durations:
        return 1
    typical = statistics.median(durations[-64:])
    by_time = int(target_s / max(typical, 1e-6))
    # Keep at least two batches per worker so the last ones do not leave a core idle.
    fair = math.ceil(remaining / (2 * workers))
    return max(1, min(max_batch, by_time, fair))


def call_safely(fn: EpisodeFn, spec: EpisodeSpec) -> EpisodeOutcome:
    """`fn(spec)`, with an exception escaping `fn` turned into an `error` outcome."""
    try:
        return fn(spec)
    except Exception as exc:
        last = traceback.format_exc().strip().splitlines()[-1]
        return error_outcome(spec, f"{type(exc).__name__} escaped the episode function: {last}")
