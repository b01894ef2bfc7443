"""The small robot interface of the real side (LeRobot style).

`connect()` / `reset(spec)` to a manifest row / `get_observation()` / `send_action(...)` returning
what was actually applied / `safety_state()` / `disconnect()`, usable as a context manager, plus
`run_episode(spec, protocol, record_dir) -> EpisodeOutcome`, which is what the runner calls for the
real side of a pair. Backends: `real_bridge.ros2_backend.Ros2Backend` (a robot over ROS 2) and
`real_bridge.manual.ManualBackend` (a technician enters the outcome).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.protocol.reader import Protocol
from embodied_eval.records import EpisodeOutcome, EpisodeSpec, SafetyEvent


@dataclass(frozen=True)
class Observation:
    """The latest state of the robot.

    Attributes:
        stamp_s: the robot's timestamp of the sample, s (its clock).
        received_s: when the bridge received it, s (`time.monotonic()`).
        joint_names: n names.
        position / velocity / effort: shape (n,) arrays in rad, rad/s, N·m (empty when the robot
            does not report velocity/effort).
        wrench: shape (6,) force (N) and torque (N·m) at the tool, or None without a sensor.
    """

    stamp_s: float
    received_s: float
    joint_names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    wrench: np.ndarray | None = None


@dataclass(frozen=True)
class AppliedAction:
    """What a `send_action` call actually did.

    Attributes:
        joint_names: n names commanded.
        positions: shape (n,) joint targets actually applied, rad (after the robot's limits).
        confirmed: True when the robot echoed the applied command; False when the bridge only
            knows what it sent (the robot has no applied-command topic, or it did not echo in time).
        stamp_s: the robot's timestamp of the control tick that applied it (0 if unconfirmed).
    """

    joint_names: tuple[str, ...]
    positions: np.ndarray
    confirmed: bool
    stamp_s: float = 0.0


@dataclass(frozen=True)
class SafetyState:
    """The robot's safety state as the bridge sees it.

    Attributes:
        enabled: whether the robot reported itself enabled (None when unknown).
        protective_stop / emergency_stop: a stop is active (latched until cleared).
        active: names of the safety statuses currently at WARN or ERROR.
        events: safety events received since the last reset.
    """

    enabled: bool | None
    protective_stop: bool
    emergency_stop: bool
    active: tuple[str, ...] = ()
    events: tuple[SafetyEvent, ...] = field(default_factory=tuple)


class Robot(abc.ABC):
    """A robot the real side can drive. Subclasses implement the abstract methods."""

    #: Engine name recorded in the real-side episodes ("ros2", "manual").
    engine: str = ""

    @property
    @abc.abstractmethod
    def is_connected(self) -> bool:
        """True between a successful `connect()` and `disconnect()`."""

    @abc.abstractmethod
    def connect(self) -> None:
        """Find the robot; raises EvalError (within a deadline) when it is not there."""

    @abc.abstractmethod
    def disconnect(self) -> None:
        """Release the robot (idempotent)."""

    @abc.abstractmethod
    def reset(self, spec: EpisodeSpec, protocol: Protocol | None = None) -> Observation | None:
        """Reset the robot to a manifest row; returns the first observation when there is one."""

    @abc.abstractmethod
    def get_observation(self) -> Observation:
        """The latest observation; raises EvalError when it is stale."""

    @abc.abstractmethod
    def send_action(self, positions: Sequence[float], *, duration_s: float = 0.0) -> AppliedAction:
        """Command joint position targets; returns what was applied."""

    @abc.abstractmethod
    def safety_state(self) -> SafetyState:
        """The current safety state."""

    @abc.abstractmethod
    def run_episode(
        self, spec: EpisodeSpec, protocol: Protocol | None, record_dir: str | Path | None
    ) -> EpisodeOutcome:
        """Run one real episode of the manifest and return its record and safety events.

        Never raises for what happens on the robot (a stop, a dead robot, a timeout): those end
        up in the episode's status and reason. Raises EvalError only for bad input.
        """

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def describe(self) -> dict[str, Any]:
        """A short JSON-ready description (for logs and progress output)."""
        return {"engine": self.engine, "connected": self.is_connected}
