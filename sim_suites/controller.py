"""The robot controller and grasp model, identical for both engines.

Action (Box(-1, 1, (4,))): [vx, vy, vz, g]. The first three are a Cartesian TCP velocity command
scaled by V_MAX_MPS (the vector is capped at V_MAX_MPS in norm); g maps linearly to the finger
set-point, −1 = closed, +1 = fully open (4 cm per finger); the finger set-point moves toward it
at most at the fingers' rated speed (the URDF's 0.2 m/s), as a gripper drive does. The gripper keeps pointing down with a
fixed yaw. The controller integrates the velocity into a TCP set-point (kept within LEAD_MAX_M of
the measured TCP so a blocked arm does not wind up), solves damped-least-squares IK and sends
joint set-points with gravity and velocity feed-forward (nominal model) to the joint servos.

Weld rule of the *assisted* grasp mode (see `sim_suites.grasping`; by default grasps are held by
contact friction alone): when the fingers are commanded closed and have closed on the graspable
part (measured opening within GRASP_WIDTH_TOL_M of the part's width) while the part's centre is
within GRASP_BOX_M of the TCP, the part is welded to the hand. Commanding the fingers open past
the part, or a grasp-slip fault, releases it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_suites.robot import ARM_KP, ARM_KV, FINGER_MAX_M, HOME_Q, PandaKinematics

#: Full-scale TCP speed of the action (m/s).
V_MAX_MPS = 0.4
#: Set-points move joints at most this fraction of their rated speed.
JOINT_SPEED_FRACTION = 0.9
#: How far the TCP set-point may run ahead of the measured TCP (m).
LEAD_MAX_M = 0.05
#: Grasp detection: part centre within this box around the TCP (m, per axis x, y, z).
GRASP_BOX_M = np.array([0.02, 0.02, 0.03])
#: Grasp detection: measured opening within this of the part's width (m).
GRASP_WIDTH_TOL_M = 0.008


def finger_setpoint(g: float) -> float:
    """Finger set-point per finger (m) for the gripper action g ∈ [−1, 1]."""
    return min(1.0, max(0.0, (float(g) + 1.0) * 0.5)) * FINGER_MAX_M


@dataclass
class ControlCommand:
    """What the controller sends for one control step."""

    arm_cmd: np.ndarray  # (7,) servo set-points including the gravity offset, rad
    q_des: np.ndarray  # (7,) IK solution, rad
    finger: float  # per finger, m
    tcp_target: np.ndarray  # (3,) m


class ArmController:
    """Cartesian velocity → joint set-points for the Panda (see the module docstring)."""

    def __init__(self, kinematics: PandaKinematics) -> None:
        self.kin = kinematics
        self.rot = kinematics.home_tcp_rot
        self.q_des = HOME_Q.copy()
        self.tcp_target = kinematics.forward(HOME_Q)[0]
        self.finger = FINGER_MAX_M

    def reset(self, q: np.ndarray, finger: float = FINGER_MAX_M) -> None:
        self.q_des = q.copy()
        self.tcp_target = self.kin.forward(q)[0]
        self.finger = finger

    def command(
        self,
        velocity: np.ndarray,
        g: float,
        dt: float,
        q: np.ndarray,
        tcp: np.ndarray,
        rots: np.ndarray,
        origins: np.ndarray,
    ) -> ControlCommand:
        """One control step.

        Args:
            velocity: (3,) commanded TCP velocity, m/s (already capped).
            g: gripper action in [−1, 1]. dt: control period, s.
            q: (7,) measured arm joints; tcp: (3,) measured TCP; rots, origins: link frames at q.
        """
        target = self.tcp_target + velocity * dt
        lead = target - tcp
        norm = float(np.linalg.norm(lead))
        if norm > LEAD_MAX_M:
            target = tcp + lead * (LEAD_MAX_M / norm)
        self.tcp_target = target
        previous = self.q_des
        q_ik = self.kin.solve_ik(target, self.rot, previous, iterations=1)
        # Joint speed limiting, as robot controllers do: near a singularity the TCP falls behind
        # its set-point instead of the joints exceeding their rated speed.
        step_max = JOINT_SPEED_FRACTION * self.kin.vel_limit * dt
        self.q_des = previous + np.clip(q_ik - previous, -step_max, step_max)
        # Feed-forward through the set-point: gravity (nominal model) and the set-point's own
        # velocity, so the servo computes kp·(q* − q) + kv·(q̇* − q̇) + τ_g.
        qd_des = (self.q_des - previous) / dt
        ff = self.kin.gravity_from_frames(rots, origins) + ARM_KV * qd_des
        step = self.kin.finger_vel_limit * dt
        wanted = finger_setpoint(g)
        self.finger = min(self.finger + step, max(self.finger - step, wanted))
        return ControlCommand(
            arm_cmd=self.q_des + ff / ARM_KP,
            q_des=self.q_des.copy(),
            finger=self.finger,
            tcp_target=target.copy(),
        )


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
