"""The robot link's live view for the run's console and Foxglove, and the console's stop.

`LiveFeed` publishes a `real_bridge.robot.Robot` into the run's `embodied_eval.live_channel.LiveState` (the runner
hands it to the backend through `attach_live`):

- `LiveSink`, a sink on the link beside the recorder: every message of the recorded streams as it
  is received or sent (raw CDR; camera images as the recording's PNG `CompressedImage`, encoded
  only when a reader takes them) — what the Foxglove publisher forwards;
- its own thread, at FEED_HZ: the real episode in progress — phase, measured and commanded arm
  joints, contact force against its limit, the loop's latency and deadline misses, the heartbeat
  (deadman) and the robot's mode, protective and emergency stop — and each new camera frame the
  link received (for the page); new safety events as they arrive. The control loop itself does
  nothing for the console but check the operator's stop (one flag read per tick).

`check_operator` raises `OperatorStop` once someone asked the run to stop: the episode then ends
like any early end, with the safe-stop hold sent (`real_bridge.supervision`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from embodied_eval.live_channel import LiveState
from real_bridge.robot import Robot, observation_age_s
from real_bridge.safety_state import ROBOT_STATE_STATUS, SafetyTracker

#: How often the feed thread publishes the episode in progress, Hz.
FEED_HZ = 20.0
#: Contact-force limit shown against the measured force when the protocol sets none, N (the
#: incident log's default environment force limit and the twin's monitor).
DEFAULT_FORCE_LIMIT_N = 150.0


class LiveSink:
    """A link sink (as the recorder: `add_stream`, `write`) keeping the latest message per topic
    in the live state."""

    def __init__(self, live: LiveState) -> None:
        self.live = live

    def add_stream(self, topic: str, msgtype: str) -> None:
        from real_bridge.recording import ros2msg_definition

        self.live.ros_stream(topic, msgtype, ros2msg_definition(msgtype))

    def write(self, topic: str, data: Any, log_time_ns: int, publish_time_ns: int = 0) -> None:
        self.live.ros_message(topic, data, log_time_ns)


def force_limit_of(protocol: Any) -> float:
    """The protocol's environment contact-force limit (`[incidents.thresholds]`), else 150 N."""
    thresholds = getattr(protocol, "safety_thresholds", None) or {}
    try:
        return float(thresholds.get("environment_force_limit_n", DEFAULT_FORCE_LIMIT_N))
    except (TypeError, ValueError):
        return DEFAULT_FORCE_LIMIT_N


class LiveFeed:
    """Publishes one backend's robot and episodes into a `LiveState` (see the module docstring).

    Args:
        live: the run's live state.
        force_limit_n: the contact-force limit shown with the measured force.
    """

    def __init__(self, live: LiveState, force_limit_n: float) -> None:
        self.live = live
        self.force_limit_n = force_limit_n
        self.robot: Robot | None = None
        self.run: Any = None
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._diag_index = 0
        self._images = -1
        self._mode: dict[str, Any] = {}
        self._tracker = SafetyTracker()

    # ------------------------------------------------------------------ the robot

    def attach(self, robot: Robot) -> None:
        """Start publishing `robot` (after the backend connected it). A robot with recording
        taps (ROS 2) also hands every recorded message to the live state, for Foxglove."""
        self.detach()
        self.robot = robot
        taps = getattr(robot, "taps", None)
        if taps is not None:
            taps.attach_live(LiveSink(self.live))
        _, self._diag_index = robot.safety_readings(0)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="live-feed", daemon=True)
        self._thread.start()

    def detach(self) -> None:
        if self._thread is not None:
            self._halt.set()
            self._thread.join(2.0)
            self._thread = None
        if self.robot is not None:
            taps = getattr(self.robot, "taps", None)
            if taps is not None:
                taps.attach_live(None)
            self.robot = None

    # ------------------------------------------------------------------ the operator

    def check_operator(self) -> None:
        """Raise `OperatorStop` once an operator asked the run to stop."""
        self.live.check_operator_stop()

    # ------------------------------------------------------------------ episodes

    def episode_started(self, run: Any) -> None:
        spec = run.spec
        self.run = run
        self._tracker = SafetyTracker(spec.episode_id, time.monotonic())
        fields = {
            "episode_id": spec.episode_id,
            "task_id": spec.task_id,
            "family": spec.family,
            "drift": spec.drift_name,
            "attempt": spec.attempt,
            "phase": "setup",
            "force_limit_n": self.force_limit_n,
            "joint_names": list(run.config.robot.arm_joints),
        }
        self.live.clear_real(**fields)
        self.live.publish("real_episode", {**fields, "phase": "started"})

    def episode_ended(self, run: Any, episode: Any) -> None:
        self._publish()
        ended = {
            "episode_id": episode.episode_id,
            "phase": "ended",
            "status": episode.status,
            "status_reason": episode.status_reason,
            "abort_cause": episode.control.get("abort_cause", ""),
            "safe_stop_command": episode.control.get("safe_stop_command", ""),
        }
        self.live.update_real(**ended)
        self.live.publish("real_episode", ended)
        self.run = None

    # ------------------------------------------------------------------ the feed thread

    def _loop(self) -> None:
        period = 1.0 / FEED_HZ
        while not self._halt.wait(period):
            try:
                self._publish()
            except Exception as exc:  # never take the run down for its view
                self.live.update_real(feed_error=f"{type(exc).__name__}: {exc}")

    def _publish(self) -> None:
        robot, run = self.robot, self.run
        if robot is None or not robot.is_connected:
            return
        fields: dict[str, Any] = {}
        obs = robot.get_observation()
        arm = robot.config.robot.arm_joints
        if obs is not None:
            index = {n: i for i, n in enumerate(obs.joint_names)}
            joints = [j for j in arm if j in index]
            fields["measured"] = [round(float(obs.position[index[j]]), 5) for j in joints]
            fields["state_age_s"] = round(float(observation_age_s(robot)), 3)
            if obs.wrench is not None:
                fields["force_n"] = round(float(np.linalg.norm(np.asarray(obs.wrench)[:3])), 3)
        sent = robot.commanded()
        fields["commanded"] = None if sent is None else [round(float(v), 5) for v in sent]
        counts = robot.stream_counts()
        fields["peak_force_n"] = round(float(counts.peak_force_n), 3)
        safety = robot.safety_state()
        beating = getattr(robot, "heartbeat_alive", None)
        fields["heartbeat"] = bool(not safety.deadman_hold if beating is None else beating)
        self._read_diagnostics(robot)
        fields.update(self._mode)
        fields["protective_stop"] = self._tracker.protective_stop or safety.protective_stop
        fields["emergency_stop"] = self._tracker.emergency_stop or safety.emergency_stop
        if run is not None:
            fields.update(self._loop_fields(run))
        self.live.update_real(**fields)
        if counts.images != self._images and obs is not None and obs.image is not None:
            self._images = counts.images
            self.live.publish_frame(obs.image)

    def _read_diagnostics(self, robot: Robot) -> None:
        readings, self._diag_index = robot.safety_readings(self._diag_index)
        for reading in readings:
            if reading.name == ROBOT_STATE_STATUS:
                values = dict(reading.values)
                self._mode = {
                    "robot_mode": values.get("mode", ""),
                    "supervised": values.get("supervised", "") == "true",
                }
            event = self._tracker.feed(reading)
            if event is not None:
                self.live.publish(
                    "safety",
                    {
                        "episode_id": self._tracker.episode_id,
                        "event_kind": event.kind,
                        "detail": event.detail,
                        "t_s": event.t_s,
                    },
                )

    @staticmethod
    def _loop_fields(run: Any) -> dict[str, Any]:
        stats = run.stats
        latencies = stats.latencies_ms[-500:]  # the loop thread appends; a copy of the tail
        phase = "setup" if run.started_s is None else "running" if run.ended_s is None else "judge"
        out: dict[str, Any] = {
            "phase": phase,
            "steps": stats.steps,
            "deadline_misses": stats.deadline_misses,
            "skipped_ticks": stats.skipped_ticks,
        }
        if latencies:
            out["latency_ms"] = round(float(latencies[-1]), 3)
            out["latency_p99_ms"] = round(float(np.percentile(latencies, 99)), 3)
        return out
