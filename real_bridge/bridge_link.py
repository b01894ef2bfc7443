"""`Ros2Robot`: the `real_bridge.robot.Robot` of a ros2_control robot reached over ROS 2 (names,
QoS and deadlines from the robot profile, `BridgeConfig`).

Subscriptions take raw (serialized) messages, so a recording holds exactly the bytes received
(raw camera images are recorded as PNG `sensor_msgs/CompressedImage`, `real_bridge.bridge_taps`);
the callbacks deserialize them for the harness's own bookkeeping. All shared state is guarded by
one lock because callbacks run on the session's executor thread. Commands are one-point
`trajectory_msgs/JointTrajectory` messages on the joint_trajectory_controller's topic (and the
gripper's); the hold is header stamp 0, the current posture of the arm controller's joints,
time_from_start 0.1 s. The clock (wall, or the robot's simulated /clock under
`loop.use_sim_time`) and the deadman heartbeat, which runs on its own thread from `connect` to
`disconnect` (when this process dies, it stops, and the robot holds), are
`real_bridge.bridge_clock.LinkClock`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
from rclpy.serialization import deserialize_message

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError
from real_bridge.bridge_clock import LinkClock
from real_bridge.bridge_config import BridgeConfig, QosSpec
from real_bridge.bridge_messages import (
    StateSample,
    applied_entry_of,
    diagnostic_readings_of,
    rgb_pixels_of,
    state_sample_of,
    trajectory_message,
    wrench_of,
)
from real_bridge.bridge_taps import RecordingTaps
from real_bridge.discovery import configure_process
from real_bridge.interface import HOLD_TIME_FROM_START_S
from real_bridge.robot import (
    AppliedAction,
    JointCommand,
    Observation,
    SafetyState,
    StreamCounts,
    TrackerPose,
    hold_posture,
)
from real_bridge.ros_node import (
    RosSession,
    qos_profile,
    stream_message_class,
)
from real_bridge.safety_state import ROBOT_STATE_STATUS, DiagnosticReading, SafetyTracker

#: How long connect waits for a robot-side heartbeat listener to appear, s (robots without one
#: are fine: the wait just ends).
HEARTBEAT_MATCH_S = 2.0
#: Streams the harness subscribes to (robot → harness).
INCOMING = (
    "joint_state",
    "wrench",
    "diagnostics",
    "verdict",
    "applied",
    "camera_image",
    "camera_compressed",
    "camera_info",
    "object_pose",
)


class Ros2Robot:
    """A robot over ROS 2 (see the module docstring); a `real_bridge.robot.Robot`.

    Args:
        config: the robot profile (names, QoS, deadlines); the session uses its domain id.
        heartbeat: publish the deadman heartbeat while connected (a watcher that only listens
            passes False).
    """

    engine = "ros2"

    def __init__(self, config: BridgeConfig, *, heartbeat: bool = True) -> None:
        self.config = config
        self.last_hold_id = ""
        self.heartbeat = heartbeat
        self.session: Any = None
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)
        #: The episode's recorder and the success detector's log (`attach_recorder`, ...).
        self.taps = RecordingTaps(config)
        self._command_ids = itertools.count(1)
        self._state: StateSample | None = None
        self._state_count = 0
        #: The latest joint states (for loss accounting and tests of the stream).
        self.recent_states: deque[StateSample] = deque(maxlen=4000)
        #: When a list, every received state's stamp (ns) is appended (for loss accounting).
        self.stamp_log: list[int] | None = None
        #: When a list, each joint state's publish→callback time (ns) is appended.
        self.transit_log: list[int] | None = None
        self._wrench: np.ndarray | None = None
        self._peak_force_n = 0.0
        #: (received_s, width, height, encoding) of the latest camera frame.
        self.image: tuple[float, int, int, str] | None = None
        self._image_count = 0
        self._pixels: np.ndarray | None = None
        self._object_pose: TrackerPose | None = None
        self._applied: deque[tuple[str, int, tuple[str, ...], np.ndarray]] = deque(maxlen=256)
        self._verdicts: list[tuple[str, float]] = []
        self._diagnostics: deque[DiagnosticReading] = deque(maxlen=10_000)
        self._diagnostics_total = 0
        self._arm_command: np.ndarray | None = None
        self.publishers: dict[str, Any] = {}
        self.subscriptions: dict[str, Any] = {}
        self.reset_client: Any = None
        self.sim_time = config.loop.use_sim_time
        self.clock = LinkClock(
            config,
            self._arrived,
            lambda: None if self._state is None else self._state.stamp_ns,
            lambda: self.publishers.get("heartbeat"),
            lambda: self.session is not None,
        )
        if self.sim_time:
            self.taps.clock_ns = lambda: round(self.clock.arrival_s() * 1e9)

    # ------------------------------------------------------------------ connection

    @property
    def is_connected(self) -> bool:
        return self.session is not None

    def connect(self) -> None:
        """Open the ROS session, wire every stream, start the heartbeat and wait (up to
        `deadlines.discovery_s`) for the robot."""
        if self.session is not None:
            return
        configure_process(self.config.domain_id, self.config.discovery)
        cfg = self.config
        self.session = RosSession(cfg.node_name, cfg.domain_id, cfg.namespace)
        try:
            self._wire()
            if self.heartbeat:
                self.start_heartbeat()
            self._wait_ready(cfg.deadlines.discovery_s)
        except BaseException:
            self.disconnect()
            raise

    def disconnect(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        self.taps.attach_recorder(None)
        self.taps.attach_judge_log(None)
        self.stop_heartbeat()
        session.close()

    def __enter__(self) -> Ros2Robot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # ------------------------------------------------------------------ wiring

    def _qos(self, stream: str) -> QosSpec:
        qos = self.config.qos
        if stream in ("manifest", "verdict", "episode"):
            return qos.events
        if stream in ("applied", "command", "gripper_command"):
            return qos.command
        if stream.startswith("camera"):
            return qos.camera
        spec: QosSpec = getattr(qos, stream)
        return spec

    def _wire(self) -> None:
        node = self.session.node
        topics = self.config.topics
        handlers = {
            "joint_state": self._on_joint_state,
            "wrench": self._on_wrench,
            "diagnostics": self._on_diagnostics,
            "verdict": self._on_verdict,
            "applied": self._on_applied,
            "camera_image": self._on_image,
            "camera_compressed": self._on_image,
            "camera_info": None,
            "object_pose": self._on_object_pose,
        }
        for stream in INCOMING:
            topic = getattr(topics, stream)
            if not topic:
                continue
            self.subscriptions[stream] = node.create_subscription(
                stream_message_class(stream),
                topic,
                self._make_callback(stream, handlers[stream]),
                qos_profile(self._qos(stream)),
                raw=True,
            )
        for stream in ("command", "gripper_command", "episode", "manifest", "heartbeat"):
            topic = getattr(topics, stream)
            if topic:
                self.publishers[stream] = node.create_publisher(
                    stream_message_class(stream), topic, qos_profile(self._qos(stream))
                )
        if self.config.services.scene_reset:
            from std_srvs.srv import Trigger

            self.trigger_type = Trigger
            self.reset_client = node.create_client(Trigger, self.config.services.scene_reset)
        if self.sim_time:
            self.subscriptions["clock"] = node.create_subscription(
                stream_message_class("clock"),
                topics.clock,
                self.clock.on_clock,
                qos_profile(self.config.qos.clock),
            )

    def _make_callback(self, stream: str, handler: Any) -> Any:
        cls = stream_message_class(stream)

        def callback(raw: bytes, info: Any) -> None:
            received_s = self.clock.arrival_s()
            transit = self.transit_log
            if transit is not None and stream == "joint_state":
                transit.append(time.time_ns() - int(info.get("source_timestamp", 0)))
            msg = self.taps.received(stream, raw, info, cls)
            if handler is not None:
                handler(msg if msg is not None else deserialize_message(raw, cls), received_s)

        return callback

    # ------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg: Any, received_s: float) -> None:
        sample = state_sample_of(msg, received_s)
        with self._lock:
            self._state = sample
            self._state_count += 1
            self.recent_states.append(sample)
            if self.stamp_log is not None:
                self.stamp_log.append(sample.stamp_ns)
            self._arrived.notify_all()

    def _on_wrench(self, msg: Any, received_s: float) -> None:
        wrench = wrench_of(msg)
        force = float(np.linalg.norm(wrench[:3]))
        with self._lock:
            self._wrench = wrench
            if np.isfinite(force):
                self._peak_force_n = max(self._peak_force_n, force)

    def _on_image(self, msg: Any, received_s: float) -> None:
        pixels = rgb_pixels_of(msg)
        with self._lock:
            self._image_count += 1
            self._pixels = pixels
            self.image = (
                received_s,
                int(getattr(msg, "width", 0)),
                int(getattr(msg, "height", 0)),
                str(getattr(msg, "encoding", getattr(msg, "format", ""))),
            )

    def _on_object_pose(self, msg: Any, received_s: float) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        pose = TrackerPose(
            received_s, np.array([p.x, p.y, p.z], dtype=float), np.array([o.w, o.x, o.y, o.z])
        )
        with self._lock:
            self._object_pose = pose

    def _on_diagnostics(self, msg: Any, received_s: float) -> None:
        readings = diagnostic_readings_of(msg, received_s)
        with self._lock:
            self._diagnostics.extend(readings)
            self._diagnostics_total += len(readings)

    def _on_verdict(self, msg: Any, received_s: float) -> None:
        with self._lock:
            self._verdicts.append((str(msg.data), received_s))

    def _on_applied(self, msg: Any, received_s: float) -> None:
        if not msg.points:
            return
        entry = applied_entry_of(msg)
        with self._lock:
            self._applied.append(entry)
            self._arrived.notify_all()

    # ------------------------------------------------------------------ the Robot interface

    def now_s(self) -> float:
        return self.clock.now_s()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def get_observation(self) -> Observation | None:
        with self._lock:
            state, wrench, pixels, pose = self._state, self._wrench, self._pixels, self._object_pose
        if state is None:
            return None
        return Observation(
            stamp_s=state.stamp_ns / 1e9,
            received_s=state.received_s,
            joint_names=state.names,
            position=state.position,
            velocity=state.velocity,
            effort=state.effort,
            wrench=wrench,
            image=pixels,
            object_pose=pose,
        )

    def send_action(self, command: JointCommand) -> str:
        robot = self.config.robot
        command_id = f"cmd/{next(self._command_ids)}"
        if command.positions is not None:
            arm = command.positions
            self._publish("command", robot.arm_joints, arm, command.duration_s, command_id)
            self._arm_command = np.array(command.positions, dtype=float)
        if command.gripper_m is not None and "gripper_command" in self.publishers:
            fingers = [command.gripper_m] * len(robot.gripper_joints)
            gripper_id = f"{command_id}/gripper"  # its echo is not the arm's
            self._publish(
                "gripper_command", robot.gripper_joints, fingers, command.duration_s, gripper_id
            )
        return command_id

    def _publish(
        self, stream: str, names: tuple[str, ...], positions: Any, duration_s: float, cid: str
    ) -> None:
        msg = trajectory_message(names, positions, duration_s, command_id=cid)
        self.publishers[stream].publish(msg)
        self.clock.sent_trajectory()
        self.taps.sent(stream, msg)

    def applied(self, command_id: str) -> AppliedAction | None:
        with self._lock:
            for cid, stamp_ns, names, positions in reversed(self._applied):
                if cid == command_id:
                    return AppliedAction(names, positions, stamp_ns / 1e9)
        return None

    def commanded(self) -> np.ndarray | None:
        return self._arm_command

    def hold(self) -> str:
        """Header stamp 0, the measured posture of the arm controller's joints only,
        time_from_start HOLD_TIME_FROM_START_S (what a joint_trajectory_controller accepts)."""
        posture, note = hold_posture(self)
        if posture is None:
            return note
        self.last_hold_id = self.send_action(JointCommand(posture, HOLD_TIME_FROM_START_S))
        return ""

    def safety_readings(self, since: int) -> tuple[list[DiagnosticReading], int]:
        with self._lock:
            total = self._diagnostics_total
            new = min(total - since, len(self._diagnostics))
            # From the right end only: the control loop asks every tick, the buffer holds 10 000.
            items = [self._diagnostics[-k] for k in range(new, 0, -1)]
            return items, total

    def safety_state(self) -> SafetyState:
        tracker = SafetyTracker()
        readings, _ = self.safety_readings(0)
        mode = ""
        for reading in readings:
            tracker.feed(reading)
            if reading.name == ROBOT_STATE_STATUS:
                mode = dict(reading.values).get("mode", mode)
        return SafetyState(
            enabled=tracker.enabled,
            protective_stop=tracker.protective_stop,
            emergency_stop=tracker.emergency_stop,
            deadman_hold=mode == "hold",
            active=tuple(sorted(tracker.active)),
        )

    def stream_counts(self) -> StreamCounts:
        with self._lock:
            return StreamCounts(self._state_count, self._image_count, self._peak_force_n)

    def reset_peak_force(self) -> None:
        with self._lock:
            self._peak_force_n = 0.0

    def reset_scene(self, manifest: Mapping[str, Any], timeout_s: float) -> tuple[bool, str]:
        """Publish the manifest, then call the scene-reset service (resent every
        `deadlines.resend_s`: it is idempotent)."""
        if self.reset_client is None:
            raise EvalError("this robot profile has no scene-reset service", key="scene_reset")
        self._publish_text("manifest", canonical_json(dict(manifest)))
        self._arm_command = None  # the station puts the arm in its scene's posture
        response = self.session.call(
            self.reset_client,
            self.trigger_type.Request(),
            timeout_s,
            resend_s=self.config.deadlines.resend_s,
        )
        return bool(response.success), str(response.message)

    def announce(self, event: str) -> None:
        self._publish_text("episode", event)

    def _publish_text(self, stream: str, text: str) -> None:
        msg = stream_message_class(stream)()
        msg.data = text
        self.publishers[stream].publish(msg)
        self.taps.sent(stream, msg)

    def verdicts_for(self, episode_id: str) -> list[tuple[str, float]]:
        out = []
        with self._lock:
            items = list(self._verdicts)
        for text, received_s in items:
            try:
                named = json.loads(text).get("episode_id", "")
            except (ValueError, AttributeError):
                named = ""
            if named == episode_id:
                out.append((text, received_s))
        return out

    # ------------------------------------------------------------------ the deadman heartbeat

    @property
    def heartbeat_alive(self) -> bool:
        """Whether this harness's deadman heartbeat is being published."""
        return self.clock.heartbeat_alive

    def start_heartbeat(self) -> None:
        self.clock.start_heartbeat()

    def stop_heartbeat(self) -> None:
        self.clock.stop_heartbeat()

    # ------------------------------------------------------------------ discovery

    def missing(self) -> list[str]:
        """What of the robot interface is not visible yet (empty when everything is)."""
        out = []
        if self.get_observation() is None:
            out.append(f"no messages on {self.config.topics.joint_state}")
        if self.sim_time and not self.clock.clock_heard:
            out.append(f"no clock on {self.config.topics.clock} (loop.use_sim_time)")
        if self.reset_client is not None and not self.reset_client.service_is_ready():
            out.append(f"service {self.config.services.scene_reset} not available")
        return out

    def visible_topics(self) -> list[str]:
        """Topics some other node publishes (to tell the user what *is* there)."""
        node = self.session.node
        out = []
        try:
            for name, _ in node.get_topic_names_and_types():
                publishers = node.get_publishers_info_by_topic(name)
                if any(p.node_name != node.get_name() for p in publishers):
                    out.append(name)
        except Exception:
            return out
        return sorted(out)

    def _wait_ready(self, timeout_s: float) -> None:
        """Wait until the state stream (and the reset service) is visible; EvalError otherwise.

        Then, when the robot side listens to the heartbeat (the twin, the deadman relay), wait
        until it has had time to receive one: it follows no command before.
        """
        if self.session.wait_for(lambda: not self.missing(), timeout_s, poll_s=0.01):
            self.clock.wait_heard(self.session, min(timeout_s, HEARTBEAT_MATCH_S))
            return
        missing = self.missing()
        if not missing:
            return
        visible = [t for t in self.visible_topics() if not t.startswith("/rosout")]
        raise EvalError(
            f"robot not found on ROS_DOMAIN_ID {self.config.domain_id} within {timeout_s:.1f} s: "
            f"{'; '.join(missing)} (topics seen: {', '.join(visible) or 'none'}); check the "
            "robot is running and the [topics]/[services] names and domain_id in the robot profile",
            key="robot",
        )
