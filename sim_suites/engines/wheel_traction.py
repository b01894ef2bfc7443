"""The wheel–floor contact of the holonomic base, computed the same way for both engines.

Neither engine models a mecanum or omni wheel without its rollers, so the base rides on planar
joints (x, y, yaw; `sim_suites.mobile_description`) and the floor acts on it through this law,
applied every physics step as generalized forces on those joints:

- The drive servos hold the wheels at the commanded base velocity v_w (the wheel odometry
  counts these turns). The floor pushes the base toward the wheels' velocity with a force that
  grows with the slip velocity Δv = v_w − v and saturates at Coulomb friction (a brush-type
  tyre law, linear then saturated, after Pacejka, *Tyre and Vehicle Dynamics*, 3rd ed., §3.2):

      F_t = min(k_s·N·|Δv|, μ·N) · Δv/|Δv|

  with N the weight the wheels carry (base, lift, arm, payload), μ the floor's friction
  coefficient (× `floor_friction_scale`) and k_s the slip stiffness per newton of load
  (÷ `wheel_slip_scale`: worn or soft wheels slip more).
- Rolling resistance opposes the base's own velocity: F_r = −c_rr·N · v/|v| (regularized below
  ROLLING_REGULARIZATION_MPS so the base can rest).
- The yaw axis follows the same law: torque k_s·N·ρ²·Δω (ρ the wheels' slip radius about the
  centre), capped at μ·N·r with r the contact radius, and rolling resistance c_rr·N·r.

So a slippery floor (μ × 0.1) cannot transmit the accelerations the base plans: the wheels turn
faster than the base moves, and the odometry, which counts wheel turns, runs ahead of the
robot. Units: N, m, s, rad.
"""

from __future__ import annotations

import math

import numpy as np

#: Friction coefficient of the wheels on the nominal floor (rubber on a sealed floor).
FLOOR_FRICTION = 0.8
#: Slip stiffness per newton of load, s/m: full friction (μ = 0.8) develops at 32 mm/s of slip.
#: A modelling choice (stiff enough that the nominal floor slips ~1 mm/s at cruise, soft enough
#: to integrate explicitly at the 2 ms physics step).
SLIP_STIFFNESS_S_PER_M = 25.0
#: Rolling resistance coefficient of the wheels: a modelling choice (rollers on a hard floor).
ROLLING_RESISTANCE = 0.03
#: Below this speed the rolling resistance grows linearly from zero (m/s).
ROLLING_REGULARIZATION_MPS = 0.005
#: Radius at which the wheels act on the yaw axis (m): the base's contact circle.
CONTACT_RADIUS_M = 0.22
#: Radius of the yaw slip stiffness (m): the rollers' lever about the centre is shorter than the
#: contact circle (and a stiffer yaw law would not integrate explicitly at 2 ms).
YAW_SLIP_RADIUS_M = 0.12
GRAVITY_MPS2 = 9.81


def traction_force(
    wheel_velocity: np.ndarray,
    base_velocity: np.ndarray,
    normal_n: float,
    friction: float,
    slip_scale: float = 1.0,
) -> np.ndarray:
    """The floor's planar force on the base (2,) N: traction toward the wheels' velocity plus
    rolling resistance (see the module docstring).

    Args:
        wheel_velocity: (2,) the velocity the wheels drive at, world frame, m/s.
        base_velocity: (2,) the base's velocity, world frame, m/s.
        normal_n: N, the wheels' load. friction: μ of the floor. slip_scale: ÷ the stiffness.
    """
    slip = np.asarray(wheel_velocity, dtype=float) - np.asarray(base_velocity, dtype=float)
    stiffness = SLIP_STIFFNESS_S_PER_M * normal_n / slip_scale
    force = stiffness * slip
    size = math.hypot(float(force[0]), float(force[1]))
    cap = friction * normal_n
    if size > cap:
        force *= cap / size
    return force + rolling_resistance(base_velocity, normal_n)


def rolling_resistance(base_velocity: np.ndarray, normal_n: float) -> np.ndarray:
    """F_r = −c_rr·N·v/|v| (2,) N, linear below ROLLING_REGULARIZATION_MPS."""
    v = np.asarray(base_velocity, dtype=float)
    speed = math.hypot(float(v[0]), float(v[1]))
    scale = ROLLING_RESISTANCE * normal_n / max(speed, ROLLING_REGULARIZATION_MPS)
    return -scale * v


def traction_torque(
    wheel_rate: float, base_rate: float, normal_n: float, friction: float, slip_scale: float = 1.0
) -> float:
    """The floor's torque on the base about the vertical, N·m (the yaw form of
    `traction_force`, at the contact radius)."""
    r, rho = CONTACT_RADIUS_M, YAW_SLIP_RADIUS_M
    drive = SLIP_STIFFNESS_S_PER_M * normal_n / slip_scale * rho * rho * (wheel_rate - base_rate)
    cap = friction * normal_n * r
    drive = min(cap, max(-cap, drive))
    rim = base_rate * r  # the contact circle's speed, m/s
    resist = ROLLING_RESISTANCE * normal_n * r * rim / max(abs(rim), ROLLING_REGULARIZATION_MPS)
    return drive - resist


class WheelDrive:
    """The base's wheels on one engine: the commanded velocity, the floor and the load.

    Args:
        normal_n: the weight the wheels carry, N. friction: μ of the floor. slip_scale: the
            episode's `wheel_slip_scale`.
    """

    def __init__(self, normal_n: float, friction: float, slip_scale: float = 1.0) -> None:
        self.normal_n = normal_n
        self.friction = friction
        self.slip_scale = slip_scale
        #: (3,) the wheels' velocity: vx, vy (world frame, m/s) and the yaw rate (rad/s).
        self.wheel = np.zeros(3)

    def generalized_force(self, base_velocity: np.ndarray) -> np.ndarray:
        """Forces on the base's x and y joints and the torque on its yaw joint, (3,) N, N·m.

        Args:
            base_velocity: (3,) the base joints' velocities (x, y m/s; yaw rad/s).
        """
        out = np.empty(3)
        out[:2] = traction_force(
            self.wheel[:2], base_velocity[:2], self.normal_n, self.friction, self.slip_scale
        )
        out[2] = traction_torque(
            float(self.wheel[2]),
            float(base_velocity[2]),
            self.normal_n,
            self.friction,
            self.slip_scale,
        )
        return out
