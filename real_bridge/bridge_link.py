"""The bridge's side of the wire: subscriptions, publishers and service clients of one robot.

Subscriptions take raw (serialized) messages, so a recording holds exactly the bytes received; the
callbacks deserialize them for the bridge's own bookkeeping. All shared state is guarded by one
lock because callbacks run on the session's executor thread.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import BridgeConfig, QosSpec
from real_bridge.recording import McapRecorder
from real_bridge.ros_node import (
    STREAM_TYPES,
    RosSession,
    ns_to_stamp,
    qos_profile,
    stamp_to_ns,
    stream_message_class,
)
from real_bridge.safety import DiagnosticReading


@dataclass(frozen=True)
class StateSample:
    """One received JointState: robot stamp (ns), arrival (monotonic s), names and arrays."""

    stamp_ns: int
    received_s: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class BridgeLink:
    """Opens a RosSession and wires every stream and service of `config` to it.

    Args:
        config: the bridge configuration (names, QoS); the session uses its domain id.
    """

    def __init__(self, config: BridgeConfig) -> None:
        from std_srvs.srv import SetBool, Trigger

        self.config = config
        self.session = RosSession(config.node_name, config.domain_id, config.namespace)
        self._lock = threading.RLock()
        #: Notified whenever a joint state or an applied-command echo arrives.
        self._arrived = threading.Condition(self._lock)
        self._recorder: McapRecorder | None = None
        self._command_ids = itertools.count(1)
        self.state: StateSample | None = None
        self.state_count = 0
        self.state_times: deque[float] = deque(maxlen=2000)
        self.recent_states: deque[StateSample] = deque(maxlen=4000)
        #: When a list, every received state's stamp (ns) is appended (for loss accounting).
        self.stamp_log: list[int] | None = None
        #: When a list, each joint state's publish→callback time (ns) is appended (transport
        #: plus dispatch, from the DDS source timestamp; both ends use this host's clock).
        self.transit_log: list[int] | None = None
        self.wrench: np.ndarray | None = None
        self.peak_force_n = 0.0
        self.applied: deque[tuple[str, int, tuple[str, ...], np.ndarray]] = deque(maxlen=256)
        self.verdicts: dict[str, tuple[str, float]] = {}
        self.diagnostics: deque[DiagnosticReading] = deque(maxlen=10_000)
        self.diagnostics_total = 0
        try:
            self._wire(Trigger, SetBool)
        except BaseException:
            self.session.close()
            raise

    # ------------------------------------------------------------------ wiring

    def _qos(self, stream: str) -> QosSpec:
        qos = self.config.qos
        if stream in ("manifest", "verdict"):
            return qos.events
        if stream == "applied":
            return qos.command
        spec: QosSpec = getattr(qos, stream)
        return spec

    def _wire(self, trigger: Any, set_bool: Any) -> None:
        node = self.session.node
        topics = self.config.topics
        handlers = {
            "joint_state": self._on_joint_state,
            "wrench": self._on_wrench,
            "diagnostics": self._on_diagnostics,
            "verdict": self._on_verdict,
            "applied": self._on_applied,
        }
        self.subscriptions = {}
        for stream, handler in handlers.items():
            topic = getattr(topics, stream)
            if not topic:
                continue
            self.subscriptions[stream] = node.create_subscription(
                stream_message_class(stream),
                topic,
                self._make_callback(stream, handler),
                qos_profile(self._qos(stream)),
                raw=True,
            )
        self.command_pub = node.create_publisher(
            stream_message_class("command"), topics.command, qos_profile(self._qos("command"))
        )
        self.manifest_pub = node.create_publisher(
            stream_message_class("manifest"), topics.manifest, qos_profile(self._qos("manifest"))
        )
        services = self.config.services
        self.clients: dict[str, Any] = {
            "reset": node.create_client(trigger, services.reset),
            "start": node.create_client(trigger, services.start),
            "stop": node.create_client(trigger, services.stop),
            "enable": node.create_client(set_bool, services.enable),
        }
        self.trigger_type = trigger
        self.set_bool_type = set_bool

    def _make_callback(self, stream: str, handler: Any) -> Any:
        topic = getattr(self.config.topics, stream)
        cls = stream_message_class(stream)

        def callback(raw: bytes, info: Any) -> None:
            received_s = time.monotonic()
            transit = self.transit_log
            if transit is not None and stream == "joint_state":
                transit.append(time.time_ns() - int(info.get("source_timestamp", 0)))
            recorder = self._recorder
            if recorder is not None and stream in self.config.record_streams:
                log_ns = int(info.get("received_timestamp", 0)) or time.time_ns()
                recorder.write(topic, raw, log_ns, int(info.get("source_timestamp", 0)))
            handler(deserialize_message(raw, cls), received_s)

        return callback

    # ------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg: Any, received_s: float) -> None:
        sample = StateSample(
            stamp_ns=stamp_to_ns(msg.header.stamp),
            received_s=received_s,
            names=tuple(msg.name),
            position=np.asarray(msg.position, dtype=float),
            velocity=np.asarray(msg.velocity, dtype=float),
            effort=np.asarray(msg.effort, dtype=float),
        )
        with self._lock:
            self.state = sample
            self.state_count += 1
            self.state_times.append(received_s)
            self.recent_states.append(sample)
            if self.stamp_log is not None:
                self.stamp_log.append(sample.stamp_ns)
            self._arrived.notify_all()

    def _on_wrench(self, msg: Any, received_s: float) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        wrench = np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=float)
        force = float(np.linalg.norm(wrench[:3]))
        with self._lock:
            self.wrench = wrench
            if np.isfinite(force):
                self.peak_force_n = max(self.peak_force_n, force)

    def _on_diagnostics(self, msg: Any, received_s: float) -> None:
        readings = [
            DiagnosticReading(
                received_s=received_s,
                name=str(status.name),
                level=int.from_bytes(status.level, "little")
                if isinstance(status.level, bytes)
                else int(status.level),
                message=str(status.message),
                values=tuple((str(kv.key), str(kv.value)) for kv in status.values),
            )
            for status in msg.status
        ]
        with self._lock:
            self.diagnostics.extend(readings)
            self.diagnostics_total += len(readings)

    def _on_verdict(self, msg: Any, received_s: float) -> None:
        import json

        try:
            episode_id = str(json.loads(msg.data).get("episode_id", ""))
        except (ValueError, AttributeError):
            episode_id = ""  # parsed (and reported) by the episode that waits for it
        with self._lock:
            self.verdicts[episode_id] = (str(msg.data), received_s)

    def _on_applied(self, msg: Any, received_s: float) -> None:
        if not msg.points:
            return
        entry = (
            str(msg.header.frame_id),
            stamp_to_ns(msg.header.stamp),
            tuple(msg.joint_names),
            np.asarray(msg.points[0].positions, dtype=float),
        )
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

        `predicate` runs with the link's lock held (the link's getters may be used in it).
        Returns its final value (False on timeout).
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
            items = list(self.diagnostics)[len(self.diagnostics) - new :] if new > 0 else []
            return items, total

    def forget_verdict(self, episode_id: str) -> None:
        with self._lock:
            self.verdicts.pop(episode_id, None)

    def verdict_for(self, episode_id: str) -> tuple[str, float] | None:
        with self._lock:
            return self.verdicts.get(episode_id)

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
            for stream in self.config.record_streams:
                topic = getattr(self.config.topics, stream)
                if topic:
                    recorder.add_stream(topic, STREAM_TYPES[stream])
        self._recorder = recorder

    def _record_outgoing(self, stream: str, msg: Any) -> None:
        recorder = self._recorder
        if recorder is not None and stream in self.config.record_streams:
            now = time.time_ns()
            recorder.write(getattr(self.config.topics, stream), serialize_message(msg), now, now)

    # ------------------------------------------------------------------ sending

    def publish_manifest(self, text: str) -> None:
        msg = stream_message_class("manifest")()
        msg.data = text
        self.manifest_pub.publish(msg)
        self._record_outgoing("manifest", msg)

    def publish_command(
        self, names: Sequence[str], positions: Sequence[float] | np.ndarray, duration_s: float = 0.0
    ) -> str:
        """Publish a one-point JointTrajectory; returns its command id (header.frame_id)."""
        from trajectory_msgs.msg import JointTrajectoryPoint

        msg = stream_message_class("command")()
        command_id = f"cmd/{next(self._command_ids)}"
        ns_to_stamp(time.time_ns(), msg.header.stamp)
        msg.header.frame_id = command_id
        msg.joint_names = list(names)
        point = JointTrajectoryPoint()
        point.positions = [float(p) for p in positions]
        point.time_from_start.sec = int(duration_s)
        point.time_from_start.nanosec = round((duration_s - int(duration_s)) * 1e9)
        msg.points = [point]
        self.command_pub.publish(msg)
        self._record_outgoing("command", msg)
        return command_id

    def trigger(self, which: str, timeout_s: float) -> tuple[bool, str]:
        """Call one of the Trigger services (reset/start/stop); returns (success, message).

        Reset and stop are idempotent and resent every `deadlines.resend_s`; start is sent once.
        """
        resend = None if which == "start" else self.config.deadlines.resend_s
        response = self.session.call(
            self.clients[which], self.trigger_type.Request(), timeout_s, resend_s=resend
        )
        return bool(response.success), str(response.message)

    def set_enabled(self, enabled: bool, timeout_s: float) -> tuple[bool, str]:
        request = self.set_bool_type.Request()
        request.data = enabled
        response = self.session.call(
            self.clients["enable"], request, timeout_s, resend_s=self.config.deadlines.resend_s
        )
        return bool(response.success), str(response.message)

    # ------------------------------------------------------------------ discovery

    def missing(self) -> list[str]:
        """What of the robot interface is not visible yet (empty when everything is)."""
        out = []
        if self.latest_state() is None:
            out.append(f"no messages on {self.config.topics.joint_state}")
        for which, client in self.clients.items():
            if not client.service_is_ready():
                out.append(f"service {getattr(self.config.services, which)} not available")
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
        """Wait until the state stream and every service are visible; EvalError otherwise."""
        if self.session.wait_for(lambda: not self.missing(), timeout_s, poll_s=0.01):
            return
        missing = self.missing()
        if not missing:
            return
        visible = [t for t in self.visible_topics() if not t.startswith("/rosout")]
        raise EvalError(
            f"robot not found on ROS_DOMAIN_ID {self.config.domain_id} within {timeout_s:.1f} s: "
            f"{'; '.join(missing)} (topics seen: {', '.join(visible) or 'none'}); check the "
            "robot is running and the [topics]/[services] names and domain_id in the bridge config",
            key="robot",
        )

    def close(self) -> None:
        self._recorder = None
        self.session.close()
