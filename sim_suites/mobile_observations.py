"""What a mobile manipulator's policy sees: the state observation space and one observation.

Observation (a Dict of float64 arrays, each a fresh copy; positions in the map frame as the
robot knows it, i.e. through its wheel odometry): `joint_pos` (9,), `joint_vel` (9,),
`gripper_width` (1,) m, `base_pose` (3,) = odometry x, y (m), yaw (rad), `lift` (1,) m, `tcp_pos`
(3,), `tcp_target` (3,), `object_pos` (3,) (the cube, measured relative to the robot),
`object_visible` (1,), `goal_pos` (3,) (where the cube must go, in the map), `grasped` (1,),
`floor_plan` (MAX_FOOTPRINTS × 4,) the robot's map: footprints (centre x, y, half-extents x, y;
m) of the walls, partition, counters and clutter, zero-padded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from sim_suites.observations import JOINT_POS_BOUND, JOINT_VEL_BOUND, POS_BOUND_M, bounded

#: Room footprints the map holds at most (walls 4, partition 2, door panel, counters 3,
#: clutter 3, with room to spare).
MAX_FOOTPRINTS = 16
MAP_BOUND_M = 30.0


def _box(n: int, low: float, high: float) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=(n,), dtype=np.float64)


def mobile_space() -> spaces.Dict:
    """The Dict observation space (see the module docstring)."""
    keys: dict[str, spaces.Space[Any]] = {
        "joint_pos": _box(9, -JOINT_POS_BOUND, JOINT_POS_BOUND),
        "joint_vel": _box(9, -JOINT_VEL_BOUND, JOINT_VEL_BOUND),
        "gripper_width": _box(1, 0.0, 1.0),
        "base_pose": _box(3, -MAP_BOUND_M, MAP_BOUND_M),
        "lift": _box(1, 0.0, 1.0),
        "tcp_pos": _box(3, -MAP_BOUND_M, MAP_BOUND_M),
        "tcp_target": _box(3, -MAP_BOUND_M, MAP_BOUND_M),
        "object_pos": _box(3, -MAP_BOUND_M, MAP_BOUND_M),
        "object_visible": _box(1, 0.0, 1.0),
        "goal_pos": _box(3, -MAP_BOUND_M, MAP_BOUND_M),
        "grasped": _box(1, 0.0, 1.0),
        "floor_plan": _box(4 * MAX_FOOTPRINTS, -MAP_BOUND_M, MAP_BOUND_M),
    }
    return spaces.Dict(keys)


@dataclass
class MobileReading:
    """The state read once per control step (map-frame positions already through odometry)."""

    q: np.ndarray
    qd: np.ndarray
    odometry: np.ndarray
    lift: float
    tcp: np.ndarray
    tcp_target: np.ndarray
    point: np.ndarray
    goal: np.ndarray
    grasped: bool
    floor_plan: np.ndarray  # (4·MAX_FOOTPRINTS,) `floor_plan_array` of the room


def floor_plan_array(footprints: list[tuple[float, float, float, float]]) -> np.ndarray:
    """The map's footprints as a flat (4·MAX_FOOTPRINTS,) array, zero-padded."""
    out = np.zeros((MAX_FOOTPRINTS, 4))
    rows = np.asarray(footprints, dtype=float).reshape(-1, 4)[:MAX_FOOTPRINTS]
    out[: len(rows)] = rows
    return bounded(out.reshape(-1), MAP_BOUND_M)


def floor_plan_rects(flat: np.ndarray) -> list[tuple[float, float, float, float]]:
    """The footprints back from an observation's `floor_plan` (padding dropped)."""
    rows = np.asarray(flat, dtype=float).reshape(-1, 4)
    return [
        (float(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in rows if r[2] > 0 or r[3] > 0
    ]


def mobile_observation(reading: MobileReading, eps: np.ndarray) -> dict[str, np.ndarray]:
    """One observation (fresh arrays) from a reading and its sensor noise (15,): joints (9),
    TCP (3), object (3)."""
    q = reading.q
    pose = np.array(reading.odometry, dtype=float)
    pose[2] = (pose[2] + np.pi) % (2 * np.pi) - np.pi
    return {
        "joint_pos": q + eps[:9],
        "joint_vel": bounded(reading.qd.copy(), JOINT_VEL_BOUND),
        "gripper_width": np.array([min(1.0, max(0.0, float(q[7] + q[8])))]),
        "base_pose": bounded(pose, MAP_BOUND_M),
        "lift": np.array([reading.lift]),
        "tcp_pos": bounded(reading.tcp + eps[9:12], MAP_BOUND_M),
        "tcp_target": bounded(reading.tcp_target.copy(), MAP_BOUND_M),
        "object_pos": bounded(reading.point + eps[12:], MAP_BOUND_M),
        "object_visible": np.array([1.0]),
        "goal_pos": reading.goal.copy(),
        "grasped": np.array([1.0 if reading.grasped else 0.0]),
        "floor_plan": reading.floor_plan.copy(),
    }


__all__ = ["MAX_FOOTPRINTS", "POS_BOUND_M", "MobileReading", "mobile_observation", "mobile_space"]


def rot_z(yaw: float) -> np.ndarray:
    """The rotation (3, 3) by `yaw` rad about the vertical."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def integrate_odometry(
    odometry: np.ndarray, yaw_rate: float, wheel_body: np.ndarray, drift: float, dt: float
) -> None:
    """Advance the base's odometry pose (x, y, yaw) in place by one control period, as a mobile
    base fuses it: heading from the gyro (`yaw_rate`, the base's measured yaw rate, rad/s),
    travel from the wheels' turns (`wheel_body`, the commanded velocity in the base frame, which
    the drive servos hold) scaled by the odometry's error (`drift`), rotated by that heading."""
    odometry[2] += yaw_rate * dt
    odometry[:2] += rot_z(float(odometry[2]))[:2, :2] @ wheel_body[:2] * ((1.0 + drift) * dt)
