"""`run --foxglove-port`: the live channels through foxglove-sdk's WebSocket server, read by a
real client (the `websockets` package speaking subprotocol `foxglove.sdk.v1`): the advertised
channels carry ROS 2 schemas (ros2msg, CDR) for the robot's streams and JSON for episode events,
incidents and progress; a subscribed client receives the CDR bytes as the harness got them.
Without an operator's token the handshake is refused (HTTP 401); a non-loopback address needs
TLS or --insecure-remote."""

from __future__ import annotations

import asyncio
import json
import ssl
import struct

import pytest
import websockets
from websockets.exceptions import InvalidStatus

pytest.importorskip("foxglove")

from embodied_eval.console.access import Operators, TLSFiles
from embodied_eval.console.foxglove_live import JSON_TOPICS, FoxgloveLive
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState
from tests.console_support import self_signed_tls

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


async def client(uri: str, live: LiveState, cdr: bytes, offered: tuple[str, ...] = ()) -> dict:
    async with websockets.connect(uri, subprotocols=["foxglove.sdk.v1", *offered]) as ws:
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


async def refused(uri: str, offered: tuple[str, ...] = ()) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as caught:
        async with websockets.connect(uri, subprotocols=["foxglove.sdk.v1", *offered]):
            pass
    return caught.value


def test_the_live_channels_reach_a_foxglove_client_with_a_token_only():
    cdr, definition = joint_state_cdr([0.1, -0.2, 0.3])
    live = LiveState("ana")
    live.ros_stream("/joint_states", "sensor_msgs/msg/JointState", definition)
    operators = Operators.issue(["ana", "bo"])
    fox = FoxgloveLive(live, operators=operators, port=0)
    port = fox.start()
    base = f"ws://127.0.0.1:{port}/"
    assert fox.url == base
    try:
        no_token = asyncio.run(refused(base))
        wrong = asyncio.run(refused(base + "?token=" + operators.tokens["ana"][:-1] + "x"))
        wrong_sub = asyncio.run(refused(base, ("token.not-a-token",)))
        seen = asyncio.run(client(base + "?token=" + operators.tokens["ana"], live, cdr))
        by_subprotocol = asyncio.run(client(base, live, cdr, ("token." + operators.tokens["bo"],)))
        assert fox.gate is not None and fox.gate.connected == ["ana", "bo"]
    finally:
        fox.stop()
    for refusal in (no_token, wrong, wrong_sub):
        assert refusal.response.status_code == 401
        assert b"needs an operator's token" in refusal.response.body
    print(f"refused: {no_token!s}: {bytes(no_token.response.body).decode().strip()}")
    assert by_subprotocol["got"][1][1] == cdr
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


def test_an_address_other_machines_reach_needs_tls_or_insecure_remote(tmp_path):
    live = LiveState("ana")
    with pytest.raises(EvalError, match=r"--foxglove-host 0\.0\.0\.0 can be reached from other"):
        FoxgloveLive(live, host="0.0.0.0", port=0).start()
    # Told so explicitly, it listens there (still behind the token).
    fox = FoxgloveLive(live, host="0.0.0.0", port=0, insecure_remote=True)
    port = fox.start()
    try:
        failure = asyncio.run(refused(f"ws://127.0.0.1:{port}/"))
        assert failure.response.status_code == 401
    finally:
        fox.stop()
    # Missing TLS files are a one-line error before anything listens.
    missing = TLSFiles(tmp_path / "none.pem", tmp_path / "none.key")
    with pytest.raises(EvalError, match="cannot load them"):
        FoxgloveLive(live, host="0.0.0.0", port=0, tls=missing).start()
    # Over TLS (wss://) it may listen there; the client trusts the self-signed certificate.
    cert, key = self_signed_tls(tmp_path)
    fox = FoxgloveLive(live, host="0.0.0.0", port=0, tls=TLSFiles(cert, key))
    port = fox.start()
    assert fox.url == f"wss://0.0.0.0:{port}/"
    trusted = ssl.create_default_context(cafile=str(cert))

    async def server_name(uri: str) -> str:
        async with websockets.connect(uri, subprotocols=["foxglove.sdk.v1"], ssl=trusted) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 10))["name"]

    try:
        token = fox.operators.tokens["ana"]
        assert asyncio.run(server_name(f"wss://127.0.0.1:{port}/?token={token}")) == "embodied-eval"
    finally:
        fox.stop()
