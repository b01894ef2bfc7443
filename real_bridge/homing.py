"""Homing before a real episode, the way a lab homes an arm that may have ended anywhere.

The previous episode may have ended with the hand low over the table, on a part or in a drawer
handle, or in a protective stop; and a worn arm, or one carrying a tool its controller's model
does not know, settles short of any set-point under gravity (its servos have no integral
action). So homing is staged, and it ends when the arm has *settled* near home — not when it is
exactly there:

1. open the gripper (let go of whatever is held);
2. retreat: when the TCP is below the home posture's TCP, lift it straight up (Cartesian, the
   hand's orientation kept) by up to `robot.retreat_m` — a short path of one joint target per
   control period, checked as a whole against the profile's joint limits and workspace box
   (`real_bridge.command_check`) before any of it is sent; a path that would violate them is not
   sent (homing goes on without it);
3. a joint-space trajectory to `robot.home`, timed so no joint exceeds `HOMING_SPEED_SHARE` of
   its speed limit and the TCP's mean speed along the path stays at `HOMING_TCP_SPEED_MPS`;
4. done when the arm has come to rest (no joint moved more than `SETTLED_MOVE_RAD` over
   `SETTLED_FOR_S`) within `robot.home_tolerance_rad` of home on every joint. An arm at rest
   farther away is blocked (or its command was dropped): it does not get the same straight path
   again at once — it retreats upward from where it stopped and then gets one more homing
   trajectory; still blocked, homing fails with the joint and its distance from home.

Everything runs under `deadlines.homing_s` on the robot's clock and stops at once on a protective
stop or a lost robot. Homing drives only the `real_bridge.robot.Robot` interface; the TCP comes
from the kinematics entry the profile names (`robot.kinematics`; without one there is no retreat
and the trajectory is timed by the joints alone).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.command_check import command_problem
from real_bridge.policy_loop import RobotLost
from real_bridge.robot import (
    CLOCK_SLACK_S,
    JointCommand,
    Observation,
    Robot,
    observation_age_s,
)
from real_bridge.robot_profile import robot_kinematics
from real_bridge.safety_state import SafetyTracker

#: The arm is at rest when no joint moved more than this over SETTLED_FOR_S, rad (0.025 rad/s;
#: 10× the twin's position noise of 0.5 mrad).
SETTLED_MOVE_RAD = 0.005
#: The window of the rest check, s.
SETTLED_FOR_S = 0.2
#: The retreat lifts the TCP at most this fast, m/s (a slow, deliberate move near the table).
RETREAT_SPEED_MPS = 0.1
#: The retreat keeps this far below the workspace box's ceiling, m.
CEILING_MARGIN_M = 0.02
#: Share of the joints' speed limit the homing trajectory is timed with.
HOMING_SPEED_SHARE = 0.3
#: The homing trajectory is timed so the TCP's mean speed along it stays at or below this, m/s
#: (the reduced speed of collaborative operation: homing may pass near people and fixtures).
HOMING_TCP_SPEED_MPS = 0.25
#: Points the joint-space homing path is sampled at to measure the TCP's path length.
PATH_SAMPLES = 24
#: Shortest homing trajectory, s.
MIN_HOMING_S = 0.5
#: Homing trajectories sent at most (the first and one after a retreat from a blocked posture).
HOMING_TRIES = 2
#: Control period of the retreat path, s.
RETREAT_DT_S = 0.02


@dataclass
class HomingReport:
    """What homing did (stored with the episode as `control["homing_*"]`)."""

    retreats: int = 0
    trajectories: int = 0
    residual_rad: float = float("nan")
    seconds: float = 0.0
    resent: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "homing_retreats": self.retreats,
            "homing_trajectories": self.trajectories,
            "homing_s": round(self.seconds, 3),
        }
        if self.resent:
            out["homing_resent"] = self.resent
        if math.isfinite(self.residual_rad):
            out["homing_residual_rad"] = round(self.residual_rad, 4)
        if self.notes:
            out["homing_notes"] = "; ".join(self.notes)
        return out


def retreat_path(
    q: np.ndarray, robot: Any, kin: Any, lift_m: float, dt_s: float = RETREAT_DT_S
) -> tuple[np.ndarray, str]:
    """Joint targets (k, n) that lift the TCP straight up by up to `lift_m`, one per `dt_s`.

    The TCP is raised to min(z + lift_m, the workspace box's ceiling − CEILING_MARGIN_M) along a
    cosine profile (zero speed at both ends, peak speed ≤ RETREAT_SPEED_MPS), the hand's
    orientation held; each target comes from damped-least-squares IK started at the previous one.
    The whole path is checked with `command_problem` (joint position, velocity, acceleration
    limits and the workspace box) from `q` at rest.

    Returns:
        (targets, problem): targets of shape (k, n) (k = 0 when there is nothing to lift) and ""
        — or an empty path and why it must not be sent.
    """
    q = np.asarray(q, dtype=float)
    pos, rot = kin.forward(q)
    top = pos[2] + lift_m
    if robot.workspace_max:
        top = min(top, robot.workspace_max[2] - CEILING_MARGIN_M)
    rise = top - pos[2]
    if rise <= 1e-3:
        return np.zeros((0, q.size)), ""
    # Cosine profile: peak speed = π/2 · rise / T ≤ RETREAT_SPEED_MPS.
    steps = max(2, math.ceil(math.pi / 2 * rise / (RETREAT_SPEED_MPS * dt_s)))
    out = []
    current = q.copy()
    for k in range(1, steps + 1):
        s = 0.5 * (1.0 - math.cos(math.pi * k / steps))
        goal = pos + np.array([0.0, 0.0, s * rise])
        current = _ik_step(kin, goal, rot, current)
        out.append(current)
    path = np.array(out)
    tcp_of = (lambda x: kin.forward(x)[0]) if robot.workspace_min else None
    problem = command_problem(path, q, np.zeros_like(q), dt_s, robot, tcp_of)
    if problem:
        return np.zeros((0, q.size)), problem
    return path, ""


def homing_duration(q: np.ndarray, home: np.ndarray, robot: Any, kin: Any = None) -> float:
    """Seconds for the straight joint-space move q → home: the longest of MIN_HOMING_S, each
    joint's |Δq| / (HOMING_SPEED_SHARE · its speed limit), and (with kinematics) the TCP's path
    length along the move (PATH_SAMPLES segments) / HOMING_TCP_SPEED_MPS."""
    q, home = np.asarray(q, dtype=float), np.asarray(home, dtype=float)
    joints = np.abs(home - q) / (HOMING_SPEED_SHARE * np.asarray(robot.velocity_max))
    duration = max(MIN_HOMING_S, float(np.max(joints)))
    if kin is not None:
        s = np.linspace(0.0, 1.0, PATH_SAMPLES + 1)
        tcps = np.array([kin.forward(q + t * (home - q))[0] for t in s])
        length = float(np.sum(np.linalg.norm(np.diff(tcps, axis=0), axis=1)))
        duration = max(duration, length / HOMING_TCP_SPEED_MPS)
    return duration


def _ik_step(
    kin: Any, goal: np.ndarray, rot: np.ndarray, q: np.ndarray, iterations: int = 3
) -> np.ndarray:
    """A few damped-least-squares steps toward the TCP pose (goal, rot) from q (no posture pull:
    the arm moves only as the lift needs)."""
    for _ in range(iterations):
        rots, origins = kin.link_frames(q)
        tcp, r = kin.tcp_from_frames(rots[-1], origins[-1])
        err = np.empty(6)
        err[:3] = goal - tcp
        err[3:] = 0.5 * np.cross(r.T, rot.T).sum(axis=0)
        jac = kin.jacobian_from_frames(rots, origins, tcp)
        dq = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
        q = q + dq
    return np.asarray(q)


class Homing:
    """Staged homing of a connected robot (see the module docstring), on the robot's clock.

    Args:
        robot: the connected `real_bridge.robot.Robot`; its profile gives home, limits, the
            kinematics entry and the deadlines.
    A protective or emergency stop the robot reports while homing ends it, whichever episode the
    robot names in it (the next episode has not started on the robot's side yet).
    """

    def __init__(self, robot: Robot, interrupt: Callable[[], None] | None = None) -> None:
        self.robot_io = robot
        self.interrupt = interrupt  # raises to end homing at once (an operator's stop)
        self.config = robot.config
        self.robot = robot.config.robot
        self.tracker = SafetyTracker()
        _, self._diag_index = robot.safety_readings(0)
        self.report = HomingReport()
        self.kin: Any = robot_kinematics(self.robot)
        self.deadline = robot.now_s() + self.config.deadlines.homing_s

    def run(self) -> HomingReport:
        """Home the arm; returns what was done. Raises EvalError (blocked, timed out, protective
        stop) or RobotLost."""
        robot, io = self.robot, self.robot_io
        started = io.now_s()
        self.deadline = started + self.config.deadlines.homing_s
        home = np.asarray(robot.home, dtype=float)
        if self.config.topics.gripper_command and robot.gripper_joints:
            io.send_action(JointCommand(None, 0.3, robot.gripper_open))
            self._wait(0.4)  # let go of whatever is held before the arm moves
        self._retreat_if_low(home)
        for _ in range(HOMING_TRIES):
            # Timed by the joints' speed share (no kinematics passed: the TCP-speed timing is not
            # applied to the trajectory home).
            duration = homing_duration(self._q(), home, robot)
            self._send_confirmed(home, duration)
            self.report.trajectories += 1
            self._wait(duration)
            q = self._settle()
            error = np.abs(q - home)
            self.report.residual_rad = float(error.max())
            if np.all(error <= robot.home_tolerance_rad):
                self.report.seconds = io.now_s() - started
                return self.report
            # At rest but not home: blocked (or the command was dropped). Lift, then try again.
            self._retreat_if_low(home, always=True)
        worst = int(np.argmax(error))
        raise EvalError(
            f"homing blocked: the arm came to rest with {robot.arm_joints[worst]} "
            f"{error[worst]:.3f} rad from home (tolerance robot.home_tolerance_rad = "
            f"{robot.home_tolerance_rad:.3f} rad) after {self.report.trajectories} homing "
            f"trajectories and {self.report.retreats} retreats",
            key="homing",
        )

    # ------------------------------------------------------------------ steps

    def _send_confirmed(self, target: np.ndarray, duration_s: float) -> None:
        """Send a homing trajectory; on a robot that confirms applied commands, send it again
        when no confirmation came within `deadlines.resend_s` (a robot holding for a moment — a
        late heartbeat on a loaded machine — drops what arrives meanwhile)."""
        io = self.robot_io
        command_id = io.send_action(JointCommand(target, duration_s))
        if not self.config.topics.applied:
            return
        while True:
            until = io.now_s() + self.config.deadlines.resend_s
            while io.now_s() < until:
                if io.applied(command_id) is not None:
                    return
                self._wait(0.01)
            self.report.notes.append("homing trajectory not applied by the robot: sent again")
            self.report.resent += 1
            command_id = io.send_action(JointCommand(target, duration_s))

    def _retreat_if_low(self, home: np.ndarray, *, always: bool = False) -> None:
        if self.kin is None or self.robot.retreat_m <= 0:
            return
        self._settle()  # a path is planned from where the arm is now, not from a stale reading
        q = self._start_q()
        z, home_z = self.kin.forward(self._q())[0][2], self.kin.forward(home)[0][2]
        if z >= home_z and not always:
            return
        lift = (
            min(self.robot.retreat_m, max(0.0, home_z - z)) if not always else self.robot.retreat_m
        )
        path, problem = retreat_path(q, self.robot, self.kin, lift)
        if problem:
            self.report.notes.append(f"retreat not sent: {problem}")
            return
        if not len(path):
            return
        # One target per period on an absolute schedule. A sender held up (a loaded machine) does
        # not burst the targets it is late with: it sends the one due now, timed over the whole
        # time since the last one it sent, so the arm never moves faster than planned.
        io = self.robot_io
        start = io.now_s()
        sent = 0
        while sent < len(path):
            self._check()
            due = min(len(path), int((io.now_s() - start + CLOCK_SLACK_S) / RETREAT_DT_S) + 1)
            if due > sent:
                span = (due - sent) * RETREAT_DT_S
                io.send_action(JointCommand(path[due - 1], span))
                sent = due
            self._wait(max(0.0, start + sent * RETREAT_DT_S - io.now_s()), poll_s=0.005)
        self.report.retreats += 1
        self._settle()

    def _start_q(self) -> np.ndarray:
        """Where the retreat starts: the arm's set-point — the last target this harness sent when
        the arm is near it, else the measured posture. An arm that sags under a load it does not
        know rests below its set-point; a path starting from the measured posture would first
        command it further down, pressing a hand that rests on the table into it."""
        q = self._q()
        sent = self.robot_io.commanded()
        near = sent is not None and sent.shape == q.shape
        if near and np.all(np.abs(sent - q) <= self.robot.home_tolerance_rad):
            return np.array(sent, dtype=float)
        return q

    def _observation(self) -> Observation:
        obs = self.robot_io.get_observation()
        if obs is None:
            raise RobotLost("robot stopped answering during homing: no joint state")
        return obs

    def _q(self) -> np.ndarray:
        return self._observation().joints(self.robot.arm_joints)

    def _check(self) -> None:
        if self.interrupt is not None:
            self.interrupt()
        io = self.robot_io
        readings, self._diag_index = io.safety_readings(self._diag_index)
        for reading in readings:
            self.tracker.feed(reading)
        stop = self.tracker.stop_event
        if stop is not None:
            raise EvalError(f"{stop.kind} during homing: {stop.detail or stop.kind}", key="homing")
        if observation_age_s(io) > self.config.deadlines.state_stale_s:
            raise RobotLost("robot stopped answering during homing")
        if io.now_s() > self.deadline:
            raise EvalError(
                f"homing did not finish within {self.config.deadlines.homing_s:g} s "
                f"(deadlines.homing_s)",
                key="homing",
            )

    def _wait(self, seconds: float, *, poll_s: float = 0.01) -> None:
        io = self.robot_io
        until = io.now_s() + seconds
        while True:
            self._check()
            left = until - io.now_s()
            if left <= 0:
                return
            io.sleep(min(poll_s, left))

    def _settle(self) -> np.ndarray:
        """Wait until no arm joint has moved more than SETTLED_MOVE_RAD for SETTLED_FOR_S (from
        positions: a joint_state's velocity field is optional), judged on states that kept
        arriving through the window; returns the posture."""
        io = self.robot_io
        ref_q, ref_t = self._q(), io.now_s()
        while True:
            self._check()
            io.sleep(0.01)
            obs, now = self._observation(), io.now_s()
            q = obs.joints(self.robot.arm_joints)
            if np.any(np.abs(q - ref_q) > SETTLED_MOVE_RAD):
                ref_q, ref_t = q, now
            elif now - ref_t >= SETTLED_FOR_S and obs.received_s >= ref_t + SETTLED_FOR_S / 2:
                return q
