"""What the twin's ROS node needs from its physics: the `Plant` interface.

The node owns timing and ROS I/O; a plant owns one simulator instance of the robot and its scene
with the twin's reality gap applied, and follows joint targets like a robot's joint servos — it
runs no policy and judges nothing except through `oracle()` (the twin's ground truth, labelled as
such by the node and kept for measuring the harness's detector, never for judging). `SimSuitesPlant` (`real_bridge.twin.sim_plant`) is the plant of the twin: the
sim_suites arm its profile names (the Panda, the UR5e) and scenes on MuJoCo (or PyBullet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from embodied_eval.records import EpisodeSpec, SafetyEvent


class Plant(Protocol):
    """One simulated robot and scene, stepped one physics step at a time by the twin node."""

    #: Joint names of every state array (arm joints, then fingers).
    joint_names: tuple[str, ...]
    #: The arm controller's joints (a prefix of `joint_names`).
    arm_joints: tuple[str, ...]
    #: The gripper controller's joints.
    finger_joints: tuple[str, ...]
    #: Physics time step, s.
    physics_dt_s: float
    #: This episode's command latency from its drift and firmware profile, s (on top of the
    #: reality gap's actuator delay, which the node applies).
    command_latency_s: float

    def reset_scene(self, spec: EpisodeSpec, manifest: Mapping[str, Any]) -> None:
        """The reset station: place the scene of `spec` (seed, drift, the twin's gap)."""

    def set_arm_target(self, positions: np.ndarray, duration_s: float) -> np.ndarray:
        """Move the arm to `positions` (rad) over `duration_s`; returns the applied targets
        (after the joint limits)."""

    def set_finger_target(self, per_finger_m: float) -> float:
        """Finger set-point (m per finger); returns the applied value."""

    def hold_here(self) -> None:
        """Hold: freeze the servo set-point where it is now (deadman, protective stop)."""

    def step_physics(self) -> None:
        """Advance one physics step."""

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """True (noise-free) positions, velocities and efforts, shape (n,) each."""

    def wrench(self) -> np.ndarray:
        """Force (N) and torque (N·m) at the hand, shape (6,)."""

    def tcp_speed_mps(self) -> float:
        """Speed of the tool centre point, m/s."""

    def object_pose(self) -> tuple[np.ndarray, np.ndarray] | None:
        """True position (3,) and quaternion (4, w first) of the manipulated object."""

    def take_events(self) -> list[SafetyEvent]:
        """Safety events the simulator's own monitors raised since the last call."""

    def oracle(self, target_quality: float) -> tuple[float, bool, str]:
        """Ground truth of the scene now: (quality, success, detail)."""

    def hand(self) -> tuple[np.ndarray, bool]:
        """True TCP position (3,) and whether the hand holds the object (for the tracker's
        occlusion)."""

    def render(self, size: int) -> np.ndarray | None:
        """An RGB image (size, size, 3) uint8 from the scene camera; None without a renderer."""

    def close(self) -> None:
        """Release the simulator."""
