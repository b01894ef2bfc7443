"""Camera frames out of an episode's MCAP recording (for the report's thumbnail strips).

Real episodes record the camera as `sensor_msgs/msg/CompressedImage` (CDR) on a
`…/compressed` topic (see `bridge_messages.compressed_topic`). This reads the recording's summary,
picks `count` frames evenly spread over the episode and decodes only those messages (with the
rosbags type store, no ROS installation needed).
"""

from __future__ import annotations

import os
from typing import Any

COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"


def camera_frames(path: str | os.PathLike[str], count: int = 4) -> list[tuple[float, bytes]]:
    """Up to `count` camera frames of a recording, evenly spread in time.

    Args:
        path: the episode's `.mcap` file.
        count: how many frames at most.

    Returns:
        [(seconds since the first frame, the image bytes as recorded (PNG or JPEG))], oldest
        first; empty when the recording has no compressed camera topic or cannot be read.
    """
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    try:
        with open(path, "rb") as handle:
            reader = make_reader(handle)
            summary = reader.get_summary()
            if summary is None:
                return []
            topics = [
                c.topic
                for c in summary.channels.values()
                if summary.schemas.get(c.schema_id) is not None
                and summary.schemas[c.schema_id].name == COMPRESSED_IMAGE
            ]
            if not topics:
                return []
            topic = sorted(topics)[0]
            total = sum(
                n
                for cid, n in (summary.statistics.channel_message_counts.items()
                               if summary.statistics else ())
                if summary.channels[cid].topic == topic
            )  # fmt: skip
            if total <= 0:
                return []
            wanted = {round(k * (total - 1) / max(1, count - 1)) for k in range(count)}
            out: list[tuple[float, bytes]] = []
            first_ns: int | None = None
            for index, (_, _, message) in enumerate(reader.iter_messages(topics=[topic])):
                first_ns = message.log_time if first_ns is None else first_ns
                if index in wanted:
                    image: Any = store.deserialize_cdr(bytes(message.data), COMPRESSED_IMAGE)
                    out.append(((message.log_time - first_ns) / 1e9, bytes(image.data)))
                    if len(out) == len(wanted):
                        break
            return out
    except (OSError, McapError, ValueError, KeyError):
        return []
