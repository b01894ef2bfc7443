"""MCAP recording: read back with an independent reader, checksum, atomic finish."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("mcap_ros2")
rclpy_serialization = pytest.importorskip("rclpy.serialization", exc_type=ImportError)

from mcap.reader import make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402

from real_bridge.recording import PARTIAL_SUFFIX, McapRecorder  # noqa: E402


def test_recording_reads_back_with_counts_content_and_checksum(tmp_path):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    path = tmp_path / "ep.mcap"
    recorder = McapRecorder(path, {"episode_id": "ep"})
    recorder.add_stream("/joint_states", "sensor_msgs/msg/JointState")
    recorder.add_stream("/episode/verdict", "std_msgs/msg/String")
    for i in range(7):
        msg = JointState(name=["a", "b"], position=[0.1 * i, -1.0])
        msg.header.stamp.sec, msg.header.stamp.nanosec = 10, 2_000_000 * i
        recorder.write("/joint_states", rclpy_serialization.serialize_message(msg), 1000 + i)
    recorder.write("/episode/verdict", rclpy_serialization.serialize_message(String(data="v")), 9)
    assert (tmp_path / f"ep.mcap{PARTIAL_SUFFIX}").exists() and not path.exists()
    artifact = recorder.close()
    assert not (tmp_path / f"ep.mcap{PARTIAL_SUFFIX}").exists()
    assert artifact.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert artifact.size_bytes == path.stat().st_size and artifact.kind == "mcap"

    by_topic: dict[str, list] = {}
    with open(path, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            by_topic.setdefault(channel.topic, []).append((schema, message, decoded))
    assert len(by_topic["/joint_states"]) == 7
    assert len(by_topic["/episode/verdict"]) == 1
    states = by_topic["/joint_states"]
    assert [round(d.position[0], 9) for _, _, d in states] == [round(0.1 * i, 9) for i in range(7)]
    assert [m.log_time for _, m, _ in states] == [1000 + i for i in range(7)]
    assert states[3][2].header.stamp.nanosec == 6_000_000
    assert states[0][0].name == "sensor_msgs/msg/JointState"
    assert by_topic["/episode/verdict"][0][2].data == "v"
    recorder.write("/joint_states", b"late", 1)  # after close: ignored, file unchanged
    assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256
