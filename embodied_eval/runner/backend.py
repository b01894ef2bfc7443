"""What the runner needs from a robot on the real side: a small `RobotBackend` interface.

A backend is registered by name in `embodied_eval.plugins.ROBOT_BACKENDS` as "module:factory",
where `factory(protocol, **options) -> RobotBackend`. The ROS 2 bridge implements it; a lab can
register its own. The runner uses a backend as a context manager (connect on enter, disconnect on
exit, also after Ctrl-C) and runs real episodes through it one at a time.

A backend never raises for something that happened *on the robot*: if the robot stops, loses its
connection or is e-stopped mid-episode, `run_episode` returns an `aborted` (or `safety_stop`)
episode with the reason in `status_reason` and, where the abort was not the policy's, the cause
in `control["abort_cause"]` — one of the causes declared in `embodied_eval.live_channel`
(`ROBOT_LOST`, `POLICY_SERVER`, `OPERATOR_STOP`, `UNSUPERVISED`), which the runner and the seed
escrow read (`manifest.robot_side_abort`). An exception out of `run_episode` is a bug or a lost
bridge; the runner records it as an `error` episode with the traceback.

Before it connects, the runner hands the backend the run's live channel (`attach_live`): the
backend publishes the real episode in progress into it and obeys the operator's stop
(`LiveState.check_operator_stop` raises the typed `OperatorStop`, whose `abort_cause` the
episode then carries).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from embodied_eval.plugins import ROBOT_BACKENDS, resolve
from embodied_eval.protocol.reader import Protocol as EvalProtocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec


@runtime_checkable
class RobotBackend(Protocol):
    """A physical (or twin) robot the runner can run real episodes on."""

    def connect(self) -> None:
        """Open the connection to the robot (idempotent); raise EvalError if it is unreachable."""

    def disconnect(self) -> None:
        """Close the connection and leave the robot safe (idempotent)."""

    def __enter__(self) -> RobotBackend: ...

    def attach_live(self, live: LiveState | None) -> None:
        """Publish the real episode in progress into the run's live channel and obey its
        operator stop (None: the run has no console; detach)."""

    def __exit__(self, *exc: object) -> None: ...

    def run_episode(
        self, spec: EpisodeSpec, protocol: EvalProtocol, record_dir: Path | None
    ) -> EpisodeOutcome:
        """Run one real episode of `spec` and return its record and safety events.

        Args:
            spec: the manifest row (side "real"); the returned episode carries its episode_id,
                pair_id, seed and attempt.
            protocol: the protocol the spec came from (targets, safety thresholds, price card).
            record_dir: where to write recordings (MCAP, logs); each becomes an `Artifact` with
                its SHA-256. None: do not record.

        Returns:
            The outcome; `aborted` with `status_reason` when the robot could not finish.
        """
        ...


def backend_safety_settings(backend: object) -> dict[str, Any] | None:
    """The connected backend's safety settings ({profile key: value}: its limits, workspace,
    deadlines), or None for a backend that does not report them (the optional method
    `safety_settings()`; the ROS 2 bridge and the in-process robot report theirs)."""
    report = getattr(backend, "safety_settings", None)
    return None if report is None else dict(report())


#: What the runner calls on every backend (see RobotBackend).
BACKEND_METHODS = ("connect", "disconnect", "attach_live", "run_episode")


class BackendFactory(Protocol):
    """`factory(protocol, **options) -> RobotBackend`, as registered in ROBOT_BACKENDS."""

    def __call__(self, protocol: EvalProtocol, **options: Any) -> RobotBackend: ...


def backend_target(name: str) -> str:
    """The "module:factory" of a backend given by registered name or as "module:factory"."""
    if name in ROBOT_BACKENDS:
        return ROBOT_BACKENDS[name]
    if ":" in name:
        return name
    raise EvalError(
        f"robot backend {name!r} is not registered (known: {', '.join(sorted(ROBOT_BACKENDS))}); "
        "pass a registered name or 'package.module:factory'",
        key="robot_backend",
    )


def open_backend(
    name: str, protocol: EvalProtocol, options: Mapping[str, Any] | None = None
) -> RobotBackend:
    """Build the backend `name` for `protocol` (not yet connected)."""
    factory = resolve(backend_target(name))
    if not callable(factory):
        raise EvalError(f"robot backend {name!r} is not callable", key="robot_backend")
    backend = factory(protocol, **dict(options or {}))
    missing = [m for m in BACKEND_METHODS if not hasattr(backend, m)]
    if missing:
        raise EvalError(
            f"robot backend {name!r} lacks {', '.join(missing)} (see RobotBackend)",
            key="robot_backend",
        )
    return backend
