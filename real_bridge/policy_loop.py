"""The harness's control loop on the real side: observe → policy → check → command, at the
protocol's rate, with the latency of every step measured.

Per step: read the latest joint state (and wrench, object pose), build the policy's observation
(`real_bridge.observation`; plus `wrench` (6,) and `image` (h, w, 3) uint8 RGB when the robot
streams them), call the policy, turn its action (or action chunk) into joint
targets, check the whole chunk against the profile's limits (`real_bridge.command_check`) and
only then send its first target (`Robot.send_action`; a chunk's later targets are sent on the
following ticks without calling the policy). The loop drives only the `real_bridge.robot.Robot`
interface, so it runs alike on a robot over ROS 2 and on the in-process MuJoCo robot. A policy
that can hand over its whole chunk (`act_chunk`, the remote policy) is asked for it, so a served
chunk is checked and sent exactly as an in-process policy's chunk is. Latency is the harness's
own time (wall clock) from taking the observation to the command handed to the robot. Ticks,
deadlines and staleness are on the robot's clock (`Robot.now_s`): a step whose command was not
sent before the next tick is due is a deadline miss; after an overrun the loop skips the ticks
it missed (counted) instead of sending a burst of commands; past `deadlines.episode_s`, or
without a joint state fresher than `deadlines.state_stale_s`, the episode is aborted.

Ticks are on an absolute schedule (start + k · period), so a late step does not shift the ones
after it. While the loop runs (`quiet_interpreter`), Python's cyclic garbage collector is off —
a full collection over the harness's heap (simulator models, rclpy, the link's buffers) stalls
every thread for tens of milliseconds (64–86 ms measured with the twin's benchmark), up to four
20 ms control periods. Everything alive when the loop starts is frozen (`gc.freeze()`); the
collector is switched back on and the frozen objects released when the loop ends, so garbage is
collected between episodes as before. (No explicit full collection is forced: it would hold the
GIL — and the deadman heartbeat thread — for as long, and a robot holds after 100 ms without a
heartbeat.) The interpreter's thread switch interval is shortened for the loop as well: the ROS
executor thread that receives the robot's streams must not keep the control loop waiting for the
GIL for the default 5 ms.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.command_check import command_problem
from real_bridge.robot import CLOCK_SLACK_S, JointCommand, Observation, Robot


class RobotLost(EvalError):
    """The robot stopped answering during an episode (no fresh joint state)."""


class CommandRefused(EvalError):
    """A command (chunk) violated the robot profile's limits and was not sent."""


def no_operator_check() -> None:
    """The operator check of a run without a console: never asks to stop."""


@dataclass
class LoopStats:
    """Latency of one episode's loop (milliseconds) and its deadline misses."""

    latencies_ms: list[float] = field(default_factory=list)
    deadline_misses: int = 0
    steps: int = 0
    policy_calls: int = 0
    skipped_ticks: int = 0

    def summary(self) -> dict[str, float | int]:
        """p50/p99/max of the observation→command latency, misses and steps (JSON-ready)."""
        out: dict[str, float | int] = {
            "loop_steps": self.steps,
            "loop_policy_calls": self.policy_calls,
            "loop_deadline_misses": self.deadline_misses,
            "loop_skipped_ticks": self.skipped_ticks,
        }
        if self.latencies_ms:
            lat = np.asarray(self.latencies_ms)
            out["loop_latency_p50_ms"] = round(float(np.percentile(lat, 50)), 4)
            out["loop_latency_p99_ms"] = round(float(np.percentile(lat, 99)), 4)
            out["loop_latency_max_ms"] = round(float(lat.max()), 4)
        return out


#: The interpreter's thread switch interval during the loop, s (CPython's default is 0.005).
LOOP_SWITCH_INTERVAL_S = 0.0005


@contextlib.contextmanager
def quiet_interpreter() -> Iterator[None]:
    """No cyclic garbage collection and a short GIL switch interval inside the block (see the
    module docstring); both are restored on exit."""
    was_enabled = gc.isenabled()
    switch = sys.getswitchinterval()
    gc.freeze()
    gc.disable()
    sys.setswitchinterval(LOOP_SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(switch)
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def run_policy_loop(
    policy: Any,
    adapter: Any,
    robot: Robot,
    *,
    supervise: Callable[[Observation], str],
    max_steps: int,
    stats: LoopStats | None = None,
    check_operator: Callable[[], None] = no_operator_check,
) -> tuple[LoopStats, str]:
    """Run one episode's loop on `robot` at the profile's `loop.rate_hz`, on the robot's clock.

    Args:
        policy: the policy (`act`, or `act_chunk`; `command_space`, `done`).
        adapter: observation and action conversion (`real_bridge.observation.ArmAdapter`).
        robot: the connected robot; its profile gives the limits, rate and deadlines.
        supervise: called with each tick's observation; returns why the robot stopped (a
            protective stop it reported) or "" to go on.
        max_steps: control steps at most.
        stats: where to count (a new LoopStats by default).
        check_operator: raises `OperatorStop` once an operator asked to stop (every tick, before
            anything is sent).

    Returns:
        (stats, how it ended: "steps", "done" or "robot_stop").

    Raises:
        RobotLost: no fresh joint state, or the loop ran past `deadlines.episode_s` (the caller
            aborts the episode and holds the robot).
        CommandRefused: a chunk violated the limits (nothing of it was sent).
        OperatorStop: an operator asked to stop.
    """
    stats = stats if stats is not None else LoopStats()
    with quiet_interpreter():
        return _loop(policy, adapter, robot, supervise, max_steps, stats, check_operator)


def _loop(
    policy: Any,
    adapter: Any,
    robot: Robot,
    supervise: Callable[[Observation], str],
    max_steps: int,
    stats: LoopStats,
    check_operator: Callable[[], None],
) -> tuple[LoopStats, str]:
    cfg = robot.config
    period = 1.0 / cfg.loop.rate_hz
    stale_s, deadline_s = cfg.deadlines.state_stale_s, cfg.deadlines.episode_s
    gripper = bool(cfg.topics.gripper_command and cfg.robot.gripper_joints)
    has_tracker = bool(cfg.topics.object_pose)
    joint_space = getattr(policy, "command_space", "cartesian") == "joint_position"
    queue: list[np.ndarray] = []
    finger = adapter.finger_cmd
    act = getattr(policy, "act_chunk", None) or policy.act
    start = robot.now_s()
    tick = start
    for _ in range(max_steps):
        now = robot.now_s()
        if tick - now > CLOCK_SLACK_S:
            robot.sleep(tick - now)
        elif now - tick > period:  # overran: skip the missed ticks rather than burst commands
            stats.skipped_ticks += int((now - tick) / period)
            tick = now
        check_operator()
        t_obs, wall_obs = robot.now_s(), time.perf_counter()
        obs = robot.get_observation()
        if obs is not None and supervise(obs):
            return stats, "robot_stop"
        if t_obs - start > deadline_s:
            raise RobotLost(f"the episode loop ran past its deadline of {deadline_s:g} s")
        age = float("inf") if obs is None else t_obs - obs.received_s
        if obs is None or age > stale_s:
            raise RobotLost(
                f"robot stopped answering: no joint state for {age:.2f} s (deadline {stale_s:.2f} s)"
            )
        if not queue:
            q = np.asarray(obs.position, dtype=float)
            qd = np.asarray(obs.velocity, dtype=float)
            observation = adapter.observe(q, qd, obs.object_pose, t_obs, has_tracker)
            if obs.wrench is not None:
                observation["wrench"] = obs.wrench
            if obs.image is not None:
                observation["image"] = obs.image
            action = act(observation)
            stats.policy_calls += 1
            chunk, finger = adapter.targets(action, q, joint_space)
            problem = command_problem(
                chunk, adapter.sent_q, adapter.sent_v, period, cfg.robot, adapter.tcp_of
            )
            if problem:
                raise CommandRefused(f"command refused before sending: {problem}")
            queue = list(chunk)
        target = queue.pop(0)
        robot.send_action(JointCommand(target, period, finger if gripper else None))
        adapter.sent(target, finger)
        stats.latencies_ms.append((time.perf_counter() - wall_obs) * 1e3)
        stats.steps += 1
        if robot.now_s() > tick + period:
            stats.deadline_misses += 1
        tick += period
        if getattr(policy, "done", False):
            return stats, "done"
    return stats, "steps"
