"""Decoding the robot's messages for the harness's bookkeeping: joint states, wrenches, camera
frames, diagnostics and applied-command echoes, and how raw camera frames are recorded (PNG
`sensor_msgs/CompressedImage` on the image_transport `/compressed` topic).

`real_bridge.bridge_link` (the ROS 2 robot) builds on these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from rclpy.serialization import serialize_message

from real_bridge.recording import compressed_image_of
from real_bridge.recording import compressed_topic as compressed_topic
from real_bridge.ros_node import ns_to_stamp, stamp_to_ns
from real_bridge.safety_state import DiagnosticReading


@dataclass(frozen=True)
class StateSample:
    """One received JointState: robot stamp (ns), arrival (monotonic s), names and arrays."""

    stamp_ns: int
    received_s: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def state_sample_of(msg: Any, received_s: float) -> StateSample:
    """The StateSample of a `sensor_msgs/JointState` received at `received_s` (monotonic s)."""
    return StateSample(
        stamp_ns=stamp_to_ns(msg.header.stamp),
        received_s=received_s,
        names=tuple(msg.name),
        position=np.asarray(msg.position, dtype=float),
        velocity=np.asarray(msg.velocity, dtype=float),
        effort=np.asarray(msg.effort, dtype=float),
    )


def wrench_of(msg: Any) -> np.ndarray:
    """(fx, fy, fz, tx, ty, tz) of a `geometry_msgs/WrenchStamped`, N and N·m."""
    f, t = msg.wrench.force, msg.wrench.torque
    return np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=float)


def rgb_pixels_of(msg: Any) -> np.ndarray | None:
    """An (h, w, 3) RGB view of a packed rgb8/bgr8 `sensor_msgs/Image` (None for anything else)."""
    pixels = None
    if getattr(msg, "encoding", "") in ("rgb8", "bgr8") and msg.step == 3 * msg.width:
        pixels = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.width, 3)
        if msg.encoding == "bgr8":
            pixels = pixels[:, :, ::-1]
    return pixels


def diagnostic_readings_of(msg: Any, received_s: float) -> list[DiagnosticReading]:
    """One reading per status of a `diagnostic_msgs/DiagnosticArray`."""
    return [
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


def applied_entry_of(msg: Any) -> tuple[str, int, tuple[str, ...], np.ndarray]:
    """(command id, stamp ns, joint names, first point's positions) of an applied-command echo
    (a `trajectory_msgs/JointTrajectory` with at least one point)."""
    return (
        str(msg.header.frame_id),
        stamp_to_ns(msg.header.stamp),
        tuple(msg.joint_names),
        np.asarray(msg.points[0].positions, dtype=float),
    )


def png_cdr(image: Any) -> Callable[[], bytes]:
    """A function returning the CDR bytes of `image` as a PNG CompressedImage (encoded the first
    time it is called, later calls return the same bytes: the recorder and the detector's log
    share one encoding)."""
    encoded: list[bytes] = []

    def encode() -> bytes:
        if not encoded:
            encoded.append(bytes(serialize_message(compressed_image_of(image))))
        return encoded[0]

    return encode



def trajectory_message(
    names: tuple[str, ...] | list[str],
    positions: Any,
    time_from_start_s: float,
    *,
    stamp_ns: int = 0,
    command_id: str = "",
) -> Any:
    """A one-point `trajectory_msgs/JointTrajectory` (header stamp 0 = start now; the command id
    in `header.frame_id`, which robots that echo applied commands echo)."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
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
