"""The real side: episodes one at a time through the robot backend, with anytime stopping.

`RealSide.run` connects the backend, runs the due real specs in manifest order (retrying
error/aborted attempts), feeds each scored outcome to the sequential test and stops when it
decides. When an episode was aborted because the robot was lost, it waits for the robot to come
back (the backend's `wait_for_robot`, with its deadline) and re-runs the row as a new attempt that
does not use the policy's retries; if the robot does not come back, or the robot aborts
MAX_CONSECUTIVE_ABORTS episodes in a row, the real side halts (the run exits non-zero). It runs in
its own thread when the sim side runs at the same time, so the robot never waits for sims.

`Recorder` writes outcomes from both sides as they arrive (one transaction each, idempotent by
episode id) and advances the progress bars.
"""

from __future__ import annotations

import functools
import threading
import traceback
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from embodied_eval.live_channel import POLICY_SERVER, ROBOT_LOST, LiveState
from embodied_eval.manifest import RETRY_ON, next_attempt, robot_side_abort
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec
from embodied_eval.runner.backend import RobotBackend, backend_safety_settings, open_backend
from embodied_eval.runner.executors import call_safely
from embodied_eval.runner.live import publish_outcome
from embodied_eval.runner.options import RunOptions, RunSettings
from embodied_eval.runner.outcomes import Stopwatch, artifact_dir, checked_outcome, error_outcome
from embodied_eval.runner.progress import RunProgress
from embodied_eval.runner.stopping import RealSideStopping, StopDecision
from embodied_eval.store.core import Store, transaction
from embodied_eval.store.safety_settings import note_safety_settings

#: The real side stops after this many aborted episodes in a row: the robot needs a person.
MAX_CONSECUTIVE_ABORTS = 3


class Recorder:
    """Writes outcomes as they arrive and keeps the counts; shared by the sim and real loops."""

    def __init__(
        self, max_retries: int, progress: RunProgress, live: LiveState | None = None
    ) -> None:
        self.max_retries = max_retries
        self.progress = progress
        self.live = live
        self.lock = threading.Lock()
        self.written = 0
        self.settled = 0
        self.failed = 0
        self.first_error = ""

    def record(self, store: Store, outcome: EpisodeOutcome) -> bool:
        """Store one outcome; returns True when it settles its manifest row."""
        ep = outcome.episode
        store.write_episode(ep, [ev.to_dict() for ev in outcome.safety_events])
        settles = (
            ep.scored
            or ep.status not in RETRY_ON
            or (not robot_side_abort(ep) and ep.attempt > self.max_retries)
        )
        with self.lock:
            self.written += 1
            if settles:
                self.settled += 1
            if settles and ep.status == "error":
                self.failed += 1
                if not self.first_error:
                    self.first_error = f"{ep.episode_id}: {ep.status_reason}"
        if settles:
            self.progress.advance(ep)
        if self.live is not None:
            publish_outcome(self.live, outcome, settles)
        return settles


def real_episode(
    backend: RobotBackend, protocol: Protocol, out_dir: Path, spec: EpisodeSpec
) -> EpisodeOutcome:
    """One real episode through the backend; an exception becomes an `error` outcome."""
    watch = Stopwatch()
    record_dir = artifact_dir(out_dir, spec.episode_id)
    try:
        record_dir.mkdir(parents=True, exist_ok=True)
        return checked_outcome(spec, backend.run_episode(spec, protocol, record_dir))
    except Exception as exc:
        return error_outcome(
            spec,
            f"{type(exc).__name__}: {exc}",
            traceback_text=traceback.format_exc(),
            out_dir=out_dir,
            started_at=watch.started_at,
            duration_s=watch.elapsed_s,
        )


class RealSide:
    """The real side's loop: one episode at a time, anytime stopping, abort streaks."""

    def __init__(
        self,
        protocol: Protocol,
        settings: RunSettings,
        options: RunOptions,
        specs: Sequence[EpisodeSpec],
        stopper: RealSideStopping | None,
        db_path: Path,
        out_dir: Path,
        recorder: Recorder,
        stop: threading.Event,
    ) -> None:
        self.protocol = protocol
        self.settings = settings
        self.options = options
        self.specs = specs
        self.stopper = stopper
        self.db_path = db_path
        self.out_dir = out_dir
        self.recorder = recorder
        self.stop = stop
        self.decision: StopDecision | None = None
        self.stopped_because = ""
        self.halted = False
        self.error: BaseException | None = None
        #: The run's live state: the backend publishes into it and obeys its operator stop.
        self.live: LiveState | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def _run(self) -> None:
        backend = open_backend(
            self.settings.real_backend, self.protocol, self.options.robot_options
        )
        backend.attach_live(self.live)
        backend.connect()
        try:
            fn = functools.partial(real_episode, backend, self.protocol, self.out_dir)
            with Store(self.db_path) as store:
                settings = backend_safety_settings(backend)
                if settings is not None:  # on record before the first episode runs with them
                    with transaction(store.conn):
                        note_safety_settings(store.conn, self.protocol.robot_id, settings)
                self._loop(store, fn, backend)
        finally:
            backend.disconnect()

    def _loop(self, store: Store, fn: functools.partial[EpisodeOutcome], backend: object) -> None:
        queue = deque(self.specs)
        pairs = {spec.pair_id for spec in self.specs}
        policy_tries: dict[tuple[str, str, str], int] = {}
        for stored in store.episodes(side="real"):  # attempts of earlier runs (resume)
            if stored.pair_id in pairs and not robot_side_abort(stored):
                slot = (stored.pair_id, stored.side, stored.engine)
                policy_tries[slot] = policy_tries.get(slot, 0) + 1
        aborts = 0
        while queue and not self.stop.is_set():
            if self.live is not None:
                self.live.wait_while_paused(self.stop)
                if self.stop.is_set():
                    return
            spec = queue.popleft()
            outcome = call_safely(fn, spec)
            self.recorder.record(store, outcome)
            ep = outcome.episode
            slot = (spec.pair_id, spec.side, spec.engine)
            if robot_side_abort(ep):
                aborts += 1
                if aborts >= MAX_CONSECUTIVE_ABORTS:
                    self._halt(
                        f"the robot aborted {aborts} episodes in a row (last: "
                        f"{ep.status_reason}); check the robot, then re-run the same command "
                        "to continue",
                        halted=True,
                    )
                    return
                wait = getattr(backend, "wait_for_robot", None)
                if ep.control.get("abort_cause") == ROBOT_LOST:
                    self.recorder.progress.log(
                        f"robot lost during {ep.episode_id} ({ep.status_reason}); waiting for it"
                    )
                    if wait is None or not wait():
                        self._halt(
                            f"the robot did not come back after it was lost during "
                            f"{ep.episode_id} ({ep.status_reason}); check the robot, then re-run "
                            "the same command to continue",
                            halted=True,
                        )
                        return
                queue.appendleft(next_attempt(spec))  # a robot-side abort uses no retry
                continue
            tries = policy_tries.get(slot, 0) + 1
            policy_tries[slot] = tries
            aborts = aborts + 1 if ep.status == "aborted" else 0
            if aborts >= MAX_CONSECUTIVE_ABORTS:
                server = ep.control.get("abort_cause") == POLICY_SERVER
                self._halt(
                    f"the real side aborted {aborts} episodes in a row (last: "
                    f"{ep.status_reason or 'no reason given'}); check "
                    f"{'the policy server' if server else 'the robot'}, then re-run the same "
                    "command to continue",
                    halted=True,
                )
                return
            if ep.status in RETRY_ON and not ep.scored and tries <= self.options.max_retries:
                queue.appendleft(next_attempt(spec))
            if self.stopper is not None and ep.scored:
                self.decision = self.stopper.observe(ep.success)
                if self.live is not None:
                    self.live.publish("stopping", self.decision.to_json())
                if self.decision.decision != "continue":
                    self._halt(f"anytime stopping: {self.decision.reason}")
                    return

    def _halt(self, reason: str, *, halted: bool = False) -> None:
        self.stopped_because = reason
        self.halted = halted
        self.recorder.progress.stop_side("real", self.settings.real_engine, "stopped")
        self.recorder.progress.log(f"[bold]real side stopped[/]: {reason}")
        self.stop.set()
