"""The Ray executor (optional extra `embodied-eval[ray]`): episodes as Ray tasks on a cluster.

Ray is imported only when this executor runs. `ray.init(address=... or "local", num_cpus=...,
include_dashboard=False)` starts a local cluster or joins one; a cluster this executor started is
shut down with `ray.shutdown()` at the end (never `ray stop`, which kills Ray processes
machine-wide). On a multi-node cluster, pass `working_dir` so workers get the code
(`runtime_env={"working_dir": ...}`), or install embodied-eval on every node.

Tasks run with Ray's own retries off (`max_retries=0`): a crashed worker is reported to us
(`WorkerCrashedError`) so the crashed attempt is *recorded* as an `error` episode and retried as a
new attempt, the same rules as every executor. Short episodes are batched; a batch whose worker
crashes is re-run one episode per task so the crash can be pinned on one episode. A batch past
its time limit is cancelled with `ray.cancel(force=True)`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.runner.executor_base import (
    THREAD_ENV,
    EpisodeFn,
    batch_size,
    call_safely,
    retry_spec,
)
from embodied_eval.runner.outcomes import error_outcome


def import_ray() -> Any:
    """Import ray, or raise EvalError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise EvalError(
            "the ray executor needs Ray: pip install 'embodied-eval[ray]' (or use --executor local)",
            key="executor",
        ) from None
    return ray


def run_batch_plain(
    fn: EpisodeFn, specs: Sequence[EpisodeSpec]
) -> list[tuple[EpisodeOutcome, float]]:
    """Run a batch of episodes in a Ray worker; returns (outcome, wall seconds) per spec."""
    out = []
    for spec in specs:
        t0 = time.monotonic()
        out.append((call_safely(fn, spec), time.monotonic() - t0))
    return out


class RayExecutor:
    """Episodes as Ray tasks, one CPU each, at most `workers` in flight.

    Args:
        workers: CPUs for a local cluster and the number of tasks in flight (default: 2).
        address: a cluster address ("ray://host:10001", "auto"); None starts a local cluster.
        working_dir: shipped to the workers of a remote cluster (runtime_env working_dir).
        object_store_memory: bytes for a local cluster's object store (None: Ray's default).
        batch_target_s / max_batch: batching of short episodes, as in LocalPoolExecutor.
    """

    name = "ray"

    def __init__(
        self,
        workers: int | None = None,
        *,
        address: str | None = None,
        working_dir: str | None = None,
        object_store_memory: int | None = None,
        batch_target_s: float = 0.25,
        max_batch: int = 32,
        poll_s: float = 0.05,
    ) -> None:
        self.workers = max(1, workers or 2)
        self.address = address
        self.working_dir = working_dir
        self.object_store_memory = object_store_memory
        self.batch_target_s = batch_target_s
        self.max_batch = max_batch
        self.poll_s = poll_s

    def _init(self, ray: Any) -> bool:
        """Start or join a cluster unless one is up; True when this call started it."""
        if ray.is_initialized():
            return False
        runtime_env: dict[str, Any] = {"env_vars": {name: "1" for name in THREAD_ENV}}
        if self.working_dir:
            runtime_env["working_dir"] = self.working_dir
        kwargs: dict[str, Any] = {
            "address": self.address or "local",
            "include_dashboard": False,
            "runtime_env": runtime_env,
        }
        if not self.address or self.address == "local":
            kwargs["num_cpus"] = self.workers
            if self.object_store_memory:
                kwargs["object_store_memory"] = self.object_store_memory
        ray.init(**kwargs)
        return True

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
        ray = import_ray()
        started_here = self._init(ray)
        task = ray.remote(run_batch_plain).options(
            num_cpus=1, max_retries=0, retry_exceptions=False
        )
        solo: set[str] = set()  # episode ids to run alone (their batch lost a worker)
        durations: list[float] = []
        in_flight: dict[Any, tuple[list[EpisodeSpec], float]] = {}
        try:
            while pending or in_flight:
                if stop is not None and stop.is_set():
                    return
                while pending and len(in_flight) < self.workers:
                    if pending[0].episode_id in solo:
                        batch = [pending.popleft()]
                    else:
                        size = batch_size(
                            durations,
                            len(pending),
                            self.workers,
                            self.batch_target_s,
                            self.max_batch,
                        )
                        batch = []
                        while pending and len(batch) < size and pending[0].episode_id not in solo:
                            batch.append(pending.popleft())
                    in_flight[task.remote(fn, batch)] = (batch, time.monotonic())
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=self.poll_s)
                for ref in ready:
                    batch, _submitted = in_flight.pop(ref)
                    try:
                        results = ray.get(ref)
                    except ray.exceptions.RayTaskError:
                        raise
                    except ray.exceptions.RayError as exc:
                        yield from self._lost(
                            batch,
                            f"{type(exc).__name__}: {exc}",
                            pending,
                            solo,
                            max_retries,
                            retry_on,
                        )
                        continue
                    for spec, (outcome, seconds) in zip(batch, results, strict=True):
                        durations.append(seconds)
                        yield outcome
                        retry = retry_spec(spec, outcome, max_retries, retry_on)
                        if retry is not None:
                            pending.appendleft(retry)
                if timeout_s is not None:
                    now = time.monotonic()
                    for ref, (batch, submitted) in list(in_flight.items()):
                        if now - submitted > timeout_s * len(batch):
                            ray.cancel(ref, force=True)
                            del in_flight[ref]
                            yield from self._lost(
                                batch,
                                f"timed out after {timeout_s:g} s (task cancelled)",
                                pending,
                                solo,
                                max_retries,
                                retry_on,
                            )
        finally:
            for ref in in_flight:
                # The task may have finished meanwhile.
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()

    @staticmethod
    def _lost(
        batch: list[EpisodeSpec],
        reason: str,
        pending: deque[EpisodeSpec],
        solo: set[str],
        max_retries: int,
        retry_on: Sequence[str],
    ) -> Iterator[EpisodeOutcome]:
        """A task died: blame its episode when it ran alone, else re-run the batch one by one."""
        if len(batch) > 1:
            solo.update(spec.episode_id for spec in batch)
            pending.extendleft(reversed(batch))
            return
        spec = batch[0]
        outcome = error_outcome(spec, reason)
        yield outcome
        retry = retry_spec(spec, outcome, max_retries, retry_on)
        if retry is not None:
            pending.appendleft(retry)
