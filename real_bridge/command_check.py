"""Commands checked before they move anything: joint position, velocity and acceleration limits
and the workspace box of the robot profile (`BridgeConfig.robot`). No ROS imports.

A policy's whole action chunk is converted to joint targets and checked step by step *before any
of it is sent*; the first violation names the joint (or axis), the step of the chunk and the
limit. The harness then sends nothing of that chunk, holds the robot and ends the episode in a
protective stop (`real_bridge.supervision`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from real_bridge.bridge_config import RobotSpec

#: Tolerance on limits for floating-point noise (rad, rad/s, rad/s², m).
SLACK = 1e-9


def command_problem(
    targets: np.ndarray,
    previous: np.ndarray,
    previous_velocity: np.ndarray,
    dt_s: float,
    robot: RobotSpec,
    tcp_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> str:
    """Why a chunk of joint targets must not be sent, or "" when every step is within limits.

    Args:
        targets: shape (k, n) joint position targets, one row per control step, rad.
        previous: shape (n,) the target sent last (or the measured posture), rad.
        previous_velocity: shape (n,) the commanded joint velocity of the last step, rad/s.
        dt_s: control period, s (velocity = Δq / dt, acceleration = Δv / dt).
        robot: the profile's joints, limits and workspace.
        tcp_of: forward kinematics to the TCP position (m), for the workspace box.
    """
    rows = np.atleast_2d(np.asarray(targets, dtype=float))
    n = len(robot.arm_joints)
    if rows.shape[1] != n:
        return f"a command has {rows.shape[1]} joint values, the arm has {n}"
    lower = np.asarray(robot.position_lower)
    upper = np.asarray(robot.position_upper)
    vmax = np.asarray(robot.velocity_max)
    amax = np.asarray(robot.acceleration_max)
    q_prev = np.asarray(previous, dtype=float)
    v_prev = np.asarray(previous_velocity, dtype=float)
    for step, q in enumerate(rows, start=1):
        where = f"step {step} of {len(rows)}"
        bad = _first(~np.isfinite(q))
        if bad is not None:
            return f"{robot.arm_joints[bad]}: target is not a finite number ({where})"
        bad = _first((q < lower - SLACK) | (q > upper + SLACK))
        if bad is not None:
            return (
                f"{robot.arm_joints[bad]}: target {q[bad]:.4f} rad outside the position limits "
                f"[{lower[bad]:.4f}, {upper[bad]:.4f}] ({where})"
            )
        v = (q - q_prev) / dt_s
        bad = _first(np.abs(v) > vmax + SLACK)
        if bad is not None:
            return (
                f"{robot.arm_joints[bad]}: velocity {v[bad]:.3f} rad/s above the limit "
                f"{vmax[bad]:.3f} rad/s ({where})"
            )
        a = (v - v_prev) / dt_s
        bad = _first(np.abs(a) > amax + SLACK)
        if bad is not None:
            return (
                f"{robot.arm_joints[bad]}: acceleration {a[bad]:.2f} rad/s² above the limit "
                f"{amax[bad]:.2f} rad/s² ({where})"
            )
        if robot.workspace_min and tcp_of is not None:
            tcp = tcp_of(q)
            lo, hi = np.asarray(robot.workspace_min), np.asarray(robot.workspace_max)
            axis = _first((tcp < lo - SLACK) | (tcp > hi + SLACK))
            if axis is not None:
                name = "xyz"[axis]
                return (
                    f"TCP {name} = {tcp[axis]:.3f} m outside the workspace box "
                    f"[{lo[axis]:.3f}, {hi[axis]:.3f}] m ({where})"
                )
        q_prev, v_prev = q, v
    return ""


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None
