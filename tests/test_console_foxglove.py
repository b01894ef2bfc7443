"""`run --foxglove-port`: the live channels through foxglove-sdk's WebSocket server, read by a
real client (the `websockets` package speaking subprotocol `foxglove.sdk.v1`): the advertised
channels carry ROS 2 schemas (ros2msg, CDR) for the robot's streams and JSON for episode events,
incidents and progress; a subscribed client receives the CDR bytes as the harness got them."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest
import websockets

pytest.importorskip("foxglove")

from embodied_eval.console.foxglove_live import JSON_TOPICS, FoxgloveLive
from embodied_eval.console.live_state import LiveState

pytestmark = [pytest.mark.timeout(120)]


def joint_state_cdr(positions: list[float]) -> tuple[bytes, str]:
    """A sensor_msgs/msg/JointState as CDR, and its ros2msg definition (rosbags)."""
    typestore_mod = pytest.importorskip("rosbags.typesys")
    store = typestore_mod.get_typestore(typestore_mod.Stores.ROS2_KILTED)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    import numpy as np

    msg = JointState(
        header=Header(stamp=Time(sec=1, nanosec=5), frame_id=""),
        name=[f"j{i}" for i in range(len(positions))],
        position=np.array(positions),
        velocity=np.zeros(len(positions)),
        effort=np.zeros(len(positions)),
    )
    from real_bridge.recording import ros2msg_definition

    return bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState")), ros2msg_definition(
        "sensor_msgs/msg/JointState"
    )


async def client(port: int, live: LiveState, cdr: bytes) -> dict:
    uri = f"ws://127.0.0.1:{port}"
    async with websockets.connect(uri, subprotocols=["foxglove.sdk.v1"]) as ws:
        assert ws.subprotocol == "foxglove.sdk.v1"
        channels: dict[str, dict] = {}
        info = None
        while len(channels) < len(JSON_TOPICS) + 1:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["op"] == "serverInfo":
                info = message
            elif message["op"] == "advertise":
                channels.update({c["topic"]: c for c in message["channels"]})
        subscriptions = [
            {"id": 1, "channelId": channels["/joint_states"]["id"]},
            {"id": 2, "channelId": channels["/embodied_eval/episode_events"]["id"]},
        ]
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
        await asyncio.sleep(0.3)
        live.ros_message("/joint_states", cdr, 1_000_000_005)
        live.publish("episode", {"episode_id": "e1", "side": "sim", "family": "push",
                                 "status": "ok", "success": True, "settles": True})  # fmt: skip
        got: dict[int, tuple[int, bytes]] = {}
        while len(got) < 2:
            frame = await asyncio.wait_for(ws.recv(), 10)
            if isinstance(frame, bytes) and frame[0] == 1:
                sub, log_time = struct.unpack_from("<IQ", frame, 1)
                got[sub] = (log_time, frame[13:])
        return {"info": info, "channels": channels, "got": got}


def test_the_live_channels_reach_a_foxglove_client():
    cdr, definition = joint_state_cdr([0.1, -0.2, 0.3])
    live = LiveState("ana")
    live.ros_stream("/joint_states", "sensor_msgs/msg/JointState", definition)
    fox = FoxgloveLive(live, port=0)
    port = fox.start()
    try:
        seen = asyncio.run(client(port, live, cdr))
    finally:
        fox.stop()
    joints = seen["channels"]["/joint_states"]
    assert joints["encoding"] == "cdr"
    assert joints["schemaName"] == "sensor_msgs/msg/JointState"
    assert joints["schemaEncoding"] == "ros2msg"
    assert "float64[] position" in joints["schema"]
    for topic in JSON_TOPICS.values():
        assert seen["channels"][topic]["encoding"] == "json"
    log_time, payload = seen["got"][1]
    assert payload == cdr and log_time == 1_000_000_005
    event = json.loads(seen["got"][2][1])
    assert (event["kind"], event["episode_id"], event["status"]) == ("episode", "e1", "ok")
