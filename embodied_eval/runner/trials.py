"""Running a protocol's paired trials: plan, escrow the manifest, run, record, resume, stop.

`run_trials` is what `embodied-eval run` calls:

1. Draw the manifest from the protocol (`plan.plan_manifest`) and escrow it before anything runs:
   an atomically written JSON file in the output folder and a row in the store's manifests.
2. Read the store to see which manifest rows are settled (`summary.settle`); run the rest.
3. Sim episodes fan out over the executor; real episodes run one at a time through the robot
   backend, in a thread of their own when both sides run, so the robot never waits for sims.
4. Every outcome is written as soon as it arrives, in one transaction with its faults and safety
   events (`Store.write_episode`, idempotent by episode id). A SIGKILL at any point therefore
   loses only episodes in flight, which the next run replays from their seeds.
5. With `[stopping]` enabled, each counted real outcome updates the sequential test; the real side
   stops when it decides.
6. Safety events go to the incident log (when installed); the summary is written to the output
   folder and the store.

Ctrl-C once: stop starting episodes, abandon sims in flight (they were not recorded), let the real
episode in progress finish and be recorded, write the summary. Ctrl-C twice: leave at once.

With a `LiveState` (`embodied-eval run --console-port N`), the run publishes what it records and
obeys its console (`embodied_eval.runner.live`): a stop acts as Ctrl-C and also ends the real
episode in progress at once with the safe-stop hold (`aborted`, cause `operator_stop`) on a
backend that obeys it through `RobotBackend.attach_live`; a pause holds both sides before their next episode.
"""

from __future__ import annotations

import functools
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.manifest import (
    RETRY_ON,
    Manifest,
    Slot,
    plan_manifest,
    settle,
    spec_for_attempt,
    spec_slot,
    stored_attempts,
    write_manifest_file,
)
from embodied_eval.plugins import INCIDENT_LOG, resolve
from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import Episode, EpisodeSpec, utc_now_iso
from embodied_eval.runner.executors import make_executor
from embodied_eval.runner.live import attach
from embodied_eval.runner.options import (
    RunOptions,
    RunSettings,
    check_importable,
    plan_for,
    run_settings,
)
from embodied_eval.runner.progress import RunProgress
from embodied_eval.runner.real_side import RealSide, Recorder
from embodied_eval.runner.stopping import RealSideStopping, StopDecision
from embodied_eval.runner.summary import (
    RunSummary,
    persist_summary,
    progress_rows,
    retries_spent,
)
from embodied_eval.runner.work import GYM_ENGINE, GymSource, SimContext, run_sim_episode
from embodied_eval.store.core import Store

__all__ = ["RunOptions", "plan_for", "run_trials"]


@contextmanager
def _ctrl_c(
    stop: threading.Event, real_stop: threading.Event, log: Callable[[str], None]
) -> Iterator[None]:
    """First Ctrl-C: stop cleanly (sets both events). Second: KeyboardInterrupt as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(_signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        real_stop.set()
        log(
            "[yellow]stopping[/]: sims in flight are abandoned (re-run on resume); the real "
            "episode in progress finishes and is recorded. Ctrl-C again to leave now."
        )

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ingest_safety_events(db_path: Path, protocol: Protocol, episode_ids: Sequence[str]) -> str:
    """Have the incident log classify the stored safety events; returns a note for the summary.

    The incident log turns events into automatic incidents with the protocol's thresholds,
    idempotently (keyed by episode id and event ordinal). When it is not installed the events
    stay in the store (table safety_events) and can be ingested later.

    Args:
        db_path: the store.
        protocol: the protocol whose thresholds classify the events.
        episode_ids: episodes of this manifest that carry safety events (for the note).
    """
    if not episode_ids:
        return "no safety events"
    try:
        ingest = resolve(INCIDENT_LOG["ingest_safety_events"])
    except EvalError:
        return (
            f"{len(episode_ids)} episode(s) with safety events kept in the store; the incident "
            "log is not installed, ingest them later"
        )
    new = ingest(db_path, protocol)
    return (
        f"{len(episode_ids)} episode(s) with safety events; the incident log recorded {new} new "
        "automatic incident(s)"
    )


def replay_stopping(
    protocol: Protocol,
    manifest: Manifest,
    attempts: Mapping[Slot, Sequence[Episode]],
    max_retries: int,
) -> tuple[RealSideStopping | None, StopDecision | None]:
    """Feed the stored real outcomes, in run order, to a fresh sequential test."""
    if not protocol.stopping.enabled:
        return None, None
    stopper = RealSideStopping(protocol.stopping, protocol.confidence)
    decision = None
    for spec in manifest.side("real"):
        final, _ = settle(attempts.get(spec_slot(spec), []), max_retries)
        if final is not None and final.scored:
            decision = stopper.observe(final.success)
            if decision.decision != "continue":
                break
    return stopper, decision


def _due(
    specs: Sequence[EpisodeSpec], attempts: Mapping[Slot, Sequence[Episode]], max_retries: int
) -> list[EpisodeSpec]:
    """The specs (at their next attempt number) of the slots that are not settled, in order."""
    out = []
    for spec in specs:
        final, attempt = settle(attempts.get(spec_slot(spec), []), max_retries)
        if final is None and attempt is not None:
            out.append(spec if attempt == spec.attempt else spec_for_attempt(spec, attempt))
    return out


def run_trials(
    protocol: Protocol,
    options: RunOptions,
    *,
    db_path: str | Path,
    out_dir: str | Path,
    console: Console | None = None,
    show_progress: bool = True,
    stop: threading.Event | None = None,
    live: LiveState | None = None,
) -> RunSummary:
    """Run (or resume) the paired trials of `protocol`; returns the run summary.

    Args:
        protocol: the validated protocol.
        options: `RunOptions`.
        db_path: the SQLite store.
        out_dir: folder for the manifest, summary and artifacts.
        console: where bars and messages go (default: stdout).
        show_progress: draw progress bars (only on a terminal).
        stop: set it to stop the run cleanly from another thread (Ctrl-C does the same).
        live: the run's live state, for its console (progress, the real episode, stop/pause).

    Returns:
        The `RunSummary` (also written to `<out_dir>/summary-<manifest12>.json` and the store).
    """
    console = console or Console()
    settings = run_settings(protocol, options)
    if not options.dry_run:
        check_importable(settings, options)
    manifest = plan_manifest(
        protocol,
        engines=settings.engines,
        sim_policy=settings.sim_policy,
        real_policy=settings.real_policy,
        real_engine=settings.real_engine,
        sim_source=settings.sim_source,
        sim_task=settings.sim_task,
    )
    out = Path(out_dir)
    db = Path(db_path)
    manifest_path = write_manifest_file(manifest, out)
    summary = RunSummary(
        run_id=f"{utc_now_iso()}-{uuid.uuid4().hex[:8]}",
        protocol=protocol.name,
        protocol_hash=protocol.protocol_hash,
        window=protocol.window_id,
        manifest_hash=manifest.manifest_hash,
        manifest_path=str(manifest_path),
        out_dir=str(out),
        db_path=str(db),
        sides=list(options.sides),
        sim_engines=list(settings.engines),
        executor=options.executor,
        started_at=utc_now_iso(),
        dry_run=options.dry_run,
    )
    with Store(db) as store:
        store.write_manifest(
            manifest.manifest_hash, protocol.protocol_hash, protocol.window_id, manifest.to_dict()
        )
        attempts = stored_attempts(store, manifest)

    stopper, decision = (None, None)
    if "real" in options.sides:
        stopper, decision = replay_stopping(protocol, manifest, attempts, options.max_retries)
    sim_due = _due(manifest.side("sim"), attempts, options.max_retries)
    real_due = _due(manifest.side("real"), attempts, options.max_retries)
    if "sim" not in options.sides:
        sim_due = []
    if "real" not in options.sides:
        real_due = []
    if decision is not None and decision.decision != "continue":
        summary.real_stopped = f"anytime stopping (decided earlier): {decision.reason}"
        real_due = []

    if not options.dry_run:
        stop = stop or threading.Event()
        real_stop = threading.Event()
        real_side = None
        if live is not None:
            info = {k: getattr(summary, k) for k in ("run_id", "protocol", "protocol_hash")}
            info.update(window=summary.window, manifest_hash=summary.manifest_hash)
            info.update(sides=summary.sides, started_at=summary.started_at)
            info.update(max_retries=options.max_retries, db_path=str(db))
            attach(live, info, db, (stop, real_stop))
        with RunProgress(console, enabled=show_progress) as progress:
            for side in options.sides:
                for engine in dict.fromkeys(s.engine for s in manifest.side(side)):
                    rows = progress_rows(manifest, attempts, options.max_retries, [side])
                    progress.plan(
                        side,
                        engine,
                        {
                            r["family"]: (r["planned"], r["done"])
                            for r in rows
                            if r["engine"] == engine
                        },
                    )
            recorder = Recorder(options.max_retries, progress, live)
            with _ctrl_c(stop, real_stop, progress.log):
                thread = None
                if real_due:
                    real_side = RealSide(
                        protocol, settings, options, real_due, stopper, db, out, recorder, real_stop
                    )
                    real_side.live = live
                    if sim_due:
                        thread = threading.Thread(
                            target=real_side.run, name="real-side", daemon=True
                        )
                        thread.start()
                    else:
                        real_side.run()
                try:
                    if sim_due:
                        _run_sim(protocol, settings, options, sim_due, db, out, recorder, stop, live)
                except BaseException as exc:
                    # The sim side failed: let the real episode in progress finish and be
                    # recorded (unless this is the second Ctrl-C), then report the failure.
                    real_stop.set()
                    if thread is not None and not isinstance(exc, KeyboardInterrupt):
                        thread.join()
                    raise
                if thread is not None:
                    while thread.is_alive():
                        thread.join(0.2)
        summary.written = recorder.written
        summary.settled = recorder.settled
        summary.failed = recorder.failed
        summary.first_error = recorder.first_error
        # Only Ctrl-C (or the caller) sets `stop`; the real side halts through `real_stop`.
        summary.interrupted = stop.is_set()
        if real_side is not None:
            decision = real_side.decision or decision
            summary.real_stopped = real_side.stopped_because
            summary.real_halted = real_side.halted
            if real_side.error is not None:
                if not isinstance(real_side.error, Exception):
                    raise real_side.error
                summary.real_error = f"{type(real_side.error).__name__}: {real_side.error}"

    if stopper is not None:
        summary.stopping = (decision or stopper.decision()).to_json()
    with Store(db) as store:
        attempts = stored_attempts(store, manifest)
        summary.rows = progress_rows(manifest, attempts, options.max_retries, options.sides)
        summary.spent = retries_spent(manifest, attempts, options.max_retries, options.sides)
        summary.actions_clipped = sum(
            int(ep.control.get("actions_clipped") or 0)
            for eps in attempts.values()
            for ep in eps
            if ep.side in options.sides
        )
        ids = {ep.episode_id for eps in attempts.values() for ep in eps}
        with_events = sorted({ev["episode_id"] for ev in store.safety_events()} & ids)
        if not options.dry_run:
            summary.incident_log = ingest_safety_events(db, protocol, with_events)
        summary.finished_at = utc_now_iso()
        if live is not None:
            summary.operator = [r.to_json() for r in live.requests]
        persist_summary(store, summary, out)
    if live is not None:
        live.finish_run({"finished_at": summary.finished_at, "interrupted": summary.interrupted})
    return summary


def _run_sim(
    protocol: Protocol,
    settings: RunSettings,
    options: RunOptions,
    specs: Sequence[EpisodeSpec],
    db_path: Path,
    out_dir: Path,
    recorder: Recorder,
    stop: threading.Event,
    live: LiveState | None = None,
) -> None:
    """Fan the sim episodes out over the executor and record each as it finishes (held there
    while the console has the run paused: the executor starts nothing new meanwhile)."""
    executor = make_executor(
        options.executor,
        options.workers,
        ray_address=options.ray_address,
        ray_working_dir=options.ray_working_dir,
    )
    context = SimContext(
        protocol=protocol,
        engine_targets=settings.engine_targets,
        out_dir=str(out_dir.resolve()),
        record=options.record,
        max_steps=protocol.max_steps,
        gym=options.gym or (GymSource(gym_id="") if settings.engines == (GYM_ENGINE,) else None),
    )
    fn = functools.partial(run_sim_episode, context)
    with Store(db_path) as store:
        for outcome in executor.map_episodes(
            fn, specs, options.max_retries, options.timeout_s, retry_on=RETRY_ON, stop=stop
        ):
            recorder.record(store, outcome)
            if live is not None:
                live.wait_while_paused(stop)
