"""The harness's side of the wire: subscriptions, publishers, the heartbeat and the scene-reset
client of one robot (names from the robot profile, `BridgeConfig.topics`).

Subscriptions take raw (serialized) messages, so a recording holds exactly the bytes received
(raw camera images are recorded as PNG `sensor_msgs/CompressedImage`); the callbacks deserialize
them for the harness's own bookkeeping. All shared state is guarded by one lock because callbacks
run on the session's executor thread. The heartbeat (`std_msgs/Header`, the deadman) runs on its
own thread from `connect` to `close`: when this process dies, it stops, and the robot holds.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import BridgeConfig, QosSpec
from real_bridge.bridge_messages import StateSample as StateSample
from real_bridge.bridge_messages import (
    applied_entry_of,
    diagnostic_readings_of,
    png_cdr,
    rgb_pixels_of,
    state_sample_of,
    wrench_of,
)
from real_bridge.bridge_messages import compressed_topic as compressed_topic
from real_bridge.detector import JudgeLog
from real_bridge.recording import McapRecorder
from real_bridge.ros_node import (
    STREAM_TYPES,
    RosSession,
    ns_to_stamp,
    qos_profile,
    stream_message_class,
)
from real_bridge.safety_state import DiagnosticReading

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


class BridgeLink:
    """Opens a RosSession and wires every stream of `config` to it.

    Args:
        config: the bridge configuration (names, QoS); the session uses its domain id.
        heartbeat: publish the deadman heartbeat while the link is open.
    """

    def __init__(self, config: BridgeConfig, *, heartbeat: bool = True) -> None:
        self.config = config
        self.session = RosSession(config.node_name, config.domain_id, config.namespace)
        self._lock = threading.RLock()
        #: Notified whenever a joint state or an applied-command echo arrives.
        self._arrived = threading.Condition(self._lock)
        self._recorder: McapRecorder | None = None
        self._judge_log: JudgeLog | None = None
        self._camera_count = 0
        self._command_ids = itertools.count(1)
        self.state: StateSample | None = None
        self.state_count = 0
        self.recent_states: deque[StateSample] = deque(maxlen=4000)
        #: When a list, every received state's stamp (ns) is appended (for loss accounting).
        self.stamp_log: list[int] | None = None
        #: When a list, each joint state's publish→callback time (ns) is appended.
        self.transit_log: list[int] | None = None
        self.wrench: np.ndarray | None = None
        self.peak_force_n = 0.0
        self.image: tuple[float, int, int, str] | None = None  # (received_s, w, h, encoding)
        self.image_count = 0
        #: The latest raw camera frame as an (h, w, 3) RGB array (None before one, or compressed).
        self.pixels: np.ndarray | None = None
        self.object_pose: tuple[float, np.ndarray, np.ndarray] | None = None
        self.applied: deque[tuple[str, int, tuple[str, ...], np.ndarray]] = deque(maxlen=256)
        self.verdicts: list[tuple[str, float]] = []
        self.diagnostics: deque[DiagnosticReading] = deque(maxlen=10_000)
        self.diagnostics_total = 0
        #: The last arm target this link sent (None before one, or after a scene reset).
        self.arm_command: np.ndarray | None = None
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        try:
            self._wire()
        except BaseException:
            self.session.close()
            raise
        if heartbeat:
            self.start_heartbeat()

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
        self.subscriptions = {}
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
        self.publishers: dict[str, Any] = {}
        for stream in ("command", "gripper_command", "episode", "manifest", "heartbeat"):
            topic = getattr(topics, stream)
            if topic:
                self.publishers[stream] = node.create_publisher(
                    stream_message_class(stream), topic, qos_profile(self._qos(stream))
                )
        self.reset_client: Any = None
        if self.config.services.scene_reset:
            from std_srvs.srv import Trigger

            self.trigger_type = Trigger
            self.reset_client = node.create_client(Trigger, self.config.services.scene_reset)

    def _make_callback(self, stream: str, handler: Any) -> Any:
        topic = getattr(self.config.topics, stream)
        cls = stream_message_class(stream)

        def callback(raw: bytes, info: Any) -> None:
            received_s = time.monotonic()
            transit = self.transit_log
            if transit is not None and stream == "joint_state":
                transit.append(time.time_ns() - int(info.get("source_timestamp", 0)))
            msg = None
            sinks = [s for s in (self._recorder, self._judge_log) if s is not None]
            if sinks and stream in self.config.record_streams:
                log_ns = int(info.get("received_timestamp", 0)) or time.time_ns()
                source_ns = int(info.get("source_timestamp", 0))
                if stream == "camera_image":
                    self._camera_count += 1
                    if self._camera_count % self.config.loop.camera_every == 0:
                        msg = deserialize_message(raw, cls)
                        png = png_cdr(msg)  # encoded once, on the recorder's writer thread
                        for sink in sinks:
                            sink.write(compressed_topic(topic), png, log_ns, source_ns)
                else:
                    for sink in sinks:
                        sink.write(topic, raw, log_ns, source_ns)
            if handler is not None:
                handler(msg if msg is not None else deserialize_message(raw, cls), received_s)

        return callback

    # ------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg: Any, received_s: float) -> None:
        sample = state_sample_of(msg, received_s)
        with self._lock:
            self.state = sample
            self.state_count += 1
            self.recent_states.append(sample)
            if self.stamp_log is not None:
                self.stamp_log.append(sample.stamp_ns)
            self._arrived.notify_all()

    def _on_wrench(self, msg: Any, received_s: float) -> None:
        wrench = wrench_of(msg)
        force = float(np.linalg.norm(wrench[:3]))
        with self._lock:
            self.wrench = wrench
            if np.isfinite(force):
                self.peak_force_n = max(self.peak_force_n, force)

    def _on_image(self, msg: Any, received_s: float) -> None:
        pixels = rgb_pixels_of(msg)
        with self._lock:
            self.image_count += 1
            self.pixels = pixels
            self.image = (
                received_s,
                int(getattr(msg, "width", 0)),
                int(getattr(msg, "height", 0)),
                str(getattr(msg, "encoding", getattr(msg, "format", ""))),
            )

    def _on_object_pose(self, msg: Any, received_s: float) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        with self._lock:
            self.object_pose = (
                received_s,
                np.array([p.x, p.y, p.z], dtype=float),
                np.array([o.w, o.x, o.y, o.z], dtype=float),
            )

    def _on_diagnostics(self, msg: Any, received_s: float) -> None:
        readings = diagnostic_readings_of(msg, received_s)
        with self._lock:
            self.diagnostics.extend(readings)
            self.diagnostics_total += len(readings)

    def _on_verdict(self, msg: Any, received_s: float) -> None:
        with self._lock:
            self.verdicts.append((str(msg.data), received_s))

    def _on_applied(self, msg: Any, received_s: float) -> None:
        if not msg.points:
            return
        entry = applied_entry_of(msg)
        with self._lock:
            self.applied.append(entry)
            self._arrived.notify_all()

    # ------------------------------------------------------------------ reading state

    def reset_peaks(self) -> None:
        """Start a new peak-force window (one per episode)."""
        with self._lock:
            self.peak_force_n = 0.0

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Block until `predicate()` holds, re-checking whenever a state or echo arrives.

        `predicate` runs with the link's lock held. Returns its final value (False on timeout).
        """
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._arrived.wait(remaining)
            return True

    def latest_state(self) -> StateSample | None:
        with self._lock:
            return self.state

    def state_age_s(self) -> float:
        """Seconds since the last joint state arrived (inf before the first)."""
        with self._lock:
            return float("inf") if self.state is None else time.monotonic() - self.state.received_s

    def diagnostics_since(self, index: int) -> tuple[list[DiagnosticReading], int]:
        """Diagnostic readings received after the `index`-th one; returns (readings, new index)."""
        with self._lock:
            total = self.diagnostics_total
            new = min(total - index, len(self.diagnostics))
            # From the right end only: the control loop asks every tick, the buffer holds 10 000.
            items = [self.diagnostics[-k] for k in range(new, 0, -1)]
            return items, total

    def verdicts_for(self, episode_id: str) -> list[tuple[str, float]]:
        """Verdict messages naming `episode_id` (text, arrival time), oldest first."""
        out = []
        with self._lock:
            items = list(self.verdicts)
        for text, received_s in items:
            try:
                named = json.loads(text).get("episode_id", "")
            except (ValueError, AttributeError):
                named = ""
            if named == episode_id:
                out.append((text, received_s))
        return out

    def applied_echo(self, command_id: str) -> tuple[int, tuple[str, ...], np.ndarray] | None:
        with self._lock:
            for cid, stamp_ns, names, positions in reversed(self.applied):
                if cid == command_id:
                    return stamp_ns, names, positions
        return None

    def state_with_stamp(self, stamp_ns: int) -> StateSample | None:
        with self._lock:
            for sample in reversed(self.recent_states):
                if sample.stamp_ns == stamp_ns:
                    return sample
                if sample.stamp_ns < stamp_ns:
                    return None
        return None

    # ------------------------------------------------------------------ recording

    def attach_recorder(self, recorder: McapRecorder | None) -> None:
        """Start (or, with None, stop) writing the recorded streams to `recorder`."""
        if recorder is not None:
            self._camera_count = 0
            for stream in self.config.record_streams:
                topic = getattr(self.config.topics, stream)
                if not topic:
                    continue
                if stream == "camera_image":
                    recorder.add_stream(compressed_topic(topic), STREAM_TYPES["camera_compressed"])
                else:
                    recorder.add_stream(topic, STREAM_TYPES[stream])
        self._recorder = recorder

    def attach_judge_log(self, log: JudgeLog | None) -> None:
        """Start (or, with None, stop) keeping the detector's messages: exactly what the
        recorder is given for the streams it records (also when nothing is recorded)."""
        if log is not None:
            self._camera_count = 0
        self._judge_log = log

    def _record_outgoing(self, stream: str, msg: Any) -> None:
        sinks = [s for s in (self._recorder, self._judge_log) if s is not None]
        if sinks and stream in self.config.record_streams:
            now = time.time_ns()
            data = bytes(serialize_message(msg))
            for sink in sinks:
                sink.write(getattr(self.config.topics, stream), data, now, now)

    # ------------------------------------------------------------------ sending

    def publish_text(self, stream: str, text: str) -> None:
        """Publish a std_msgs/String on the manifest or episode-event topic (and record it)."""
        msg = stream_message_class(stream)()
        msg.data = text
        self.publishers[stream].publish(msg)
        self._record_outgoing(stream, msg)

    def trajectory(
        self,
        names: Sequence[str],
        positions: Sequence[float] | np.ndarray,
        time_from_start_s: float,
        *,
        stamp_ns: int = 0,
        command_id: str = "",
    ) -> Any:
        """A one-point trajectory_msgs/JointTrajectory (header stamp 0 = start now)."""
        from trajectory_msgs.msg import JointTrajectoryPoint

        msg = stream_message_class("command")()
        ns_to_stamp(stamp_ns, msg.header.stamp)
        msg.header.frame_id = command_id
        msg.joint_names = list(names)
        point = JointTrajectoryPoint()
        point.positions = [float(p) for p in positions]
        whole = int(time_from_start_s)
        point.time_from_start.sec = whole
        point.time_from_start.nanosec = round((time_from_start_s - whole) * 1e9)
        msg.points = [point]
        return msg

    def publish_command(
        self,
        names: Sequence[str],
        positions: Sequence[float] | np.ndarray,
        time_from_start_s: float,
        *,
        stream: str = "command",
    ) -> tuple[str, Any]:
        """Send a one-point trajectory to the arm (or gripper) controller; returns its command id
        (header.frame_id, echoed by robots that echo) and the message sent."""
        command_id = f"cmd/{next(self._command_ids)}"
        msg = self.trajectory(names, positions, time_from_start_s, command_id=command_id)
        self.publishers[stream].publish(msg)
        if stream == "command":
            self.arm_command = np.array(positions, dtype=float)
        self._record_outgoing(stream, msg)
        return command_id, msg

    def start_heartbeat(self) -> None:
        if self._heartbeat_thread is not None:
            return
        period = 1.0 / self.config.loop.heartbeat_hz
        pub = self.publishers["heartbeat"]
        cls = stream_message_class("heartbeat")

        def beat() -> None:
            msg = cls()
            msg.frame_id = self.config.node_name
            while not self._heartbeat_stop.wait(period):
                ns_to_stamp(time.time_ns(), msg.stamp)
                try:
                    pub.publish(msg)
                except Exception:  # the context is shutting down
                    return

        self._heartbeat_thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        self._heartbeat_thread.start()

    def stop_heartbeat(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(1.0)
            self._heartbeat_thread = None
        self._heartbeat_stop = threading.Event()

    def scene_reset(self, timeout_s: float) -> tuple[bool, str]:
        """Call the scene-reset service; resent every `deadlines.resend_s` (idempotent)."""
        if self.reset_client is None:
            raise EvalError("this robot profile has no scene-reset service", key="scene_reset")
        self.arm_command = None  # the station puts the arm in its scene's posture
        response = self.session.call(
            self.reset_client,
            self.trigger_type.Request(),
            timeout_s,
            resend_s=self.config.deadlines.resend_s,
        )
        return bool(response.success), str(response.message)

    # ------------------------------------------------------------------ discovery

    def missing(self) -> list[str]:
        """What of the robot interface is not visible yet (empty when everything is)."""
        out = []
        if self.latest_state() is None:
            out.append(f"no messages on {self.config.topics.joint_state}")
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

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the state stream (and the reset service) is visible; EvalError otherwise.

        Then, when the robot side listens to the heartbeat (the twin, the deadman relay), wait
        until it has had time to receive one: it follows no command before.
        """
        if self.session.wait_for(lambda: not self.missing(), timeout_s, poll_s=0.01):
            self._wait_heartbeat_heard(min(timeout_s, HEARTBEAT_MATCH_S))
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

    def _wait_heartbeat_heard(self, timeout_s: float) -> None:
        pub = self.publishers.get("heartbeat")
        if pub is None or self._heartbeat_thread is None:
            return
        if self.session.wait_for(lambda: pub.get_subscription_count() > 0, timeout_s, 0.01):
            time.sleep(3.0 / self.config.loop.heartbeat_hz)  # a few beats reach it

    def close(self) -> None:
        self._recorder = None
        self._judge_log = None
        self.stop_heartbeat()
        self.session.close()
