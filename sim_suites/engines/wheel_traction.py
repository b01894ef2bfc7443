"""The wheel–floor contact of the holonomic base, computed the same way for both engines.

Neither engine models a mecanum or omni wheel without its rollers, so the base rides on planar
joints (x, y, yaw; `sim_suites.mobile_description`) and the floor acts on it through this law,
applied every physics step as generalized forces on those joints:

- The drive servos hold the wheels at the commanded base velocity v_w (the wheel odometry
  counts these turns). Where a wheel meets the floor the tread deflects like a brush of
  bristles (the LuGre / brush friction model: Canudas de Wit, Olsson, Åström and Lischinsky,
  "A new model for control of systems with friction", IEEE Trans. Automatic Control 40(3),
  1995): the deflection z integrates the slip velocity Δv = v_w − v, and the floor pushes the
  base with

      F_t = K·N·z + k_s·N·Δv,   |F_t| ≤ μ·N  (beyond it the tread slides: z is cut back so
                                              that K·N·|z| ≤ μ·N)

  with N the weight the wheels carry (base, lift, arm, payload), μ the floor's friction
  coefficient (× `floor_friction_scale`), K the tread stiffness and k_s the slip damping per
  newton of load (both ÷ `wheel_slip_scale`: worn or soft wheels slip more). Below the friction
  limit the base follows the wheels to within a fraction of a millimetre (a disturbance, e.g.
  the arm's reaction, springs back); at the limit it slides and the wheels turn on.
- Rolling resistance opposes the base's own velocity: F_r = −c_rr·N · v/|v| (regularized below
  ROLLING_REGULARIZATION_MPS so the base can rest).
- The yaw axis follows the same law about the centre: torque (K·N·θ + k_s·N·Δω)·ρ² (θ the
  tread's twist, ρ the wheels' slip radius), capped at μ·N·r with r the contact radius, and
  rolling resistance c_rr·N·r.

So a slippery floor (μ × 0.1) cannot transmit the accelerations the base plans: the wheels turn
faster than the base moves, and the odometry, which counts wheel turns, runs ahead of the
robot. Units: N, m, s, rad.
"""

from __future__ import annotations

import math

import numpy as np

#: Friction coefficient of the wheels on the nominal floor (rubber on a sealed floor).
FLOOR_FRICTION = 0.8
#: Slip damping per newton of load, s/m, and tread stiffness per newton of load, 1/m: modelling
#: choices (a ~5 Hz tread spring for the robot's mass, overdamped, that still integrates
#: explicitly at the 2 ms physics step).
SLIP_STIFFNESS_S_PER_M = 50.0
TREAD_STIFFNESS_PER_M = 100.0
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


def tread_force(
    deflection: float,
    slip_mps: float,
    normal_n: float,
    friction: float,
    slip_scale: float = 1.0,
) -> tuple[float, float]:
    """One axis of the tread law: the force K·N·z + k_s·N·Δv (N) capped at ±μ·N, and the
    deflection z (m) after the cut-back a slide makes (see the module docstring)."""
    stiffness = TREAD_STIFFNESS_PER_M * normal_n / slip_scale
    force = stiffness * deflection + SLIP_STIFFNESS_S_PER_M * normal_n / slip_scale * slip_mps
    cap = friction * normal_n
    if abs(force) > cap:
        force = math.copysign(cap, force)
        deflection = max(-cap / stiffness, min(cap / stiffness, deflection))
    return force, deflection


def rolling_resistance(speed_mps: float, normal_n: float) -> float:
    """The size of the rolling resistance c_rr·N at `speed_mps` (linear below
    ROLLING_REGULARIZATION_MPS), as a factor on the velocity: F_r = −factor·v, N·s/m."""
    return ROLLING_RESISTANCE * normal_n / max(speed_mps, ROLLING_REGULARIZATION_MPS)


class WheelDrive:
    """The base's wheels on one engine: the commanded velocity, the floor, the load and the
    tread's deflection (see the module docstring).

    Args:
        normal_n: the weight the wheels carry, N. friction: μ of the floor. slip_scale: the
            episode's `wheel_slip_scale`.
    """

    def __init__(self, normal_n: float, friction: float, slip_scale: float = 1.0) -> None:
        self.normal_n = normal_n
        self.friction = friction
        self.slip_scale = slip_scale
        #: (3,) the wheels' velocity: vx, vy (the base's frame, m/s) and the yaw rate (rad/s).
        self.wheel = np.zeros(3)
        #: The tread's deflection: x, y (m; a vector whose size the friction caps) and twist.
        self.deflection = [0.0, 0.0, 0.0]

    def generalized_force(
        self, vx: float, vy: float, rate: float, yaw: float, dt: float
    ) -> tuple[float, float, float]:
        """Forces on the base's x and y joints and the torque on its yaw joint (N, N, N·m) for
        the next physics step of `dt` s at the base's velocity (vx, vy m/s, world frame; yaw
        rate rad/s) and heading `yaw` (rad: the wheels turn with the base)."""
        n, mu, s = self.normal_n, self.friction, self.slip_scale
        bx, by, wr = self.wheel.tolist()
        cos, sin = math.cos(yaw), math.sin(yaw)
        wx, wy = cos * bx - sin * by, sin * bx + cos * by
        zx, zy, twist = self.deflection
        sx, sy = wx - vx, wy - vy
        zx, zy = zx + sx * dt, zy + sy * dt
        k, c = TREAD_STIFFNESS_PER_M * n / s, SLIP_STIFFNESS_S_PER_M * n / s
        fx, fy = k * zx + c * sx, k * zy + c * sy
        size, cap = math.hypot(fx, fy), mu * n
        if size > cap:
            fx, fy = fx * cap / size, fy * cap / size
            bristle = math.hypot(zx, zy)
            if bristle * k > cap:
                zx, zy = zx * cap / (k * bristle), zy * cap / (k * bristle)
        resist = rolling_resistance(math.hypot(vx, vy), n)
        rho, r = YAW_SLIP_RADIUS_M, CONTACT_RADIUS_M
        twist += (wr - rate) * dt
        torque, twist = tread_force(twist, wr - rate, n, mu * r / (rho * rho), s)
        torque *= rho * rho
        rim = rolling_resistance(abs(rate) * r, n) * r * r
        self.deflection = [zx, zy, twist]
        return fx - resist * vx, fy - resist * vy, torque - rim * rate
