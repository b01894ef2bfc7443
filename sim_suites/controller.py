"""The Cartesian controller and grasp model, identical for both engines.

Action (Box(-1, 1, (4,))): [vx, vy, vz, g]. The first three are a Cartesian TCP velocity command
scaled by V_MAX_MPS (the vector is capped at V_MAX_MPS in norm); g maps linearly to the gripper's
wanted opening, −1 = closed, +1 = fully open (the arm's finger travel, 4 cm per finger on the
Panda; the robot's gripper drive moves
toward it at its rated speed, `sim_suites.command_path.JointFollower`). The gripper keeps pointing
down with a fixed yaw. The controller integrates the velocity into a TCP set-point (kept within
LEAD_MAX_M of the measured TCP so a blocked arm does not wind up) and takes one damped-least-
squares IK step toward it; the joint limiter, the trajectory and the servos that follow are the
command path's (`sim_suites.command_path`), the same on both halves of a pair.

Weld rule of the *assisted* grasp mode (see `sim_suites.grasping`; by default grasps are held by
contact friction alone): when the fingers are commanded closed and have closed on the graspable
part (measured opening within GRASP_WIDTH_TOL_M of the part's width) while the part's centre is
within GRASP_BOX_M of the TCP, the part is welded to the hand. Commanding the fingers open past
the part, or a grasp-slip fault, releases it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_suites.robot import SerialArm

#: Full-scale TCP speed of the action (m/s).
V_MAX_MPS = 0.4
#: How far the TCP set-point may run ahead of the measured TCP (m).
LEAD_MAX_M = 0.05
#: Grasp detection: part centre within this box around the TCP (m, per axis x, y, z).
GRASP_BOX_M = np.array([0.02, 0.02, 0.03])
#: Grasp detection: measured opening within this of the part's width (m).
GRASP_WIDTH_TOL_M = 0.008


def finger_setpoint(g: float, finger_max_m: float) -> float:
    """Finger set-point per finger (m) for the gripper action g ∈ [−1, 1] and a finger travel
    of `finger_max_m` per finger."""
    return min(1.0, max(0.0, (float(g) + 1.0) * 0.5)) * finger_max_m


@dataclass
class ControlCommand:
    """What the robot's controller sends its servos for one control period."""

    arm_cmd: np.ndarray  # (n,) servo set-points including the feed-forward offset, rad
    q_des: np.ndarray  # (n,) the joint set-point, rad
    finger: float  # per finger, m
    tcp_target: np.ndarray  # (3,) m


@dataclass(frozen=True)
class CartesianStep:
    """The Cartesian controller's output for one control step: the IK goal (n,) rad, the
    gripper's wanted opening per finger (m) and the TCP set-point (3,) m (n: arm joints)."""

    q_goal: np.ndarray
    finger: float
    tcp_target: np.ndarray


class ArmController:
    """Cartesian velocity → an IK goal for the arm (see the module docstring); the joint
    limiter and the servos are the command path's (`sim_suites.command_path`)."""

    def __init__(self, kinematics: SerialArm) -> None:
        self.kin = kinematics
        self.rot = kinematics.home_tcp_rot
        self.q_des = kinematics.home_q.copy()
        self.tcp_target = kinematics.forward(kinematics.home_q)[0]
        self.finger = kinematics.finger_max_m

    def reset(self, q: np.ndarray, finger: float | None = None) -> None:
        self.q_des = q.copy()
        self.tcp_target = self.kin.forward(q)[0]
        self.finger = self.kin.finger_max_m if finger is None else finger

    def command(self, velocity: np.ndarray, g: float, dt: float, tcp: np.ndarray) -> CartesianStep:
        """One control step: integrate the TCP set-point, one IK step from `q_des`.

        Args:
            velocity: (3,) commanded TCP velocity, m/s (already capped).
            g: gripper action in [−1, 1]. dt: control period, s. tcp: (3,) measured TCP, m.
        """
        target = self.tcp_target + velocity * dt
        lead = target - tcp
        norm = float(np.linalg.norm(lead))
        if norm > LEAD_MAX_M:
            target = tcp + lead * (LEAD_MAX_M / norm)
        self.tcp_target = target
        q_goal = self.kin.solve_ik(target, self.rot, self.q_des, iterations=1)
        self.finger = finger_setpoint(g, self.kin.finger_max_m)
        return CartesianStep(q_goal=q_goal, finger=self.finger, tcp_target=target.copy())


def capped_velocity(action: np.ndarray, cap_mps: float = V_MAX_MPS) -> np.ndarray:
    """TCP velocity (3,) m/s for the first three action components, capped in norm at `cap_mps`."""
    v = np.asarray(action[:3], dtype=float) * V_MAX_MPS
    speed = float(np.linalg.norm(v))
    if speed > cap_mps:
        v *= cap_mps / speed
    return v


def grasp_closes(
    finger_cmd: float,
    opening: float,
    part_width: float,
    part_in_tcp: np.ndarray,
) -> bool:
    """The grasp rule: fingers commanded onto the part, closed on it, part centred at the TCP.

    Args:
        finger_cmd: per-finger set-point (m). opening: measured distance between fingers (m).
        part_width: width of the part across the fingers (m).
        part_in_tcp: (3,) part centre minus TCP, in the world frame (m).
    """
    return bool(
        2.0 * finger_cmd < part_width
        and abs(opening - part_width) <= GRASP_WIDTH_TOL_M
        and np.all(np.abs(part_in_tcp) <= GRASP_BOX_M)
    )


def grasp_releases(finger_cmd: float, part_width: float) -> bool:
    """The release rule: the fingers are commanded open wider than the part."""
    return 2.0 * finger_cmd > part_width + 0.004
