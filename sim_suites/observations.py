"""What the policy sees: the state observation space and one observation from a physics reading.

Observation (state mode): a Dict of float64 arrays, each a fresh copy: `joint_pos` (n + 2,) rad/m
(the arm's n joints, then its two fingers; (9,) on the Panda), `joint_vel` (n + 2,), `gripper_width` (1,) m, `tcp_pos` (3,) m, `tcp_target` (3,) m (the controller's
set-point), `object_pos` (3,) m (the tracked point: object centre, or the drawer handle),
`object_quat` (4,) (w, x, y, z), `object_visible` (1,) 0/1, `goal_pos` (3,) m, `grasped` (1,) 0/1,
`obstacle` (4,) = [x, y, top_z, active]; and for a task with a tool (`tool_use`), `tool_pos` (3,) m,
the tool's grasp point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

#: Observation bounds. Positions are in the robot's base frame; the workspace monitor ends an
#: episode long before anything reaches them, and readings beyond are clipped to stay in-space.
POS_BOUND_M = 5.0
JOINT_POS_BOUND = 4.0
JOINT_VEL_BOUND = 100.0
#: Noisy channels, one draw per step for all: joints (up to 9: an arm of n joints and two fingers
#: uses the first n + 2), TCP (3), object (3).
NOISY_CHANNELS = 15


def bounded(x: np.ndarray, bound: float) -> np.ndarray:
    """x (a fresh array) clipped to ±bound; the clip is rarely needed, so test first."""
    if float(np.abs(x).max()) > bound:
        np.clip(x, -bound, bound, out=x)
    return x


def _box(n: int, low: float, high: float) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=(n,), dtype=np.float64)


def state_space(tool: bool = False, joints: int = 9) -> spaces.Dict:
    """The Dict observation space of state mode (see the module docstring).

    Args:
        tool: the task has a tool (adds `tool_pos`).
        joints: joint values in `joint_pos` / `joint_vel`: the arm's and its two fingers'.
    """
    keys: dict[str, spaces.Space[Any]] = {
        "joint_pos": _box(joints, -JOINT_POS_BOUND, JOINT_POS_BOUND),
        "joint_vel": _box(joints, -JOINT_VEL_BOUND, JOINT_VEL_BOUND),
        "gripper_width": _box(1, 0.0, 1.0),
        "tcp_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
        "tcp_target": _box(3, -POS_BOUND_M, POS_BOUND_M),
        "object_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
        "object_quat": _box(4, -1.0, 1.0),
        "object_visible": _box(1, 0.0, 1.0),
        "goal_pos": _box(3, -POS_BOUND_M, POS_BOUND_M),
        "grasped": _box(1, 0.0, 1.0),
        "obstacle": _box(4, -POS_BOUND_M, POS_BOUND_M),
    }
    if tool:
        keys["tool_pos"] = _box(3, -POS_BOUND_M, POS_BOUND_M)
    return spaces.Dict(keys)


@dataclass
class StateReading:
    """The physics state read once per control step (arrays are owned by the reading).

    Attributes:
        q, qd: (n + 2,) joint positions and velocities (n arm joints, 2 fingers).
        tcp: (3,) measured TCP, m. tcp_target: (3,) the controller's set-point, m.
        point: (3,) tracked point of the task object, m. quat: (4,) object orientation.
        goal: (3,) goal of the tracked point, m. grasped: whether the hand holds the part.
        obstacle: (4,) [x, y, top_z, active] of the planner-dead-end pillar.
        frozen: the (point, quat) perception is stuck at during a dropout, else None.
        tool: (3,) the tool's grasp point, m (tasks with a tool), else None.
    """

    q: np.ndarray
    qd: np.ndarray
    tcp: np.ndarray
    tcp_target: np.ndarray
    point: np.ndarray
    quat: np.ndarray
    goal: np.ndarray
    grasped: bool
    obstacle: np.ndarray
    frozen: tuple[np.ndarray, np.ndarray] | None
    tool: np.ndarray | None = None


def state_observation(reading: StateReading, eps: np.ndarray) -> dict[str, np.ndarray]:
    """One state-mode observation (fresh arrays) from a reading and its sensor noise.

    Args:
        reading: the current physics state. eps: (NOISY_CHANNELS,) noise, m or rad.
    """
    if reading.frozen is not None:
        obj_pos, obj_quat = reading.frozen[0].copy(), reading.frozen[1].copy()
        visible = 0.0
    else:
        obj_pos, obj_quat, visible = reading.point + eps[12:], reading.quat.copy(), 1.0
    q = reading.q
    n = len(q) - 2  # arm joints; the two fingers come last
    # Joint angles and the TCP stay far inside the bounds (joint limits < 3.2 rad, reach
    # < 1.2 m); velocities and the free object are clipped if physics ever flings them.
    obs = {
        "joint_pos": q + eps[: n + 2],
        "joint_vel": bounded(reading.qd.copy(), JOINT_VEL_BOUND),
        "gripper_width": np.array([min(1.0, max(0.0, float(q[n] + q[n + 1])))]),
        "tcp_pos": reading.tcp + eps[9:12],
        "tcp_target": reading.tcp_target.copy(),
        "object_pos": bounded(obj_pos, POS_BOUND_M),
        "object_quat": obj_quat,
        "object_visible": np.array([visible]),
        "goal_pos": reading.goal.copy(),
        "grasped": np.array([1.0 if reading.grasped else 0.0]),
        "obstacle": reading.obstacle.copy(),
    }
    if reading.tool is not None:
        obs["tool_pos"] = bounded(reading.tool.copy(), POS_BOUND_M)
    return obs
