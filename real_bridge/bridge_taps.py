"""What the ROS 2 robot hands to an episode's recording and to the success detector: the raw bytes
of every recorded stream as received (raw camera frames as PNG `CompressedImage`, every
`loop.camera_every`-th one) and the messages the harness itself sends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rclpy.serialization import deserialize_message, serialize_message

from real_bridge.bridge_config import BridgeConfig
from real_bridge.bridge_messages import compressed_topic, png_cdr
from real_bridge.detector import JudgeLog
from real_bridge.recording import McapRecorder
from real_bridge.ros_node import STREAM_TYPES


class RecordingTaps:
    """The recorder and the detector's log of one episode (either may be absent)."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.recorder: McapRecorder | None = None
        self.judge_log: JudgeLog | None = None
        self.live: Any = None  # a live view's sink (the console, Foxglove): the recorded streams
        self._camera_count = 0
        #: The recording's clock, ns (None: log times as received, on the wall clock); the
        #: robot's simulated clock under `loop.use_sim_time`.
        self.clock_ns: Callable[[], int] | None = None

    def now_ns(self) -> int:
        """Now on the recording's clock, ns."""
        return self.clock_ns() if self.clock_ns is not None else time.time_ns()

    def _add_streams(self, sink: Any) -> None:
        """Declare the recorded streams on `sink` (camera frames as PNG `CompressedImage`)."""
        for stream in self.config.record_streams:
            topic = getattr(self.config.topics, stream)
            if not topic:
                continue
            if stream == "camera_image":
                sink.add_stream(compressed_topic(topic), STREAM_TYPES["camera_compressed"])
            else:
                sink.add_stream(topic, STREAM_TYPES[stream])

    def attach_recorder(self, recorder: McapRecorder | None) -> None:
        """Start (or, with None, stop) writing the recorded streams to `recorder`."""
        if recorder is not None:
            self._camera_count = 0
            self._add_streams(recorder)
        self.recorder = recorder

    def attach_live(self, sink: Any) -> None:
        """Start (or, with None, stop) handing the recorded streams to a live view's sink (as
        the recorder: `add_stream`, `write`)."""
        if sink is not None:
            self._add_streams(sink)
        self.live = sink

    def attach_judge_log(self, log: JudgeLog | None) -> None:
        """Start (or, with None, stop) keeping the detector's messages: exactly what the
        recorder is given for the streams it records (also when nothing is recorded)."""
        if log is not None:
            self._camera_count = 0
        self.judge_log = log

    def received(self, stream: str, raw: bytes, info: Any, cls: Any) -> Any:
        """Tap one received message; returns it deserialized when that was needed (else None)."""
        sinks = [s for s in (self.recorder, self.judge_log, self.live) if s is not None]
        if not sinks or stream not in self.config.record_streams:
            return None
        topic = getattr(self.config.topics, stream)
        log_ns = (
            self.clock_ns()
            if self.clock_ns is not None
            else int(info.get("received_timestamp", 0)) or time.time_ns()
        )
        source_ns = int(info.get("source_timestamp", 0))
        if stream != "camera_image":
            for sink in sinks:
                sink.write(topic, raw, log_ns, source_ns)
            return None
        self._camera_count += 1
        if self._camera_count % self.config.loop.camera_every != 0:
            return None
        msg = deserialize_message(raw, cls)
        png = png_cdr(msg)  # encoded once, on the recorder's writer thread
        for sink in sinks:
            sink.write(compressed_topic(topic), png, log_ns, source_ns)
        return msg

    def sent(self, stream: str, msg: Any) -> None:
        """Tap one message the harness sent."""
        sinks = [s for s in (self.recorder, self.judge_log, self.live) if s is not None]
        if sinks and stream in self.config.record_streams:
            now = self.now_ns()
            data = bytes(serialize_message(msg))
            for sink in sinks:
                sink.write(getattr(self.config.topics, stream), data, now, now)
