"""MCAP recording of real episodes: raw CDR messages exactly as received, with ros2msg schemas.

The file is a plain MCAP with profile "ros2", CDR message encoding and rosbag2-style ros2msg
schemas, so `ros2 bag`, the `mcap` CLI, Foxglove and `rosbags` can read it. It is written under a
temporary name beside its destination (`<name>.mcap.partial`); `close()` finishes the summary,
fsyncs, computes the SHA-256 and renames it into place, so a finished recording is never
half-written. Crash safety: small chunks, and the chunk in progress is flushed to the file at least
every FLUSH_S, so a harness killed mid-episode leaves a readable partial file (chunks up to the
last flush, no summary) — the next run keeps it and links it to the episode it belonged to.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import IO, Any

import numpy as np

from embodied_eval.canonical import file_sha256
from embodied_eval.errors import EvalError
from embodied_eval.records import Artifact

PARTIAL_SUFFIX = ".partial"
#: The chunk in progress reaches the file at least this often, s.
FLUSH_S = 0.5
#: The writer thread takes queued messages this often, s.
WRITER_PERIOD_S = 0.02
#: Uncompressed chunk size, bytes (small: a crash loses at most one chunk).
CHUNK_BYTES = 256 * 1024


@cache
def ros2msg_definition(msgtype: str) -> str:
    """The rosbag2 (ros2msg) definition text of `msgtype`, dependencies appended.

    Args:
        msgtype: e.g. "sensor_msgs/msg/JointState".
    """
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    try:
        text, _ = store.generate_msgdef(msgtype, ros_version=2)
    except Exception as exc:  # rosbags raises its own TypesysError for unknown names
        raise EvalError(f"recording: unknown message type {msgtype!r} ({exc})") from None
    return text


class McapRecorder:
    """Writes one episode's streams to `path` (thread-safe; callbacks write from the executor).

    Args:
        path: destination `.mcap` file; the directory is created if needed.
        metadata: key/value pairs stored as an MCAP metadata record named "episode".
    """

    def __init__(
        self, path: str | os.PathLike[str], metadata: dict[str, str] | None = None
    ) -> None:
        from mcap.writer import CompressionType, Writer

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.partial = self.path.with_name(self.path.name + PARTIAL_SUFFIX)
        self._lock = threading.Lock()  # bookkeeping (channels, counts) of the callers
        self._io = threading.Lock()  # the MCAP writer, used by the writer thread
        self._file: IO[bytes] = open(self.partial, "wb")  # noqa: SIM115 - closed in close()
        self._writer = Writer(self._file, chunk_size=CHUNK_BYTES, compression=CompressionType.ZSTD)
        self._last_flush = time.monotonic()
        self._writer.start(profile="ros2", library="embodied-eval real_bridge")
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._sequence: dict[str, int] = {}
        self._pending: deque[tuple[int, int, bytes | Callable[[], bytes], int, int]] = deque()
        self.counts: dict[str, int] = {}
        self._closed = False
        if metadata:
            self._writer.add_metadata("episode", {k: str(v) for k, v in metadata.items()})
        # Compression and file writes happen on this thread, so neither the control loop nor
        # the ROS callbacks ever wait for them.
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mcap-writer", daemon=True)
        self._thread.start()

    def add_stream(self, topic: str, msgtype: str) -> None:
        """Register a topic with its message type (e.g. "sensor_msgs/msg/JointState")."""
        with self._lock, self._io:
            if topic in self._channels:
                return
            schema_id = self._schemas.get(msgtype)
            if schema_id is None:
                # rosbag2 names schemas "pkg/msg/Type"; keep that spelling for tools that match it.
                schema_id = self._writer.register_schema(
                    name=msgtype,
                    encoding="ros2msg",
                    data=ros2msg_definition(msgtype).encode("utf-8"),
                )
                self._schemas[msgtype] = schema_id
            self._channels[topic] = self._writer.register_channel(
                topic=topic, message_encoding="cdr", schema_id=schema_id
            )
            self._sequence[topic] = 0
            self.counts[topic] = 0

    def write(
        self,
        topic: str,
        data: bytes | Callable[[], bytes],
        log_time_ns: int,
        publish_time_ns: int = 0,
    ) -> None:
        """Queue one serialized (CDR) message for the writer thread; ignored after `close()`.

        `data` may be a function returning the bytes: it runs on the writer thread (e.g. image
        compression, which then delays neither the ROS callbacks nor the control loop)."""
        with self._lock:
            if self._closed:
                return
            channel = self._channels.get(topic)
            if channel is None:
                raise EvalError(f"recording: topic {topic!r} was not registered", key="topic")
            self._sequence[topic] += 1
            self.counts[topic] += 1
            self._pending.append(
                (channel, log_time_ns, data, publish_time_ns or log_time_ns, self._sequence[topic])
            )

    def _drain(self) -> None:
        with self._io:
            while self._pending:
                channel, log_ns, data, pub_ns, seq = self._pending.popleft()
                self._writer.add_message(
                    channel_id=channel,
                    log_time=log_ns,
                    data=data if isinstance(data, bytes) else data(),
                    publish_time=pub_ns,
                    sequence=seq,
                )
            now = time.monotonic()
            if now - self._last_flush >= FLUSH_S:
                self._writer.flush()
                self._last_flush = now

    def _run(self) -> None:
        while not self._stop.wait(WRITER_PERIOD_S):
            self._drain()

    def flush(self) -> None:
        """Write everything queued and the chunk in progress to the file now (no fsync)."""
        self._drain()
        with self._io:
            self._writer.flush()
            self._last_flush = time.monotonic()

    def close(self) -> Artifact:
        """Finish the file, fsync, checksum, rename into place; returns the Artifact."""
        with self._lock:
            if self._closed:
                raise EvalError("recording: already closed")
            self._closed = True
        self._stop.set()
        self._thread.join(5.0)
        self._drain()
        with self._io:
            self._writer.finish()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        digest = file_sha256(self.partial)
        size = self.partial.stat().st_size
        os.replace(self.partial, self.path)
        return Artifact(path=str(self.path), sha256=digest, kind="mcap", size_bytes=size)


def compressed_topic(image_topic: str) -> str:
    """Where a raw camera topic's images are recorded (image_transport naming)."""
    return image_topic.rstrip("/") + "/compressed"


def png_bytes(rgb: np.ndarray) -> bytes:
    """PNG encoding (8-bit RGB, no filtering, zlib level 1) of an (h, w, 3) uint8 array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


def compressed_image_of(image: Any) -> Any:
    """A sensor_msgs/CompressedImage (format "rgb8; png compressed rgb8", as image_transport's
    compressed plugin names it) of an rgb8 or bgr8 sensor_msgs/Image."""
    from sensor_msgs.msg import CompressedImage

    pixels = np.frombuffer(bytes(image.data), dtype=np.uint8).reshape(image.height, image.width, 3)
    if image.encoding == "bgr8":
        pixels = pixels[:, :, ::-1]
    out = CompressedImage()
    out.header = image.header
    out.format = "rgb8; png compressed rgb8"
    out.data = png_bytes(np.ascontiguousarray(pixels))
    return out


def read_partial(
    path: str | os.PathLike[str], metadata: list[Any] | None = None
) -> tuple[dict[int, Any], dict[int, Any], list[Any]]:
    """Schemas, channels and messages of an MCAP file that may have been cut short (a killed
    writer): records are read in file order until the data ends. Returns (schemas by id,
    channels by id, messages in file order); metadata records are appended to `metadata`."""
    from mcap.exceptions import McapError
    from mcap.records import Channel, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader

    schemas: dict[int, Any] = {}
    channels: dict[int, Any] = {}
    messages: list[Any] = []
    with open(path, "rb") as handle:
        try:
            for record in StreamReader(handle, skip_magic=False).records:
                if isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Message):
                    messages.append(record)
                elif isinstance(record, Metadata) and metadata is not None:
                    metadata.append(record)
        except (McapError, EOFError, ValueError):
            pass  # the file ends where the writer was killed
    return schemas, channels, messages


def recover_partial(partial: str | os.PathLike[str]) -> Artifact:
    """Write a finished copy (`<name>.recovered.mcap`, with summary) of a partial recording so
    every MCAP tool opens it; the partial file itself is kept unchanged. Returns the copy."""
    from mcap.writer import CompressionType, Writer

    source = Path(partial)
    metadata: list[Any] = []
    schemas, channels, messages = read_partial(source, metadata)
    target = source.with_name(source.name.removesuffix(PARTIAL_SUFFIX).removesuffix(".mcap"))
    target = target.with_name(target.name + ".recovered.mcap")
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as handle:
        writer = Writer(handle, compression=CompressionType.ZSTD)
        writer.start(profile="ros2", library="embodied-eval real_bridge (recovered)")
        for record in metadata:
            writer.add_metadata(record.name, dict(record.metadata))
        schema_ids = {
            sid: writer.register_schema(name=s.name, encoding=s.encoding, data=s.data)
            for sid, s in schemas.items()
        }
        channel_ids = {
            cid: writer.register_channel(
                topic=c.topic,
                message_encoding=c.message_encoding,
                schema_id=schema_ids.get(c.schema_id, 0),
                metadata=dict(c.metadata),
            )
            for cid, c in channels.items()
        }
        for m in messages:
            if m.channel_id in channel_ids:
                writer.add_message(
                    channel_id=channel_ids[m.channel_id],
                    log_time=m.log_time,
                    data=m.data,
                    publish_time=m.publish_time,
                    sequence=m.sequence,
                )
        writer.finish()
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)
    return Artifact(
        path=str(target),
        sha256=file_sha256(target),
        kind="mcap",
        size_bytes=target.stat().st_size,
    )
