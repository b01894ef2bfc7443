"""The harness's control loop on the real side: observe → policy → check → command, at the
protocol's rate, with the latency of every step measured.

Per step: read the latest joint state (and wrench, object pose), build the policy's observation
(`real_bridge.observation`; plus `wrench` (6,) and `image` (h, w, 3) uint8 RGB when the robot
streams them), call the policy, turn its action (or action chunk) into joint
targets, check the whole chunk against the profile's limits (`real_bridge.command_check`) and
only then send its first target on the joint_trajectory_controller's topic (a chunk's later
targets are sent on the following ticks without calling the policy). A policy that can hand over
its whole chunk (`act_chunk`, the remote policy) is asked for it, so a served chunk is checked and
sent exactly as an in-process policy's chunk is. Latency is measured from
taking the observation to the command being on the wire (after `publish` returned); a step whose
command is not on the wire before the next tick is due is a deadline miss; after an overrun the
loop skips the ticks it missed (counted) instead of sending a burst of commands.

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

from embodied_eval.console.live_state import OPERATOR_STOP
from embodied_eval.errors import EvalError
from real_bridge.command_check import command_problem


class RobotLost(EvalError):
    """The robot stopped answering during an episode (no fresh joint state)."""


class CommandRefused(EvalError):
    """A command (chunk) violated the robot profile's limits and was not sent."""


class OperatorStop(EvalError):
    """Someone asked the run to stop (the console's stop button or its API): the episode ends
    `aborted` with this `abort_cause`, after the safe-stop hold."""

    abort_cause = OPERATOR_STOP


def _no_check() -> None:
    return None


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


@dataclass
class LoopIO:
    """What the loop needs from the link and the adapter (so it runs on anything)."""

    state: Callable[[], Any]  # latest StateSample or None
    state_age_s: Callable[[], float]
    object_pose: Callable[[], Any]
    send_arm: Callable[[np.ndarray], None]
    send_gripper: Callable[[float], None] | None
    stopped: Callable[[], str]  # "" while no protective stop came from the robot
    extras: Callable[[], dict[str, np.ndarray]] = dict  # wrench, camera image (when present)
    check_operator: Callable[[], None] = _no_check  # raises OperatorStop once one is asked for


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
    io: LoopIO,
    *,
    robot: Any,
    rate_hz: float,
    max_steps: int,
    stale_s: float,
    has_tracker: bool,
    deadline_s: float,
    stats: LoopStats | None = None,
) -> tuple[LoopStats, str]:
    """Run one episode's loop. Returns (stats, how it ended: "steps", "done" or "robot_stop").

    Raises:
        RobotLost: no fresh joint state (the caller aborts the episode).
        CommandRefused: a chunk violated the limits (nothing of it was sent).
        OperatorStop: an operator asked to stop (checked every tick, before anything is sent).
    """
    stats = stats if stats is not None else LoopStats()
    with quiet_interpreter():
        return _loop(
            policy, adapter, io, robot, rate_hz, max_steps, stale_s, has_tracker, deadline_s, stats
        )


def _loop(
    policy: Any,
    adapter: Any,
    io: LoopIO,
    robot: Any,
    rate_hz: float,
    max_steps: int,
    stale_s: float,
    has_tracker: bool,
    deadline_s: float,
    stats: LoopStats,
) -> tuple[LoopStats, str]:
    period = 1.0 / rate_hz
    joint_space = getattr(policy, "command_space", "cartesian") == "joint_position"
    queue: list[np.ndarray] = []
    finger = adapter.finger_cmd
    act = getattr(policy, "act_chunk", None) or policy.act
    start = time.monotonic()
    tick = start
    for _ in range(max_steps):
        now = time.monotonic()
        if tick > now:
            time.sleep(tick - now)
        elif now - tick > period:  # overran: skip the missed ticks rather than burst commands
            stats.skipped_ticks += int((now - tick) / period)
            tick = now
        io.check_operator()
        stop = io.stopped()
        if stop:
            return stats, "robot_stop"
        if time.monotonic() - start > deadline_s:
            raise RobotLost(f"the episode loop ran past its deadline of {deadline_s:.0f} s")
        t_obs = time.monotonic()
        state = io.state()
        age = io.state_age_s()
        if state is None or age > stale_s:
            raise RobotLost(
                f"robot stopped answering: no joint state for {age:.2f} s (deadline {stale_s:.2f} s)"
            )
        if not queue:
            q = np.asarray(state.position, dtype=float)
            qd = np.asarray(state.velocity, dtype=float)
            obs = adapter.observe(q, qd, io.object_pose(), t_obs, has_tracker)
            obs.update(io.extras())
            action = act(obs)
            stats.policy_calls += 1
            chunk, finger = adapter.targets(action, q, joint_space)
            problem = command_problem(
                chunk, adapter.sent_q, adapter.sent_v, period, robot, adapter.tcp_of
            )
            if problem:
                raise CommandRefused(f"command refused before sending: {problem}")
            queue = list(chunk)
        target = queue.pop(0)
        io.send_arm(target)
        if io.send_gripper is not None:
            io.send_gripper(finger)
        adapter.sent(target, finger)
        t_wire = time.monotonic()
        stats.latencies_ms.append((t_wire - t_obs) * 1e3)
        stats.steps += 1
        if t_wire > tick + period:
            stats.deadline_misses += 1
        tick += period
        if getattr(policy, "done", False):
            return stats, "done"
    return stats, "steps"
