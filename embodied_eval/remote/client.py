"""`RemotePolicy`: a harness policy whose actions come from an openpi policy server.

The connection follows the openpi websocket protocol: the server speaks first with a metadata map,
then each `infer` is one binary frame out (the observation map) and one back (a map with
`"actions"` and, from openpi servers, `"server_timing"`). A text frame back is the server's error.

- **Action chunks.** `"actions"` of shape (H, D) is a chunk: its H rows are executed in order, one
  per `act`, before the server is asked again; shape (D,) is a single action. `act_chunk` gives
  the whole chunk at once instead (the real side checks a chunk against the robot's limits
  before sending any of it, as it does for in-process policies that return chunks).
- **Episodes.** openpi's `reset()` sends nothing. When the server's metadata says it understands
  episode control (`"episode_start": true`, as `embodied-eval policy serve` does), `reset(seed)`
  sends `{"__ctrl__": "episode_start", "__task__": <task id>, "__seed__": <seed>}` so the served
  policy starts the episode exactly as an in-process one would. The answer may name the served
  policy's `command_space` (e.g. `"joint_position"`), which the real side needs to know.
- **Latency.** Every round trip is timed; `latency_summary()` gives the episode's figures, which the
  sim and real sides record on the episode (`control.policy_latency_ms`).
- **Failures.** No answer within the timeout, a closed connection, a refused key or an error frame
  raise `RemotePolicyError` with one line saying which; the runner records the episode `aborted`
  (on the real side after the safe-stop hold was sent).

URL: `ws://HOST:PORT[/PATH][?timeout=SECONDS]` or `wss://…` (TLS, system trust store or
`SSL_CERT_FILE`). The API key comes from the environment variable `EMBODIED_EVAL_POLICY_API_KEY`
(never from the URL, which is written on every record).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.remote import API_KEY_ENV, is_remote_policy
from embodied_eval.remote.transport import ClosedError, HandshakeRefused, connect
from embodied_eval.remote.wire import pack, unpack

#: Seconds to wait for one answer (or for the connection to open) unless the URL says otherwise.
DEFAULT_TIMEOUT_S = 10.0


class RemotePolicyError(RuntimeError):
    """The policy server could not be used: unreachable, too slow, closed, or it reported an error.

    The message is one line naming the server and what happened.
    """


def parse_policy_url(url: str) -> tuple[str, float]:
    """(URL to connect to, timeout in s) from a policy URL; EvalError when it is malformed."""
    if not is_remote_policy(url):
        raise EvalError(f"policy {url!r}: a remote policy URL starts with ws:// or wss://")
    parts = urlsplit(url)
    if not parts.hostname:
        raise EvalError(f"policy {url!r}: the URL names no host (ws://HOST:PORT)", key="policy")
    try:
        _ = parts.port
    except ValueError:
        raise EvalError(f"policy {url!r}: the port is not a number", key="policy") from None
    query = dict(parse_qsl(parts.query))
    timeout_s = DEFAULT_TIMEOUT_S
    if "timeout" in query:
        try:
            timeout_s = float(query.pop("timeout"))
        except ValueError:
            timeout_s = -1.0
        if not timeout_s > 0:
            raise EvalError(f"policy {url!r}: timeout must be a positive number", key="policy")
    target = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
    return target, timeout_s


class _Connection:
    """One open websocket to a policy server and the metadata it sent."""

    def __init__(self, url: str, timeout_s: float, api_key: str | None) -> None:
        from websockets.exceptions import WebSocketException

        self.url = url
        headers = {"Authorization": f"Api-Key {api_key}"} if api_key else None
        try:
            self.ws = connect(url, timeout_s, headers)
        except HandshakeRefused as exc:
            hint = " (wrong or missing API key)" if exc.status in (401, 403) else ""
            raise RemotePolicyError(
                f"policy server {url} refused the connection: HTTP {exc.status}{hint}"
            ) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise RemotePolicyError(f"cannot reach policy server {url}: {_one_line(exc)}") from None
        self.metadata: dict[str, Any] = {}
        first = self.receive(timeout_s)
        self.metadata = dict(first) if isinstance(first, Mapping) else {}

    def receive(self, timeout_s: float) -> Any:
        try:
            frame = self.ws.recv(timeout_s)
        except TimeoutError:
            raise self._lost(f"did not answer within {timeout_s:g} s") from None
        except (ClosedError, OSError) as exc:
            raise self._lost(_closed_why(exc)) from None
        if isinstance(frame, str):
            raise self._lost(f"reported an error: {_one_line(frame)}")
        try:
            return unpack(frame)
        except Exception as exc:
            raise self._lost(f"sent an unreadable message: {_one_line(exc)}") from None

    def send(self, message: Any) -> None:
        try:
            self.ws.send(pack(message))
        except (ClosedError, OSError) as exc:
            raise self._lost(_closed_why(exc)) from None

    def _lost(self, why: str) -> RemotePolicyError:
        """Close the connection; the error to raise, naming the server and why."""
        self.close()
        return RemotePolicyError(f"policy server {self.url} {why}")

    def close(self) -> None:
        self.ws.close()

    @property
    def open(self) -> bool:
        """Still open (what arrived since the last answer is taken in first)."""
        self.ws.poll()
        return self.ws.open


def _closed_why(exc: Exception) -> str:
    if isinstance(exc, ClosedError):
        return f"closed the connection ({exc.detail})"
    return f"is gone: {_one_line(exc)}"


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text[:300] or type(value).__name__


#: Open connections by (URL, API key, thread): consecutive episodes of one thread reuse theirs;
#: two threads (e.g. the sim and the real side of one run) never share a socket.
_CONNECTIONS: dict[tuple[str, str | None, int], _Connection] = {}


class RemotePolicy:
    """A harness policy (`reset(seed)`, `act(obs)`) served by an openpi policy server.

    Args:
        url: `ws://HOST:PORT[?timeout=S]` or `wss://…`; also the policy's recorded name.
        task_id: the task the episodes run (sent with episode control).
        api_key: sent as `Authorization: Api-Key <key>`; default: $EMBODIED_EVAL_POLICY_API_KEY.
    """

    plan_depth = 0

    def __init__(self, url: str, task_id: str | None = None, *, api_key: str | None = None) -> None:
        self.name = url
        self.task_id = task_id
        self.target, self.timeout_s = parse_policy_url(url)
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._chunk: deque[np.ndarray] = deque()
        #: What the actions are ("cartesian" unless the served policy declares otherwise).
        self.command_space = "cartesian"
        self.latencies_ms: list[float] = []
        self.server_ms: list[float] = []
        self.steps = 0

    def _key(self) -> tuple[str, str | None, int]:
        return (self.target, self.api_key, threading.get_ident())

    def _connection(self, check: bool = True) -> _Connection:
        """This thread's connection, opened when there is none or (`check`) it has closed.

        Inferences within an episode skip the check (a few system calls each): a connection
        lost mid-episode must fail the episode, not reopen on a fresh server-side session.
        """
        key = self._key()
        conn = _CONNECTIONS.get(key)
        if conn is None or (check and not conn.open):
            _CONNECTIONS.pop(key, None)
            conn = _Connection(self.target, self.timeout_s, self.api_key)
            _CONNECTIONS[key] = conn
        return conn

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata map the server sent when the connection opened."""
        return self._connection().metadata

    def reset(self, seed: int | None = None) -> None:
        """Start an episode: clear the chunk and timings; tell a server that understands it."""
        self._chunk.clear()
        self.latencies_ms = []
        self.server_ms = []
        self.steps = 0
        conn = self._connection()
        if conn.metadata.get("episode_start"):
            message: dict[str, Any] = {"__ctrl__": "episode_start", "__task__": self.task_id or ""}
            if seed is not None:
                message["__seed__"] = int(seed)
            answer = self._round_trip(conn, message)
            space = answer.get("command_space") if isinstance(answer, Mapping) else None
            self.command_space = str(space) if space else "cartesian"

    def _round_trip(self, conn: _Connection, message: Any) -> Any:
        try:
            conn.send(message)
            return conn.receive(self.timeout_s)
        except RemotePolicyError:
            _CONNECTIONS.pop(self._key(), None)
            raise

    def act(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The next action: the next row of the current chunk, else a new inference."""
        self.steps += 1
        if self._chunk:
            return self._chunk.popleft()
        actions = self._infer(obs)
        self._chunk.extend(actions[1:])
        return actions[0]

    def act_chunk(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The rest of the current chunk, else a new inference's whole chunk, shape (H, D).

        `steps` grows by H: the caller executes every row before asking again.
        """
        if self._chunk:
            rows = np.stack(list(self._chunk))
            self._chunk.clear()
        else:
            rows = self._infer(obs)
        self.steps += len(rows)
        return rows

    def _infer(self, obs: Mapping[str, Any]) -> np.ndarray:
        """One inference: the server's actions as a chunk (H, D), H ≥ 1 (timed)."""
        conn = self._connection(check=False)
        t0 = time.perf_counter()
        answer = self._round_trip(conn, obs if isinstance(obs, dict) else dict(obs))
        self.latencies_ms.append((time.perf_counter() - t0) * 1e3)
        if not isinstance(answer, Mapping) or "actions" not in answer:
            raise RemotePolicyError(f"policy server {self.target} answered without 'actions'")
        timing = answer.get("server_timing")
        if isinstance(timing, Mapping) and "infer_ms" in timing:
            self.server_ms.append(float(timing["infer_ms"]))
        actions = np.asarray(answer["actions"], dtype=np.float32)
        if actions.ndim == 1:
            return actions[None, :]
        if actions.ndim != 2 or actions.shape[0] == 0:
            raise RemotePolicyError(
                f"policy server {self.target} sent actions of shape {actions.shape}; "
                "expected (D,) or a chunk (H, D)"
            )
        return actions

    def latency_summary(self) -> dict[str, Any]:
        """This episode's inference round trips: count, steps, p50/p99/max ms (and server ms)."""
        out: dict[str, Any] = {"inferences": len(self.latencies_ms), "steps": self.steps}
        if self.latencies_ms:
            ordered = sorted(self.latencies_ms)
            out["p50_ms"] = round(statistics.median(ordered), 3)
            out["p99_ms"] = round(float(np.percentile(ordered, 99)), 3)
            out["max_ms"] = round(ordered[-1], 3)
        if self.server_ms:
            out["server_infer_p50_ms"] = round(statistics.median(self.server_ms), 3)
        return out

    def close(self) -> None:
        """Close this policy's connection."""
        conn = _CONNECTIONS.pop(self._key(), None)
        if conn is not None:
            conn.close()
