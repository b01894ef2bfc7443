"""The twin's sensor messages: camera image (with the gap's exposure and noise), camera info,
the object tracker's readings (`real_bridge.twin.tracker`), diagnostics and applied-command
echoes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from real_bridge.ros_node import message_class, ns_to_stamp
from real_bridge.twin.settings import TwinGap
from real_bridge.twin.tracker import TrackerReading

#: Vertical field of view of the twin's camera (MuJoCo's default free camera), degrees.
CAMERA_FOVY_DEG = 45.0
CAMERA_FRAME = "camera_optical_frame"


def image_message(rgb: np.ndarray, gap: TwinGap, rng: np.random.Generator, stamp_ns: int) -> Any:
    """sensor_msgs/Image rgb8 of a rendered frame after the camera's exposure gain and noise."""
    pixels = rgb.astype(np.float32) * gap.camera_exposure
    if gap.camera_noise_std > 0:
        pixels += rng.normal(0.0, gap.camera_noise_std, pixels.shape).astype(np.float32)
    image = message_class("sensor_msgs/msg/Image")()
    ns_to_stamp(stamp_ns, image.header.stamp)
    image.header.frame_id = CAMERA_FRAME
    image.height, image.width = int(rgb.shape[0]), int(rgb.shape[1])
    image.encoding = "rgb8"
    image.step = 3 * image.width
    image.data = np.clip(pixels, 0, 255).astype(np.uint8).tobytes()
    return image


def camera_info_message(size: int, stamp_ns: int) -> Any:
    """sensor_msgs/CameraInfo of the square pinhole camera: f = (size / 2) / tan(fovy / 2)."""
    info = message_class("sensor_msgs/msg/CameraInfo")()
    ns_to_stamp(stamp_ns, info.header.stamp)
    info.header.frame_id = CAMERA_FRAME
    info.height = info.width = size
    focal = (size / 2.0) / math.tan(math.radians(CAMERA_FOVY_DEG) / 2.0)
    c = size / 2.0
    info.distortion_model = "plumb_bob"
    info.d = [0.0] * 5
    info.k = [focal, 0.0, c, 0.0, focal, c, 0.0, 0.0, 1.0]
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [focal, 0.0, c, 0.0, 0.0, focal, c, 0.0, 0.0, 0.0, 1.0, 0.0]
    return info


def pose_message(reading: TrackerReading) -> Any:
    """geometry_msgs/PoseStamped of one tracker reading (world frame, stamped when it was true)."""
    msg = message_class("geometry_msgs/msg/PoseStamped")()
    ns_to_stamp(reading.stamp_ns, msg.header.stamp)
    msg.header.frame_id = "world"
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in reading.position)
    o.w, o.x, o.y, o.z = (float(v) for v in reading.quat)
    return msg


def diagnostic_array(
    statuses: Sequence[tuple[str, int, str, Sequence[tuple[str, str]]]],
    hardware_id: str,
    stamp_ns: int,
) -> Any:
    """diagnostic_msgs/DiagnosticArray of (name, level, message, key-values) statuses."""
    array = message_class("diagnostic_msgs/msg/DiagnosticArray")()
    ns_to_stamp(stamp_ns, array.header.stamp)
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

    for name, level, message, values in statuses:
        status = DiagnosticStatus()
        status.level = bytes([level])
        status.name = name
        status.message = message
        status.hardware_id = hardware_id
        status.values = [KeyValue(key=k, value=v) for k, v in values]
        array.status.append(status)
    return array


def applied_echo(
    stamp_ns: int,
    command_id: str,
    names: Sequence[str],
    applied: np.ndarray,
    waited_s: float = 0.0,
) -> Any:
    """The echo of an applied command: a one-point trajectory_msgs/JointTrajectory whose
    frame_id is the command id, stamped when the servo took it; the point's `time_from_start`
    is how long the command waited on the robot's clock between arriving and taking effect
    (actuator delay plus the drift's and firmware's command latency)."""
    echo = message_class("trajectory_msgs/msg/JointTrajectory")()
    from trajectory_msgs.msg import JointTrajectoryPoint

    ns_to_stamp(stamp_ns, echo.header.stamp)
    echo.header.frame_id = command_id
    echo.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions = applied.tolist()
    waited_ns = max(0, round(waited_s * 1e9))
    point.time_from_start.sec, point.time_from_start.nanosec = divmod(waited_ns, 1_000_000_000)
    echo.points = [point]
    return echo
