"""A real episode recording with a camera, for the report's tests: an MCAP written by the
harness's own recorder, holding `sensor_msgs/msg/CompressedImage` frames (PNG, as the bridge
records them) of solid colours, one colour per frame, 0.5 s apart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embodied_eval.records import Artifact

CAMERA_TOPIC = "/camera/image_raw/compressed"
#: Seven frames; a four-frame strip takes frames 0, 2, 4, 6 (0, 1, 2, 3 s): red, blue, cyan, grey.
RECORDED_COLOURS = (
    (220, 30, 30),
    (30, 220, 30),
    (30, 30, 220),
    (220, 220, 30),
    (30, 220, 220),
    (220, 30, 220),
    (128, 128, 128),
)


def write_camera_mcap(
    path: Path, colours: Sequence[tuple[int, int, int]], size: tuple[int, int] = (48, 64)
) -> Artifact:
    """Record one frame per colour (h × w = `size`) and a joint-state-free episode; returns the
    recording's Artifact (path, SHA-256, kind "mcap")."""
    from rosbags.typesys import Stores, get_typestore

    from real_bridge.recording import McapRecorder, png_bytes

    store = get_typestore(Stores.ROS2_KILTED)
    image_type = store.types["sensor_msgs/msg/CompressedImage"]
    header_type = store.types["std_msgs/msg/Header"]
    time_type = store.types["builtin_interfaces/msg/Time"]
    recorder = McapRecorder(path, {"episode_id": path.stem})
    recorder.add_stream(CAMERA_TOPIC, "sensor_msgs/msg/CompressedImage")
    t0 = 1_700_000_000_000_000_000
    for i, colour in enumerate(colours):
        pixels = np.empty((*size, 3), np.uint8)
        pixels[:] = colour
        stamp = t0 + i * 500_000_000
        message = image_type(
            header=header_type(
                stamp=time_type(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000),
                frame_id="camera",
            ),
            format="rgb8; png compressed rgb8",
            data=np.frombuffer(png_bytes(pixels), np.uint8),
        )
        recorder.write(
            CAMERA_TOPIC, bytes(store.serialize_cdr(message, image_type.__msgtype__)), stamp
        )
    return recorder.close()
