"""Hand-built recordings for the success detector's tests (no ROS: rosbags serializes CDR)."""

from __future__ import annotations

import json
import math

import numpy as np
from rosbags.typesys import Stores, get_typestore

from real_bridge.detector import JudgeContext
from real_bridge.recording import png_bytes

STORE = get_typestore(Stores.ROS2_KILTED)
T = STORE.types
POSE_TOPIC = "/object_pose"
CAMERA_TOPIC = "/camera/image_raw/compressed"
INFO_TOPIC = "/camera/camera_info"
EPISODE_TOPIC = "/embodied_eval/episode"
#: The twin's camera (its profile): 128 px square, fovy 45°.
SIZE = 128
FOCAL = (SIZE / 2) / math.tan(math.radians(22.5))
CAMERA_POSITION = (1.564898, 0.0, 0.845649)
CAMERA_LOOK_AT = (0.5, 0.0, 0.1)
#: The "ended" event's log time in the built recordings, ns.
END_NS = 10_000_000_000


def _header(stamp_ns: int, frame: str = "world"):
    time_cls = T["builtin_interfaces/msg/Time"]
    return T["std_msgs/msg/Header"](
        stamp=time_cls(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id=frame
    )


def pose(stamp_ns: int, xyz) -> bytes:
    geo = "geometry_msgs/msg/"
    msg = T[geo + "PoseStamped"](
        header=_header(stamp_ns),
        pose=T[geo + "Pose"](
            position=T[geo + "Point"](x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])),
            orientation=T[geo + "Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    return bytes(STORE.serialize_cdr(msg, geo + "PoseStamped"))


def event(episode_id: str, phase: str) -> bytes:
    text = json.dumps({"episode_id": episode_id, "phase": phase, "target_quality": 0.8})
    return bytes(STORE.serialize_cdr(T["std_msgs/msg/String"](data=text), "std_msgs/msg/String"))


def camera_info(stamp_ns: int) -> bytes:
    c = SIZE / 2
    msg = T["sensor_msgs/msg/CameraInfo"](
        header=_header(stamp_ns, "camera_optical_frame"),
        height=SIZE,
        width=SIZE,
        distortion_model="plumb_bob",
        d=np.zeros(5),
        k=np.array([FOCAL, 0.0, c, 0.0, FOCAL, c, 0.0, 0.0, 1.0]),
        r=np.eye(3).ravel(),
        p=np.array([FOCAL, 0.0, c, 0.0, 0.0, FOCAL, c, 0.0, 0.0, 0.0, 1.0, 0.0]),
        binning_x=0,
        binning_y=0,
        roi=T["sensor_msgs/msg/RegionOfInterest"](
            x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
        ),
    )
    return bytes(STORE.serialize_cdr(msg, "sensor_msgs/msg/CameraInfo"))


def frame(stamp_ns: int, rgb: np.ndarray) -> bytes:
    msg = T["sensor_msgs/msg/CompressedImage"](
        header=_header(stamp_ns, "camera_optical_frame"),
        format="rgb8; png compressed rgb8",
        data=np.frombuffer(png_bytes(rgb), dtype=np.uint8),
    )
    return bytes(STORE.serialize_cdr(msg, "sensor_msgs/msg/CompressedImage"))


def context(task_id: str, goal, **changes) -> JudgeContext:
    base = JudgeContext(
        episode_id="p1-real-ros2-a1",
        task_id=task_id,
        target_quality=0.8,
        goal_pos_m=tuple(float(v) for v in goal),
        pose_topic=POSE_TOPIC,
        camera_topic=CAMERA_TOPIC,
        camera_info_topic=INFO_TOPIC,
        episode_topic=EPISODE_TOPIC,
        camera_position_m=CAMERA_POSITION,
        camera_look_at_m=CAMERA_LOOK_AT,
    )
    from dataclasses import replace

    return replace(base, **changes)


def recording(
    points=(),
    *,
    episode_id: str = "p1-real-ros2-a1",
    images=(),
    every_ns: int = 33_000_000,
    ended: bool = True,
):
    """Messages of one episode: "started" at END_NS − 5 s, tracker poses (one per `every_ns`,
    the last one at END_NS), camera info + frames likewise, "ended" at END_NS."""
    out = [(EPISODE_TOPIC, END_NS - 5 * 10**9, event(episode_id, "started"))]
    for i, p in enumerate(points):
        t = END_NS - (len(points) - 1 - i) * every_ns
        out.append((POSE_TOPIC, t, pose(t - 50_000_000, p)))
    for i, rgb in enumerate(images):
        t = END_NS - (len(images) - 1 - i) * every_ns
        out.append((INFO_TOPIC, t, camera_info(t)))
        out.append((CAMERA_TOPIC, t, frame(t, rgb)))
    if ended:
        out.append((EPISODE_TOPIC, END_NS, event(episode_id, "ended")))
    return sorted(out, key=lambda m: m[1])


def strip_recording(source, target, topics) -> None:
    """Copy an MCAP recording without the channels of `topics` (schemas, metadata kept)."""
    from mcap.writer import Writer

    from real_bridge.recording import read_partial

    metadata: list = []
    schemas, channels, messages = read_partial(source, metadata)
    with open(target, "wb") as handle:
        writer = Writer(handle)
        writer.start(profile="ros2", library="test")
        for record in metadata:
            writer.add_metadata(record.name, dict(record.metadata))
        schema_ids = {
            sid: writer.register_schema(name=s.name, encoding=s.encoding, data=s.data)
            for sid, s in schemas.items()
        }
        kept = {
            cid: writer.register_channel(
                topic=c.topic, message_encoding=c.message_encoding,
                schema_id=schema_ids.get(c.schema_id, 0),
            )
            for cid, c in channels.items()
            if c.topic not in topics
        }  # fmt: skip
        for m in messages:
            if m.channel_id in kept:
                writer.add_message(
                    channel_id=kept[m.channel_id], log_time=m.log_time, data=m.data,
                    publish_time=m.publish_time, sequence=m.sequence,
                )  # fmt: skip
        writer.finish()
