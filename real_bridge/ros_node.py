"""rclpy plumbing shared by the bridge and the twin: one Context, one node, one spinning thread.

Each `RosSession` owns its own `rclpy.Context` (so a process, or a test, can open and close
sessions repeatedly), never installs signal handlers (a library must not steal SIGINT), and spins
an explicit executor on a daemon thread. Every blocking call takes a deadline: a service call to a
dead robot never completes on its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.client import Client
from rclpy.context import Context
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from embodied_eval.errors import EvalError
from real_bridge.bridge_config import QosSpec

#: ROS message type names (as recorded in MCAP schemas) of each stream.
STREAM_TYPES = {
    "joint_state": "sensor_msgs/msg/JointState",
    "command": "trajectory_msgs/msg/JointTrajectory",
    "gripper_command": "trajectory_msgs/msg/JointTrajectory",
    "applied": "trajectory_msgs/msg/JointTrajectory",
    "wrench": "geometry_msgs/msg/WrenchStamped",
    "camera_image": "sensor_msgs/msg/Image",
    "camera_compressed": "sensor_msgs/msg/CompressedImage",
    "camera_info": "sensor_msgs/msg/CameraInfo",
    "object_pose": "geometry_msgs/msg/PoseStamped",
    "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "heartbeat": "std_msgs/msg/Header",
    "clock": "rosgraph_msgs/msg/Clock",
    "episode": "std_msgs/msg/String",
    "manifest": "std_msgs/msg/String",
    "verdict": "std_msgs/msg/String",
}


def message_class(msgtype: str) -> Any:
    """The rclpy message class of a "pkg/msg/Type" name (one of STREAM_TYPES' values)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState
    from std_msgs.msg import Header, String
    from trajectory_msgs.msg import JointTrajectory

    classes = {
        "sensor_msgs/msg/JointState": JointState,
        "sensor_msgs/msg/Image": Image,
        "sensor_msgs/msg/CompressedImage": CompressedImage,
        "sensor_msgs/msg/CameraInfo": CameraInfo,
        "trajectory_msgs/msg/JointTrajectory": JointTrajectory,
        "geometry_msgs/msg/WrenchStamped": WrenchStamped,
        "geometry_msgs/msg/PoseStamped": PoseStamped,
        "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray,
        "std_msgs/msg/String": String,
        "std_msgs/msg/Header": Header,
        "rosgraph_msgs/msg/Clock": Clock,
    }
    return classes[msgtype]


def stream_message_class(stream: str) -> Any:
    """The rclpy message class of a stream (see STREAM_TYPES)."""
    return message_class(STREAM_TYPES[stream])


def qos_profile(spec: QosSpec) -> QoSProfile:
    """rclpy QoSProfile (KEEP_LAST) from a configured QosSpec."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=spec.depth,
        reliability=(
            ReliabilityPolicy.RELIABLE
            if spec.reliability == "reliable"
            else ReliabilityPolicy.BEST_EFFORT
        ),
        durability=(
            DurabilityPolicy.TRANSIENT_LOCAL
            if spec.durability == "transient_local"
            else DurabilityPolicy.VOLATILE
        ),
    )


def stamp_to_ns(stamp: Any) -> int:
    """builtin_interfaces/Time → integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int, stamp: Any) -> Any:
    """Fill a builtin_interfaces/Time from integer nanoseconds; returns it."""
    stamp.sec = int(ns // 1_000_000_000)
    stamp.nanosec = int(ns % 1_000_000_000)
    return stamp


def make_executor(context: Context, *, events: bool) -> Executor:
    """The executor a session spins.

    Args:
        context: the session's context.
        events: use rclpy's EventsExecutor (where this rclpy has `rclpy.experimental`). It
            dispatches from a C++ event queue instead of rebuilding a wait set in Python for every
            callback: less CPU per message. In this rclpy a subscription callback that takes a
            MessageInfo makes its spin fail (SystemError), so a node whose callbacks need the DDS
            timestamps (the bridge's recording) must use the SingleThreadedExecutor.
    """
    if events:
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            pass
        else:
            return EventsExecutor(context=context)
    return SingleThreadedExecutor(context=context)


class RosSession:
    """An rclpy Context with one node spun by one executor (`make_executor`) on a daemon thread.

    Args:
        node_name: the node's name.
        domain_id: ROS_DOMAIN_ID for this context.
        namespace: the node's namespace ("" for none).
        events_executor: spin an EventsExecutor (see `make_executor`; callbacks must take the
            message alone) instead of a SingleThreadedExecutor.
    """

    def __init__(
        self, node_name: str, domain_id: int, namespace: str = "", *, events_executor: bool = False
    ) -> None:
        self.context = Context()
        rclpy.init(
            context=self.context,
            domain_id=domain_id,
            signal_handler_options=SignalHandlerOptions.NO,
        )
        try:
            self.node = rclpy.create_node(
                node_name, namespace=namespace or None, context=self.context
            )
            self.executor = make_executor(self.context, events=events_executor)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise
        self._stop = threading.Event()
        self.spin_error: BaseException | None = None
        self._thread = threading.Thread(target=self._spin, name=f"ros-{node_name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            while not self._stop.is_set() and self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)
        except (ExternalShutdownException, KeyboardInterrupt):
            pass
        except BaseException as exc:  # surfaced to the caller through `spin_error`
            self.spin_error = exc

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.context.ok()

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop spinning, destroy the node and shut the context down (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        with contextlib.suppress(Exception):  # a broken executor must not mask the cause
            self.executor.shutdown(timeout_sec=timeout_s)
        try:
            self.node.destroy_node()
        finally:
            self.context.try_shutdown()

    # ------------------------------------------------------------------ calls with deadlines

    def wait_for(
        self, predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.002
    ) -> bool:
        """Poll `predicate` until it is true or `timeout_s` passes; returns its last value."""
        deadline = time.monotonic() + timeout_s
        while True:
            if predicate():
                return True
            if time.monotonic() >= deadline or not self.alive:
                return bool(predicate())
            time.sleep(poll_s)

    def call(
        self, client: Client, request: Any, timeout_s: float, *, resend_s: float | None = None
    ) -> Any:
        """Call a service with a deadline covering both availability and the response.

        Args:
            client / request: the service client and its request.
            timeout_s: deadline for the whole call, s.
            resend_s: for idempotent services only: send the request again after this long
                without an answer (the first answer wins). A request sent before a restarted
                server was matched is lost, and a dead server still looks available until its
                DDS lease expires, so a single request can wait forever for nothing.
        Raises:
            EvalError: the service is not available, or did not answer, within `timeout_s`.
        """
        name = client.service_name
        deadline = time.monotonic() + timeout_s
        if not self.wait_for(client.service_is_ready, timeout_s):
            raise EvalError(
                f"service {name} is not available (waited {timeout_s:.1f} s): is the robot "
                "running, and is [services] in the bridge config right?",
                key="service",
            )
        futures: list[Any] = []

        def answered() -> bool:
            return any(f.done() for f in futures)

        try:
            while True:
                futures.append(client.call_async(request))
                remaining = max(0.0, deadline - time.monotonic())
                window = remaining if resend_s is None else min(remaining, resend_s)
                if self.wait_for(answered, window, poll_s=0.0005):
                    break
                if time.monotonic() >= deadline:
                    break
        finally:
            for future in futures:
                if not future.done():
                    client.remove_pending_request(future)
        finished = [f for f in futures if f.done()]
        if not finished:
            raise EvalError(
                f"service {name} did not answer within {timeout_s:.1f} s (robot stopped answering)",
                key="service",
            )
        exc = finished[0].exception()
        if exc is not None:
            raise EvalError(f"service {name} failed: {exc}", key="service")
        return finished[0].result()
