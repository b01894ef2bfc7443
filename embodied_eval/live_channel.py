"""The live channel of a run: what a running harness shows its console (and Foxglove) while it
runs, the operator's stop and pause requests, and the typed stop (`OperatorStop`) a robot backend
raises from them.

It sits below the runner, the console and the robot side, which all import it and none of which
it imports: the runner attaches the run, the robot backend publishes into it and obeys its stop
(`embodied_eval.runner.backend.RobotBackend.attach_live`), the console reads it.

One `LiveState` per run. Writers:

- the runner: the run's start and end, every recorded episode (`publish("episode", ...)`), the
  anytime-stopping decision;
- the robot backend (through `attach_live`, see `embodied_eval.runner.backend`): the real episode
  in progress (`update_real`: commanded and measured joints, contact force and its limit, loop
  latency and deadline misses, deadman and protective-stop state), the camera frames it receives
  (`publish_frame`), its raw ROS messages for Foxglove (`ros_stream`, `ros_message`) and its
  safety events as they arrive.

Readers (the console's server, the Foxglove publisher) poll it: every method is thread-safe and
the writers' side is cheap (a lock and a dict update), so the real side's 50 Hz control loop can
publish every tick.

Operator requests (`request`): "stop" sets the run's stop event and the operator-stop flag the
real side checks every control tick (`check_operator_stop` raises `OperatorStop`; the backend then
sends the safe-stop hold and ends the episode `aborted` with cause `operator_stop`); "pause" lets the episodes in progress finish and holds
before the next; "resume" lets the run go on. Each request is handed to the run's recorder, which
writes it as a chained ledger record naming who asked.
"""

from __future__ import annotations

import getpass
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from embodied_eval.errors import EvalError
from embodied_eval.records import utc_now_iso

#: Operator actions a console (or a script) may ask for.
OPERATOR_ACTIONS = ("stop", "pause", "resume")

# Why a real episode was aborted, stored as `control["abort_cause"]`: the seam between a robot
# backend (which sets it) and the runner and the seed escrow (which read it).
#: The robot stopped answering during the episode.
ROBOT_LOST = "robot_lost"
#: The remote policy server failed (the robot was held).
POLICY_SERVER = "policy_server"
#: An operator stopped the run from its console (or its API).
OPERATOR_STOP = "operator_stop"
#: The episode was found to have run while the harness was dead.
UNSUPERVISED = "unsupervised"
#: Events kept for readers that connect late (the page shows the latest ones).
EVENTS_KEPT = 2000


def default_user() -> str:
    """Who is at the keyboard: $EMBODIED_EVAL_USER, else the login name."""
    name = os.environ.get("EMBODIED_EVAL_USER", "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class OperatorRequest:
    """One stop, pause or resume asked for from the console or its API.

    Attributes:
        action: "stop", "pause" or "resume".
        by: who asked (the console's user name, or the name the request carried).
        via: "page" (the console's buttons) or "api" (a script).
        at: when, ISO 8601 UTC; t_ns: the same on the wall clock, ns.
        episode_id: the real episode in progress then ("" when none).
        record_id: the ledger record that holds it ("" until written).
    """

    action: str
    by: str
    via: str
    at: str
    t_ns: int
    episode_id: str = ""
    record_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class OperatorStop(EvalError):
    """Someone asked the run to stop (the console's stop button or its API): the real episode in
    progress ends `aborted` with this `abort_cause`, after the safe-stop hold."""

    abort_cause = OPERATOR_STOP


class LiveState:
    """The live view of one run (see the module docstring).

    Args:
        user: the name recorded with operator requests made in process without one (the
            console's requests name the operator whose token they carried).
    """

    def __init__(self, user: str = "") -> None:
        self.user = user.strip() or default_user()
        self._lock = threading.Lock()
        self._seq = 0
        self._events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEPT)
        self.run: dict[str, Any] = {"status": "idle"}
        self._real: dict[str, Any] = {}
        self._real_version = 0
        self._frame: tuple[int, int, Any] | None = None
        self._ros_streams: dict[str, tuple[str, str]] = {}
        self._ros_latest: dict[str, tuple[int, int, bytes]] = {}
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._run_stop: Callable[[], None] | None = None
        self._record: Callable[[OperatorRequest], str] | None = None
        self._stopped_by = ""
        self.requests: list[OperatorRequest] = []

    # ------------------------------------------------------------------ the run

    def attach_run(
        self,
        info: Mapping[str, Any],
        stop: Callable[[], None],
        record: Callable[[OperatorRequest], str],
    ) -> None:
        """The runner starts: its description, how to stop it (as Ctrl-C does) and the writer of
        ledger records for operator requests (returns the record id)."""
        with self._lock:
            self.run = {**dict(info), "status": "running"}
            self._run_stop = stop
            self._record = record
        self.publish("run", {"status": "running", **dict(info)})

    def finish_run(self, info: Mapping[str, Any]) -> None:
        """The runner ended (the console keeps serving the final state)."""
        with self._lock:
            self.run = {**self.run, **dict(info), "status": "finished"}
            self._paused.clear()
        self.publish("run", {"status": "finished", **dict(info)})

    @property
    def attached(self) -> bool:
        return self._run_stop is not None

    def run_info(self) -> dict[str, Any]:
        """The run's description and status: "idle" (no run attached yet), "running",
        "paused", "stopping" (a stop was asked for) or "finished"."""
        with self._lock:
            return self._run_info()

    def _run_info(self) -> dict[str, Any]:
        info = dict(self.run)
        if info.get("status") == "running":
            if self._stop.is_set():
                info["status"] = "stopping"
            elif self._paused.is_set():
                info["status"] = "paused"
        return info

    def snapshot(self, keep: int = 50) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
        """(run info, the last `keep` events, the last sequence number), read at one instant:
        a reader starting from it misses no event and never shows an older status than the
        events it holds (a run's start is in both or in neither)."""
        with self._lock:
            events = [e for e in self._events if e["seq"] > self._seq - keep]
            return self._run_info(), events, self._seq

    # ------------------------------------------------------------------ events

    def publish(self, kind: str, data: Mapping[str, Any]) -> int:
        """Append an event (episode recorded, episode started/ended, safety event, operator
        request, stopping decision); returns its sequence number."""
        with self._lock:
            self._seq += 1
            self._events.append({**data, "seq": self._seq, "t_ns": time.time_ns(), "kind": kind})
            return self._seq

    def events_since(self, seq: int) -> list[dict[str, Any]]:
        """Events after sequence number `seq`, oldest first."""
        with self._lock:
            if not self._events or self._events[-1]["seq"] <= seq:
                return []
            return [e for e in self._events if e["seq"] > seq]

    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._seq

    # ------------------------------------------------------------------ the real episode

    def update_real(self, **fields: Any) -> None:
        """Merge fields into the real episode in progress (called every control tick)."""
        with self._lock:
            self._real.update(fields)
            self._real["updated_ns"] = time.time_ns()
            self._real_version += 1

    def clear_real(self, **fields: Any) -> None:
        """A new real episode: forget the last one's fields, keep `fields`."""
        with self._lock:
            self._real = {**fields, "updated_ns": time.time_ns()}
            self._real_version += 1

    def real(self) -> tuple[int, dict[str, Any]]:
        """(version, the real episode in progress's fields)."""
        with self._lock:
            return self._real_version, dict(self._real)

    def publish_frame(self, image: Any) -> None:
        """The latest camera frame the harness received (an (h, w, 3) uint8 RGB array; kept by
        reference, encoded only when a reader asks)."""
        with self._lock:
            count = self._frame[0] + 1 if self._frame is not None else 1
            self._frame = (count, time.time_ns(), image)

    def frame(self) -> tuple[int, int, Any] | None:
        """(frame count, wall ns received, image) of the latest frame, or None."""
        with self._lock:
            return self._frame

    # ------------------------------------------------------------------ ROS messages

    def ros_stream(self, topic: str, msgtype: str, definition: str) -> None:
        """Declare a ROS stream the backend forwards ("pkg/msg/Type", its ros2msg text)."""
        with self._lock:
            self._ros_streams[topic] = (msgtype, definition)

    def ros_message(self, topic: str, data: bytes, log_ns: int) -> None:
        """The latest CDR message on `topic` (readers take it at their own rate)."""
        with self._lock:
            previous = self._ros_latest.get(topic)
            self._ros_latest[topic] = ((previous[0] + 1) if previous else 1, log_ns, data)

    def ros_streams(self) -> dict[str, tuple[str, str]]:
        with self._lock:
            return dict(self._ros_streams)

    def ros_latest(self) -> dict[str, tuple[int, int, bytes]]:
        """topic -> (message count, log time ns, CDR bytes) of the latest message."""
        with self._lock:
            return dict(self._ros_latest)

    # ------------------------------------------------------------------ operator requests

    def request(self, action: str, by: str = "", via: str = "api") -> OperatorRequest:
        """Stop, pause or resume the attached run; returns the request as recorded.

        The stop flag is set before anything is written, so the real side's next control tick
        sees it whatever the store is doing. Raises EvalError when no run is attached or the run
        has finished.
        """
        if action not in OPERATOR_ACTIONS:
            raise EvalError(
                f"action {action!r} is not one of {', '.join(OPERATOR_ACTIONS)}", key="action"
            )
        info = self.run_info()
        if not self.attached or info.get("status") == "finished":
            raise EvalError(
                "no run is attached to this console: start the run with `embodied-eval run ... "
                "--console-port N` to stop or pause it from here",
                key="run",
            )
        who = by.strip() or self.user
        if action == "stop":
            if not self._stop.is_set():
                self._stopped_by = f" by {who} ({via})"
            self._stop.set()
            assert self._run_stop is not None
            self._run_stop()
            self._paused.clear()
        elif action == "pause":
            self._paused.set()
        else:
            self._paused.clear()
        _, real = self.real()
        request = OperatorRequest(
            action=action,
            by=who,
            via=via,
            at=utc_now_iso(),
            t_ns=time.time_ns(),
            episode_id=str(real.get("episode_id", "")) if real.get("phase") != "ended" else "",
        )
        record_id = self._record(request) if self._record is not None else ""
        request = OperatorRequest(**{**request.to_json(), "record_id": record_id})
        with self._lock:
            self.requests.append(request)
        self.publish("operator", request.to_json())
        return request

    def stop_reason(self) -> str:
        """ "" while nobody asked to stop; else why the real episode in progress must end."""
        if not self._stop.is_set():
            return ""
        return f"operator stop requested{self._stopped_by}"

    def check_operator_stop(self) -> None:
        """Raise `OperatorStop` once someone asked the run to stop (one flag read: the real
        side's control loop calls it every tick)."""
        if self._stop.is_set():
            raise OperatorStop(self.stop_reason())

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def wait_while_paused(self, stop: threading.Event, poll_s: float = 0.05) -> None:
        """Block while the run is paused (returns at once on a stop)."""
        while self._paused.is_set() and not stop.is_set() and not self._stop.is_set():
            time.sleep(poll_s)
