"""The one robot interface of the real side: a typed, step-level `Robot`.

The harness's episode (`real_bridge.supervision`: homing, setup, the policy loop, the safe stop,
the judge) drives a robot only through this protocol. Its shape follows LeRobot's `Robot`
(`connect()` / `get_observation()` / `send_action()` / `disconnect()`, `is_connected`) plus what a
supervisor needs: a hold (the safe stop a real controller accepts), the robot's safety state and
safety readings, the robot's own clock, and the scene station (reset, episode events, verdicts).

What the harness keeps in front of the robot: every chunk of joint targets is checked against the
profile's limits (`real_bridge.command_check`) before any of it reaches `send_action`; the robot
only executes targets it was given.

Implementations: `real_bridge.bridge_link.Ros2Robot` (a ros2_control robot over ROS 2) and
`real_bridge.mujoco_robot.MujocoRobot` (the twin's physics in process, stepped on its own clock;
no ROS). The runner's per-episode seam stays `embodied_eval.runner.backend.RobotBackend`:
`real_bridge.episodes.EpisodeBackend` runs episodes over any `Robot`; the technician's
`real_bridge.manual.ManualBackend` stays per-episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import BridgeConfig
from real_bridge.safety_state import DiagnosticReading

#: Two readings of a robot's clock closer than this are the same instant, s (a simulated clock
#: counts physics steps in floating point; schedules compare against it with this slack).
CLOCK_SLACK_S = 1e-9


@dataclass(frozen=True)
class TrackerPose:
    """The object tracker's latest pose.

    Attributes:
        received_s: when it arrived, s on the robot's clock (`Robot.now_s`).
        position: shape (3,) m in the base frame; quaternion: shape (4,) w first.
    """

    received_s: float
    position: np.ndarray
    quaternion: np.ndarray


@dataclass(frozen=True)
class Observation:
    """The latest state of the robot.

    Attributes:
        stamp_s: the robot's own timestamp of the joint-state sample, s.
        received_s: when the harness received it, s on `Robot.now_s`'s clock (its age is
            `now_s() - received_s`).
        joint_names: n names (arm joints, then gripper joints).
        position / velocity / effort: shape (n,) arrays in rad (m for fingers), rad/s, N·m (empty
            when the robot does not report velocity/effort).
        wrench: shape (6,) force (N) and torque (N·m) at the tool, or None without a sensor.
        image: the latest camera frame, (h, w, 3) uint8 RGB, or None (no camera, or compressed).
        object_pose: the tracker's latest pose, or None (no tracker, or nothing seen yet).
    """

    stamp_s: float
    received_s: float
    joint_names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    wrench: np.ndarray | None = None
    image: np.ndarray | None = None
    object_pose: TrackerPose | None = None

    def joints(self, names: tuple[str, ...], where: str = "the joint states") -> np.ndarray:
        """Positions of `names` in that order; EvalError naming the first one missing."""
        index = {n: i for i, n in enumerate(self.joint_names)}
        missing = [j for j in names if j not in index]
        if missing:
            raise EvalError(
                f"{where} do not name joint {missing[0]!r} of the profile's robot.arm_joints",
                key="robot.arm_joints",
            )
        return np.array([self.position[index[j]] for j in names], dtype=float)


@dataclass(frozen=True)
class JointCommand:
    """One command: arm joint targets and/or a gripper set-point, reached over `duration_s`.

    Attributes:
        positions: shape (n,) arm joint targets in the profile's `robot.arm_joints` order, rad
            (None: the arm is not commanded).
        duration_s: reach them over this long, s (a one-point trajectory's time_from_start).
        gripper_m: per-finger gripper set-point, m (None: the gripper is not commanded).
    """

    positions: np.ndarray | None
    duration_s: float
    gripper_m: float | None = None


@dataclass(frozen=True)
class AppliedAction:
    """The robot's confirmation that it applied a command.

    Attributes:
        joint_names / positions: the joints and the targets actually applied (after the robot's
            own limits), rad.
        stamp_s: the robot's timestamp of the control tick that applied it, s.
    """

    joint_names: tuple[str, ...]
    positions: np.ndarray
    stamp_s: float


@dataclass(frozen=True)
class SafetyState:
    """The robot's safety state now.

    Attributes:
        enabled: whether the robot reported itself enabled (None when unknown).
        protective_stop / emergency_stop: a stop is latched (until the scene is reset or the
            stop is cleared on the robot).
        deadman_hold: the robot holds because the harness's heartbeat stopped (False when the
            robot does not report it).
        active: names of the safety statuses currently at WARN or ERROR.
    """

    enabled: bool | None
    protective_stop: bool
    emergency_stop: bool
    deadman_hold: bool = False
    active: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamCounts:
    """What the robot streamed since it connected (stored with each episode).

    Attributes:
        states: joint-state samples received; images: camera frames received.
        peak_force_n: largest force magnitude in the wrench stream since `reset_peak_force`, N.
    """

    states: int
    images: int
    peak_force_n: float


@runtime_checkable
class Robot(Protocol):
    """A robot the harness's episode drives step by step (see the module docstring).

    Attributes:
        config: the robot profile (joints, limits, home, kinematics, deadlines, loop settings);
            `config.services.scene_reset` non-empty means the robot has a reset station.
        engine: the engine name recorded with its episodes ("ros2", "mujoco_robot", ...).
        last_hold_id: the command id of the last hold sent ("" before one); an episode record
            names it (`control.safe_stop_command`) so the robot's own log can be matched.
    """

    config: BridgeConfig
    engine: str
    last_hold_id: str

    @property
    def is_connected(self) -> bool:
        """True between a successful `connect()` and `disconnect()`."""
        ...

    def connect(self) -> None:
        """Find the robot and start supervising it (the deadman heartbeat); EvalError within
        `deadlines.discovery_s` when it is not there. Idempotent."""
        ...

    def disconnect(self) -> None:
        """Stop supervising and release the robot (it holds on its deadman). Idempotent."""
        ...

    def now_s(self) -> float:
        """The clock observations are stamped on arrival with, s (monotonic)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass on `now_s`'s clock (a simulated robot steps its physics)."""
        ...

    def get_observation(self) -> Observation | None:
        """The latest observation (None before the first). It may be stale: check its age."""
        ...

    def send_action(self, command: JointCommand) -> str:
        """Send one command (already checked by the harness); returns its command id."""
        ...

    def applied(self, command_id: str) -> AppliedAction | None:
        """The robot's confirmation of `command_id`, or None (not yet, or it never confirms)."""
        ...

    def commanded(self) -> np.ndarray | None:
        """The arm targets this harness sent last (None before one, or after a scene reset)."""
        ...

    def hold(self) -> str:
        """The safe stop: hold the arm where it is, as a real controller accepts it. Returns ""
        when the hold was sent, else why not (e.g. the last joint state is stale)."""
        ...

    def safety_state(self) -> SafetyState:
        """The robot's safety state now."""
        ...

    def safety_readings(self, since: int) -> tuple[list[DiagnosticReading], int]:
        """Safety statuses received after the `since`-th one, oldest first, and the new count.

        A robot reports each safety event as a `safety/<kind>` status at WARN or ERROR with the
        event's fields (`real_bridge.interface.safety_key_values`), OK when it clears, and its
        mode as `robot/state`; `real_bridge.safety_state.SafetyTracker` turns them into events.
        """
        ...

    def stream_counts(self) -> StreamCounts:
        """Messages received so far and the peak force since `reset_peak_force`."""
        ...

    def reset_peak_force(self) -> None:
        """Start a new peak-force window (one per episode)."""
        ...

    def reset_scene(self, manifest: Mapping[str, Any], timeout_s: float) -> tuple[bool, str]:
        """Ask the reset station to set the scene of `manifest` up; (success, its answer — JSON
        with the manifest's SHA-256 when it did). Only called when the profile has a station."""
        ...

    def announce(self, event: str) -> None:
        """Tell the robot side an episode event (`real_bridge.interface.episode_event` JSON)."""
        ...

    def verdicts_for(self, episode_id: str) -> list[tuple[str, float]]:
        """Verdict messages (JSON) the robot side published naming `episode_id`, with their
        arrival time on `now_s`'s clock, oldest first (the twin's oracle; [] for most robots)."""
        ...


def wait_until(
    robot: Robot, predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.005
) -> bool:
    """Re-check `predicate` every `poll_s` of the robot's clock until it holds (True) or
    `timeout_s` passed on that clock (False)."""
    deadline = robot.now_s() + timeout_s
    while not predicate():
        left = deadline - robot.now_s()
        if left <= 0:
            return False
        robot.sleep(min(poll_s, left))
    return True


def observation_age_s(robot: Robot) -> float:
    """Seconds since the robot's latest observation arrived (inf before the first)."""
    obs = robot.get_observation()
    return float("inf") if obs is None else robot.now_s() - obs.received_s


def hold_posture(robot: Robot) -> tuple[np.ndarray | None, str]:
    """Where the safe stop holds the arm: its measured posture in the profile's joint order —
    or None and why no hold may be sent (no joint state; one older than `state_stale_s`, which
    is not where the arm is, so holding "there" would move it: the robot's own deadman holds it
    when the harness stops supervising; joint states that do not name the arm's joints)."""
    obs = robot.get_observation()
    if obs is None:
        return None, "no joint state: hold not sent"
    age = robot.now_s() - obs.received_s
    if age > robot.config.deadlines.state_stale_s:
        return None, f"the last joint state is {age:.1f} s old: hold not sent"
    try:
        return obs.joints(robot.config.robot.arm_joints), ""
    except EvalError:
        return None, "the joint states do not name the controller's joints: hold not sent"
