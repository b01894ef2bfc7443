"""The run's live channels in Foxglove: `embodied-eval run ... --foxglove-port N`.

A foxglove-sdk WebSocket server (subprotocol `foxglove.sdk.v1`; open it in Foxglove with "Open
connection" → `ws://HOST:N/?token=<token>`) fed from the run's `LiveState` by one thread at
PUBLISH_HZ. Operators reach it through `foxglove_gate.FoxgloveGate`, which refuses a connection
without an operator's token (HTTP 401) and listens on 127.0.0.1 unless told otherwise (an address
other machines can reach needs TLS or `insecure_remote`, see `access.check_bind`); the SDK's
server itself listens on a free port of 127.0.0.1 behind it. The channels:

- the robot's ROS streams as the harness records them, with their ROS 2 schemas (`ros2msg`
  definitions, CDR messages, the bytes as received): joint states, the wrench, the camera (PNG
  `sensor_msgs/msg/CompressedImage`), the commands sent (`trajectory_msgs/msg/JointTrajectory`),
  diagnostics, the episode events, the tracker's poses — the latest message of each per tick;
- JSON channels: `/embodied_eval/episode_events` (episodes stored, real episodes started and
  ended), `/embodied_eval/incidents` (safety events as they arrive), `/embodied_eval/progress`
  (the run's status, settled and successful episodes per side and family in this run, the
  anytime-stopping decision), `/embodied_eval/real` (the real episode in progress: loop latency,
  deadline misses, contact force and its limit, deadman and protective-stop state) and
  `/embodied_eval/operator` (stops, pauses, resumes).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

from embodied_eval.console.access import Operators, TLSFiles, check_bind
from embodied_eval.console.foxglove_gate import FoxgloveGate
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState

#: How often the publisher looks at the live state, Hz.
PUBLISH_HZ = 50.0
#: Fields of the real episode in progress published at most this often, Hz.
REAL_HZ = 10.0
JSON_TOPICS = {
    "episode_events": "/embodied_eval/episode_events",
    "incidents": "/embodied_eval/incidents",
    "progress": "/embodied_eval/progress",
    "real": "/embodied_eval/real",
    "operator": "/embodied_eval/operator",
}
#: Which JSON channel each live event kind goes to.
EVENT_CHANNEL = {
    "episode": "episode_events",
    "real_episode": "episode_events",
    "safety": "incidents",
    "operator": "operator",
    "run": "progress",
    "stopping": "progress",
}
_OBJECT = {"type": "object", "additionalProperties": True}


class FoxgloveLive:
    """Publishes a `LiveState` through a foxglove-sdk WebSocket server.

    Args:
        live: the run's live state.
        operators: whose tokens open a connection (default: one, the live state's user).
        host / port: where operators connect (port 0: a free one).
        tls: certificate and key to serve `wss://` with (None: plain `ws://`).
        insecure_remote: allow plain `ws://` on an address other machines can reach.
    """

    def __init__(
        self,
        live: LiveState,
        *,
        operators: Operators | None = None,
        host: str = "127.0.0.1",
        port: int = 8765,
        tls: TLSFiles | None = None,
        insecure_remote: bool = False,
    ) -> None:
        self.live = live
        self.operators = operators if operators is not None else Operators.issue([live.user])
        self.host = host
        self.port = port
        self.tls = tls
        self.insecure_remote = insecure_remote
        self.gate: FoxgloveGate | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._ros: dict[str, Any] = {}
        self._json: dict[str, Any] = {}
        self._sent: dict[str, int] = {}
        self._seq = 0
        self._real_version = -1
        self._real_due = 0.0
        self._counts: dict[str, dict[str, int]] = defaultdict(lambda: {"settled": 0, "ok": 0})

    @property
    def url(self) -> str:
        """Where operators connect, without a token."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'wss' if self.tls else 'ws'}://{host}:{self.port}/"

    def start(self) -> int:
        """Start the SDK's server, its gate and the publishing thread; returns the gate's port."""
        check_bind(
            self.host,
            tls=self.tls is not None,
            insecure_remote=self.insecure_remote,
            what="Foxglove",
            option="--foxglove-host",
        )
        context = self.tls.context() if self.tls is not None else None
        try:
            import foxglove
        except ImportError as exc:
            raise EvalError(
                f"--foxglove-port needs foxglove-sdk ({exc}): install the 'console' extra, "
                "pip install 'embodied-eval[console]'",
                key="foxglove_port",
            ) from None
        try:
            self._server = foxglove.start_server(name="embodied-eval", host="127.0.0.1", port=0)
        except Exception as exc:  # the SDK raises its own error types
            raise EvalError(
                f"--foxglove-port: the Foxglove server could not start ({exc})",
                key="foxglove_port",
            ) from None
        self.gate = FoxgloveGate(
            self.operators, int(self._server.port), host=self.host, port=self.port, tls=context
        )
        try:
            self.port = self.gate.start()
        except EvalError:
            self._server.stop()
            self._server = None
            raise
        for name, topic in JSON_TOPICS.items():
            self._json[name] = foxglove.Channel(topic, schema=_OBJECT)
        self._halt.clear()
        self._thread = threading.Thread(target=self._loop, name="foxglove", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self.gate is not None:
            self.gate.stop()
            self.gate = None
        self._halt.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    # ------------------------------------------------------------------ publishing

    def _loop(self) -> None:
        period = 1.0 / PUBLISH_HZ
        while not self._halt.wait(period):
            self.publish_once()

    def publish_once(self) -> None:
        """One tick: new ROS messages, new events, the real episode's fields."""
        self._ros_messages()
        for event in self.live.events_since(self._seq):
            self._seq = event["seq"]
            channel = EVENT_CHANNEL.get(str(event["kind"]))
            if event["kind"] == "episode" and event.get("settles"):
                key = f"{event['side']}/{event['family']}"
                self._counts[key]["settled"] += 1
                self._counts[key]["ok"] += int(bool(event.get("success")))
            if channel is not None:
                self._log_json(channel, event, event["t_ns"])
            if event["kind"] in ("episode", "run", "stopping"):
                progress = {"run": self.live.run_info(), "this_run": dict(self._counts)}
                if event["kind"] == "stopping":
                    progress["stopping"] = event
                self._log_json("progress", progress, event["t_ns"])
        now = time.monotonic()
        if now >= self._real_due:
            version, real = self.live.real()
            if version != self._real_version and real:
                self._real_version, self._real_due = version, now + 1.0 / REAL_HZ
                self._log_json("real", real, int(real.get("updated_ns", time.time_ns())))

    def _ros_messages(self) -> None:
        import foxglove

        for topic, (msgtype, definition) in self.live.ros_streams().items():
            if topic not in self._ros:
                schema = foxglove.Schema(
                    name=msgtype, encoding="ros2msg", data=definition.encode("utf-8")
                )
                self._ros[topic] = foxglove.Channel(topic, schema=schema, message_encoding="cdr")
        for topic, (count, log_ns, data) in self.live.ros_latest().items():
            channel = self._ros.get(topic)
            if channel is None or self._sent.get(topic) == count:
                continue
            self._sent[topic] = count
            payload = data() if callable(data) else data
            channel.log(bytes(payload), log_time=int(log_ns))

    def _log_json(self, name: str, data: dict[str, Any], log_ns: int) -> None:
        try:
            text = json.dumps(data, default=str, allow_nan=False)
        except ValueError:  # a NaN reading: not valid JSON, left out
            return
        self._json[name].log(text, log_time=int(log_ns))
