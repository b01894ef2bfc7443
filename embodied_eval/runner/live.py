"""The runner's side of the live console: what it tells the run's `LiveState`, and the ledger
record of every operator request.

`run_trials(..., live=LiveState())` attaches the run (`attach`): the live state gets the run's
description, a way to stop it (the same two events Ctrl-C sets) and `operator_record_writer`,
which chains each stop, pause or resume in the trial ledger (kind `operator`) naming who asked.
Each recorded episode is published as it is stored; the robot backend (`RobotBackend.attach_live`)
publishes the real episode in progress and obeys the operator's stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from embodied_eval.live_channel import LiveState, OperatorRequest
from embodied_eval.records import EpisodeOutcome
from embodied_eval.store import ledger
from embodied_eval.store.core import Store, transaction


def operator_record_writer(
    db_path: Path, window: str, run_id: str
) -> Callable[[OperatorRequest], str]:
    """A function chaining one operator request as an `operator` ledger record; returns its id."""

    def write(request: OperatorRequest) -> str:
        record_id = ledger.new_record_id("OPR")
        data = {k: v for k, v in request.to_json().items() if k != "record_id"}
        data["run_id"] = run_id
        with Store(db_path) as store, transaction(store.conn):
            ledger.append(
                store.conn,
                "operator",
                record_id,
                data,
                window=window,
                subject=request.episode_id or None,
                at=request.at,
            )
        return record_id

    return write


def operator_requests(db_path: Path, window: str | None = None) -> list[dict[str, Any]]:
    """The chained operator requests (stop, pause, resume), in chain order, each with its record
    id and sequence number."""
    with Store(db_path, create=False) as store:
        rows = ledger.rows(store.conn, "kind != 'episode' AND kind = 'operator'")
    return [
        {**row.data, "record_id": row.record_id, "seq": row.seq, "window": row.window}
        for row in rows
        if window is None or row.window == window
    ]


def attach(
    live: LiveState,
    info: Mapping[str, Any],
    db_path: Path,
    stops: tuple[threading.Event, ...],
) -> None:
    """Attach a starting run to its live state: an operator's stop sets `stops` (the run's stop
    and the real side's, as Ctrl-C does)."""

    def stop() -> None:
        for event in stops:
            event.set()

    live.attach_run(
        info, stop, operator_record_writer(db_path, str(info["window"]), str(info["run_id"]))
    )


def publish_outcome(live: LiveState, outcome: EpisodeOutcome, settles: bool) -> None:
    """Tell the live state an episode was stored (the console re-reads the store)."""
    ep = outcome.episode
    live.publish(
        "episode",
        {
            "episode_id": ep.episode_id,
            "side": ep.side,
            "engine": ep.engine,
            "family": ep.family,
            "status": ep.status,
            "success": ep.success,
            "quality": round(ep.quality, 4),
            "settles": settles,
            "status_reason": ep.status_reason,
            "safety_events": len(outcome.safety_events),
        },
    )
