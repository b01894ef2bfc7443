"""What the twin's ROS node needs from its physics: the `Plant` interface.

The node owns timing and ROS I/O; a plant owns one simulator instance of the robot and task with
the twin's reality gap applied, and runs the episode's policy on it. `SimSuitesPlant`
(`real_bridge.twin.sim_plant`) is the plant used by the twin: the sim_suites Panda and tasks on
MuJoCo (or PyBullet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from embodied_eval.records import EpisodeSpec, Fault, SafetyEvent


@dataclass
class PlantResult:
    """The task outcome a plant reports when its episode ends (becomes the verdict).

    Attributes:
        status: "ok", "safety_stop", "out_of_bounds" or "error".
        quality: task score q in [0, 1]; success: q ≥ q* as the task judged it.
        faults: faults from the task's fault taxonomy that happened.
        actions / plan_depth / steps: control actions, plan depth, control steps taken.
        energy_wh: electrical energy, Wh; qc: control-quality score in [0, 1] or None.
        control / randomization: JSON-ready signals and the parameters actually used.
        reason: why it ended (free text).
    """

    status: str
    quality: float
    success: bool
    faults: tuple[Fault, ...] = ()
    actions: int = 0
    plan_depth: int = 0
    steps: int = 0
    energy_wh: float = 0.0
    qc: float | None = None
    control: dict[str, Any] = field(default_factory=dict)
    randomization: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


class Plant(Protocol):
    """One simulated robot + task, stepped one physics step at a time by the twin node."""

    #: Joint names in the order of every array below (arm joints, then fingers).
    joint_names: tuple[str, ...]
    #: Physics time step, s.
    physics_dt_s: float

    def reset(self, spec: EpisodeSpec, manifest: Mapping[str, Any]) -> None:
        """Build/restore the task of `spec` with its seed and drift (plus the twin's gap)."""

    def start(self) -> None:
        """Begin running the episode's policy from the reset state."""

    def step_physics(self) -> None:
        """Advance one physics step; runs the policy when a control step is due."""

    def hold(self, positions: np.ndarray) -> np.ndarray:
        """Follow-mode set-point for the first len(positions) joints; returns what was applied
        (after joint limits), shape (len(positions),)."""

    def stop(self, reason: str) -> None:
        """Stop the policy and hold the current posture (a protective stop, a stop request)."""

    @property
    def running(self) -> bool:
        """True while the episode's policy is running."""

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """True (noise-free) positions, velocities and efforts, shape (n,) each."""

    def wrench(self) -> np.ndarray:
        """Force (N) and torque (N·m) at the hand, shape (6,)."""

    def tcp_speed_mps(self) -> float:
        """Speed of the tool centre point, m/s."""

    def take_events(self) -> list[SafetyEvent]:
        """Safety events the simulator's own monitors raised since the last call."""

    def result(self) -> PlantResult | None:
        """The episode's outcome once it has ended (None while running or before start)."""

    def close(self) -> None:
        """Release the simulator."""
