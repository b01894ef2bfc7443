"""The command path from a policy's action to the joint servos: one implementation, run by both
halves of a pair (the sim episode, the in-process robot, the ROS twin) and by the calibration's
replay.

Harness side (`ArmCommandPath`), once per control period:

    action → Cartesian controller (TCP set-point, one IK step; `sim_suites.controller`)
           → TCP speed cap (`TCP_SPEED_MAX_MPS`)
           → joint limiter (`JointLimiter`: velocity and acceleration limits, braking-aware,
             with anti-windup of the TCP set-point)
           → one joint target, sent as a one-point trajectory of one control period, and the
             gripper's wanted opening.

Robot side (`JointFollower`, what a ros2_control joint_trajectory_controller and its hardware
do): a target takes effect after the actuator delay (`CommandQueue`, kept by the host: the sim
episode, the in-process robot or the twin node), is reached by linear interpolation over its
duration, passes the actuator's first-order low-pass (bandwidth), the finger set-point moves at
the gripper's rated speed, and the servos get the set-point with gravity and velocity
feed-forward from the nominal model (the servo law).

The delay, the bandwidth, the servo gain and the acceleration limits are DR knobs on the sim side
(`actuator_delay_s`, `actuator_bandwidth_hz`, `actuator_gain_scale`), drift or firmware
properties and the twin's gap on the real side, and calibration parameters — one name each.

Units: rad, rad/s, rad/s², m, s.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from sim_suites.controller import V_MAX_MPS, ArmController, ControlCommand, capped_velocity
from sim_suites.mobile_description import BaseLimits
from sim_suites.robot import SerialArm

#: Share of the velocity and acceleration limits the command path plans with (a margin for the
#: servo's own overshoot, as robot vendors recommend).
LIMIT_MARGIN = 0.9
#: The joint targets move the TCP at most this fast, m/s (1.25 × the actions' full scale of
#: 0.4 m/s): when observations arrive late the set-point must not race ahead of the arm.
TCP_SPEED_MAX_MPS = 0.5
#: Anti-windup: the controller's TCP set-point never leads the TCP of the target actually sent
#: by more than this, m — so when the limiter holds the arm back, the set-point does not run on
#: and carry the arm past where the policy stopped asking.
SETPOINT_LEAD_MAX_M = 0.01
#: Times closer than this are the same instant (float rounding), s.
SAME_INSTANT_S = 1e-9


@dataclass(frozen=True)
class JointLimits:
    """The limits a command path plans with (per arm joint).

    Attributes:
        lower, upper: position limits, rad. velocity_max: rad/s. acceleration_max: rad/s².
    """

    lower: np.ndarray
    upper: np.ndarray
    velocity_max: np.ndarray
    acceleration_max: np.ndarray

    @classmethod
    def of_arm(cls, kin: SerialArm, margin: float = LIMIT_MARGIN) -> JointLimits:
        """The arm's published limits (its description's positions and speeds, its datasheet's
        accelerations), velocity and acceleration scaled by `margin`."""
        return cls(
            lower=np.asarray(kin.lower, dtype=float),
            upper=np.asarray(kin.upper, dtype=float),
            velocity_max=margin * np.asarray(kin.vel_limit, dtype=float),
            acceleration_max=margin * np.asarray(kin.acceleration_max, dtype=float),
        )


def braking_speed(distance: np.ndarray, acceleration: np.ndarray, dt_s: float) -> np.ndarray:
    """The highest speed (≥ 0) from which a joint, stepping at `dt_s` and braking at
    `acceleration`, still stops within `distance` — including the step taken at that speed.

    Taking a step at v and then braking by a·Δt per step covers Δt·(v + (v − aΔt) + …), which
    equals v²/(2a) + vΔt/2 where v is a whole number of braking steps and exceeds it by at most
    aΔt²/8 in between; solving v²/(2a) + vΔt/2 = d − aΔt²/8 for v gives a speed that always
    stops in time.

    Args:
        distance: (n,) room left, rad (≤ 0 → 0). acceleration: (n,) rad/s². dt_s: s.
    """
    a = np.asarray(acceleration, dtype=float)
    room = np.maximum(0.0, np.asarray(distance, dtype=float) - a * dt_s * dt_s / 8.0)
    half = 0.5 * dt_s
    return np.asarray(a * (np.sqrt(half * half + 2.0 * room / a) - half))


def stopping_speed(distance: np.ndarray, acceleration: np.ndarray, dt_s: float) -> np.ndarray:
    """The highest speed (≥ 0) a step may take toward something `distance` away and still stop
    at or before it: `braking_speed`, or — close in — a last step that lands within the
    distance at a speed the next step can cancel (≤ a·Δt)."""
    d = np.maximum(0.0, np.asarray(distance, dtype=float))
    a = np.asarray(acceleration, dtype=float)
    return np.maximum(braking_speed(d, a, dt_s), np.minimum(d / dt_s, a * dt_s))


class JointLimiter:
    """Joint targets within velocity and acceleration limits that never overshoot their goal
    and can always stop inside the position limits (see `step`).

    Args:
        limits: the limits to plan with. dt_s: control period, s.
    """

    def __init__(self, limits: JointLimits, dt_s: float) -> None:
        self.limits = limits
        self.dt_s = dt_s
        n = len(limits.lower)
        self.sent_q = np.zeros(n)
        self.sent_v = np.zeros(n)

    def reset(self, q: np.ndarray, v: np.ndarray | None = None) -> None:
        """Start from posture `q` (rad) at velocity `v` (rad/s; default at rest)."""
        self.sent_q = np.array(q, dtype=float)
        self.sent_v = np.zeros_like(self.sent_q) if v is None else np.array(v, dtype=float)

    def step(self, goal: np.ndarray) -> np.ndarray:
        """The next target toward `goal` (rad, clipped to the position limits).

        Per joint: the speed toward the goal is at most what still brakes to a stop at the goal
        (so the target never passes it) and at most what still brakes before the position
        limit ahead; the change of speed is at most a·Δt (the braking step always is allowed,
        so from a state that can stop, every later state can stop); the speed at most v_max.
        The price of never passing the goal is a lag behind a goal that keeps moving: at speed
        v about v²/(2a) + vΔt/2 (2 mrad at 0.12 rad/s for the shoulder).
        """
        lim, dt = self.limits, self.dt_s
        a, vmax = lim.acceleration_max, lim.velocity_max
        q, v = self.sent_q, self.sent_v
        error = np.clip(np.asarray(goal, dtype=float), lim.lower, lim.upper) - q
        toward_goal = np.minimum(stopping_speed(np.abs(error), a, dt), np.abs(error) / dt)
        wanted = np.sign(error) * np.minimum(vmax, toward_goal)
        wanted = np.minimum(wanted, stopping_speed(lim.upper - q, a, dt))
        wanted = np.maximum(wanted, -stopping_speed(q - lim.lower, a, dt))
        v_new = np.clip(wanted, v - a * dt, v + a * dt)
        v_new = np.clip(v_new, -vmax, vmax)
        self.sent_q = q + v_new * dt
        self.sent_v = v_new
        return self.sent_q.copy()


@dataclass(frozen=True)
class PathCommand:
    """What the harness side sends for one control period.

    Attributes:
        target: (n,) joint target, rad (one-point trajectory). duration_s: its time from start.
        finger: the gripper's wanted opening per finger, m (the robot's gripper drive moves
            toward it at its rated speed). tcp_target: (3,) the controller's TCP set-point, m.
    """

    target: np.ndarray
    duration_s: float
    finger: float
    tcp_target: np.ndarray


class ArmCommandPath:
    """Harness side of the command path (see the module docstring).

    Args:
        kin: the arm's kinematics. limits: the limits to plan with. dt_s: control period, s.
    """

    def __init__(self, kin: SerialArm, limits: JointLimits, dt_s: float) -> None:
        self.kin = kin
        self.controller = ArmController(kin)
        self.limiter = JointLimiter(limits, dt_s)
        self.dt_s = dt_s
        # The TCP of the target last sent, and the target it belongs to (the step's own FK).
        self._sent_tcp: np.ndarray | None = None
        self._sent_tcp_of: np.ndarray | None = None

    @property
    def tcp_target(self) -> np.ndarray:
        return self.controller.tcp_target

    def reset(self, q: np.ndarray, finger: float | None = None, dt_s: float | None = None) -> None:
        """Start from the measured posture `q` (≥ n,: the arm's n joints first) at rest."""
        if dt_s is not None:
            self.dt_s = self.limiter.dt_s = dt_s
        n = self.kin.n
        self.controller.reset(np.asarray(q[:n], dtype=float), finger)
        self.limiter.reset(q[:n])

    def step(
        self,
        action: np.ndarray,
        q: np.ndarray,
        speed_cap_mps: float = V_MAX_MPS,
        frames: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> PathCommand:
        """One control period: the (4,) action [vx, vy, vz, g] at measured posture `q` (≥ n,).

        Args:
            action: (4,) in [−1, 1]. q: measured arm joints, rad.
            speed_cap_mps: cap on the commanded TCP velocity (speed-and-separation), m/s.
            frames: the link frames at q (rotations (n, 3, 3), origins (n, 3)) when known.
        """
        kin, ctl, dt = self.kin, self.controller, self.dt_s
        q_arm = np.asarray(q[: kin.n], dtype=float)
        rots, origins = frames if frames is not None else kin.link_frames(q_arm)
        tcp, _ = kin.tcp_from_frames(rots[-1], origins[-1])
        sent = self.limiter.sent_q
        # The IK step starts from the target last sent, not from a set-point of its own.
        ctl.q_des = sent.copy()
        cartesian = ctl.command(capped_velocity(action, speed_cap_mps), float(action[3]), dt, tcp)
        goal = cartesian.q_goal
        if self._sent_tcp_of is not sent or self._sent_tcp is None:  # reset from outside
            self._sent_tcp = kin.forward(sent)[0]
        goal_speed = float(np.linalg.norm(kin.forward(goal)[0] - self._sent_tcp)) / dt
        if goal_speed > TCP_SPEED_MAX_MPS:  # a stale or lagging arm must not be chased fast
            goal = sent + (goal - sent) * (TCP_SPEED_MAX_MPS / goal_speed)
        target = self.limiter.step(goal)
        # Anti-windup: the TCP set-point stays within SETPOINT_LEAD_MAX_M of the target's TCP.
        reached = kin.forward(target)[0]
        self._sent_tcp, self._sent_tcp_of = reached, self.limiter.sent_q
        lead = ctl.tcp_target - reached
        norm = float(np.linalg.norm(lead))
        if norm > SETPOINT_LEAD_MAX_M:
            ctl.tcp_target = reached + lead * (SETPOINT_LEAD_MAX_M / norm)
        return PathCommand(
            target=target,
            duration_s=dt,
            finger=cartesian.finger,
            tcp_target=ctl.tcp_target.copy(),
        )


class BaseLimiter:
    """A mobile base's velocity commands within its planned speed and acceleration limits
    (`sim_suites.mobile_description.BaseLimits`): the planar velocity's norm at most the speed
    cap, its change per period at most a·Δt in norm; the yaw rate and its change likewise.

    Args:
        limits: the base's limits. dt_s: control period, s.
    """

    def __init__(self, limits: BaseLimits, dt_s: float) -> None:
        self.limits = limits
        self.dt_s = dt_s
        self.sent = np.zeros(3)

    def reset(self, dt_s: float | None = None) -> None:
        """At rest; optionally a new control period (s)."""
        if dt_s is not None:
            self.dt_s = dt_s
        self.sent = np.zeros(3)

    def step(self, wanted: np.ndarray, speed_cap_mps: float | None = None) -> np.ndarray:
        """The next command (3,) toward `wanted` = (vx, vy m/s in the base frame, yaw rate
        rad/s), with the planar speed capped at `speed_cap_mps` (default: the limit)."""
        lim, dt = self.limits, self.dt_s
        cap = lim.speed_mps if speed_cap_mps is None else min(lim.speed_mps, speed_cap_mps)
        planar = np.asarray(wanted[:2], dtype=float)
        speed = math.hypot(float(planar[0]), float(planar[1]))
        if speed > cap:
            planar = planar * (cap / speed)
        change = planar - self.sent[:2]
        size = math.hypot(float(change[0]), float(change[1]))
        if size > lim.acceleration_mps2 * dt:
            change *= lim.acceleration_mps2 * dt / size
        rate = min(lim.yaw_rate_rps, max(-lim.yaw_rate_rps, float(wanted[2])))
        turn = lim.yaw_acceleration_rps2 * dt
        rate = min(self.sent[2] + turn, max(self.sent[2] - turn, rate))
        self.sent = np.array([self.sent[0] + change[0], self.sent[1] + change[1], rate])
        return self.sent.copy()


def first_order_alpha(bandwidth_hz: float, dt_s: float) -> float:
    """Discrete first-order low-pass factor α = 1 − exp(−2π f_c Δt) (1 when f_c ≤ 0 or
    infinite: no filter)."""
    if bandwidth_hz <= 0 or math.isinf(bandwidth_hz):
        return 1.0
    return 1.0 - math.exp(-2.0 * math.pi * bandwidth_hz * dt_s)


class JointFollower:
    """Robot side of the command path: joint targets in, servo set-points out (see the module
    docstring). The set-point moves once per update (`command`), i.e. once per control period
    of the robot's command interface.

    Args:
        kin: the arm's kinematics (its nominal gravity model feeds the servos forward).
        bandwidth_hz: the actuator's first-order cut-off, Hz (0: no filter).
        finger_speed_mps: the gripper's rated finger speed, m/s (the URDF's).
    """

    def __init__(
        self, kin: SerialArm, bandwidth_hz: float = 0.0, finger_speed_mps: float = 0.0
    ) -> None:
        self.kin = kin
        self.bandwidth_hz = bandwidth_hz
        self.finger_speed_mps = finger_speed_mps or float(kin.finger_vel_limit)
        self.q_des = np.zeros(kin.n)
        self.start = np.zeros(kin.n)
        self.goal = np.zeros(kin.n)
        self.elapsed_s = 0.0
        self.duration_s = 0.0
        self.finger = kin.finger_max_m
        self.finger_goal = kin.finger_max_m
        self.tcp_target = np.zeros(3)

    def reset(self, q: np.ndarray, finger: float | None = None) -> None:
        """Hold posture `q` (≥ n,) and, when given, the finger opening (m per finger)."""
        self.q_des = np.array(q[: self.kin.n], dtype=float)
        self.start = self.q_des.copy()
        self.goal = self.q_des.copy()
        self.elapsed_s = self.duration_s = 0.0
        self.tcp_target = self.kin.forward(self.q_des)[0]
        if finger is not None:
            self.finger = self.finger_goal = float(np.clip(finger, 0.0, self.kin.finger_max_m))

    def set_target(self, goal: np.ndarray, duration_s: float) -> None:
        """A new one-point trajectory: reach `goal` (n,) over `duration_s` from the set-point."""
        self.start = self.q_des.copy()
        self.goal = np.array(goal, dtype=float)
        self.elapsed_s = 0.0
        self.duration_s = max(0.0, duration_s)

    def set_finger(self, opening_m: float) -> float:
        """The gripper's wanted opening per finger (m, clipped to its travel); returns it."""
        self.finger_goal = float(np.clip(opening_m, 0.0, self.kin.finger_max_m))
        return self.finger_goal

    def hold_here(self) -> None:
        """Freeze the servo set-point where it is now (a stop, not a new target)."""
        self.set_target(self.q_des, 0.0)
        self.finger_goal = self.finger

    def command(self, dt: float, rots: np.ndarray, origins: np.ndarray) -> ControlCommand:
        """One update of the controller: the servo command for the next control period.

        Args:
            dt: control period, s. rots, origins: link frames at the measured posture (for the
                nominal gravity feed-forward).
        """
        self.elapsed_s += dt
        s = 1.0 if self.duration_s <= 0 else min(1.0, self.elapsed_s / self.duration_s)
        ramp = self.start + s * (self.goal - self.start)
        previous = self.q_des
        self.q_des = previous + first_order_alpha(self.bandwidth_hz, dt) * (ramp - previous)
        qd_des = (self.q_des - previous) / dt
        ff = self.kin.gravity_from_frames(rots, origins) + self.kin.arm_kv * qd_des
        step = self.finger_speed_mps * dt
        self.finger = min(self.finger + step, max(self.finger - step, self.finger_goal))
        self.tcp_target = self.kin.forward(self.q_des)[0]
        return ControlCommand(
            arm_cmd=self.q_des + ff / self.kin.arm_kp,
            q_des=self.q_des.copy(),
            finger=self.finger,
            tcp_target=self.tcp_target.copy(),
        )


Item = TypeVar("Item")


class CommandQueue(Generic[Item]):
    """Commands waiting for their actuator delay: each is due at its arrival plus the delay and
    is taken at the first instant at or after that (up to `SAME_INSTANT_S` of rounding), in the
    order they arrived."""

    def __init__(self) -> None:
        self._items: deque[tuple[float, Item]] = deque()

    def push(self, due_s: float, item: Item) -> None:
        self._items.append((due_s, item))

    def due(self, now_s: float) -> Iterator[Item]:
        """Remove and yield the commands due at `now_s`."""
        items = self._items
        while items and items[0][0] <= now_s + SAME_INSTANT_S:
            yield items.popleft()[1]

    def clear(self) -> None:
        self._items.clear()

    def __bool__(self) -> bool:
        return bool(self._items)


class RobotController:
    """The robot's side of the command path as one piece: commands wait in a `CommandQueue` for
    the actuator delay, then reach the `JointFollower`, which makes the servo command once per
    control period. The sim episode runs it as the robot does (`PandaTaskEnv`).

    Args:
        kin: the arm's kinematics. bandwidth_hz: the actuator's cut-off (0: no filter).
    """

    def __init__(self, kin: SerialArm, bandwidth_hz: float = 0.0) -> None:
        self.follower = JointFollower(kin, bandwidth_hz)
        self.queue: CommandQueue[tuple[np.ndarray, float, float]] = CommandQueue()
        self.delay_s = 0.0

    def reset(self, q: np.ndarray, delay_s: float, bandwidth_hz: float) -> None:
        """Hold the measured posture `q` (≥ n + 2,: arm and fingers) with this episode's delay
        (s) and actuator bandwidth (Hz); pending commands are dropped."""
        self.queue.clear()
        self.delay_s = delay_s
        self.follower.bandwidth_hz = bandwidth_hz
        self.follower.reset(q, finger=float(q[self.follower.kin.n]))

    def send(self, now_s: float, target: np.ndarray, duration_s: float, finger: float) -> None:
        """A one-point trajectory (n,) rad over `duration_s` and the gripper's wanted opening
        (m per finger), arriving at `now_s`: due `delay_s` later."""
        self.queue.push(now_s + self.delay_s, (np.array(target, dtype=float), duration_s, finger))

    def update(
        self, now_s: float, dt: float, rots: np.ndarray, origins: np.ndarray
    ) -> ControlCommand:
        """The commands due at `now_s` reach the follower; the servo command for the period."""
        follower = self.follower
        for target, duration, finger in self.queue.due(now_s):
            follower.set_target(target, duration)
            follower.set_finger(finger)
        return follower.command(dt, rots, origins)
