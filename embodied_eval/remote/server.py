"""`PolicyServer`: any harness policy served over the openpi websocket protocol.

What a client sees (the protocol openpi's `WebsocketClientPolicy` speaks):

1. On connect the server sends one metadata map: `{"server": "embodied-eval", "policy": <target>,
   "episode_start": true, "task": <default task>}`.
2. Each binary frame from the client is an observation map; the answer is
   `{"actions": float32 (H, D), "server_timing": {"infer_ms": …, "prev_total_ms": …}}` (H = 1
   for harness policies that return one action).
3. `{"__ctrl__": "episode_start", "__task__": T, "__seed__": S}` starts an episode: the policy for
   task T (default: the server's task) is built once per connection and `reset(S)`; the answer
   is `{"episode_start": true, "task": T}` (plus `"command_space"` when the policy declares one,
   e.g. `"joint_position"`). `"episode_end"` is acknowledged.
4. `GET /healthz` answers 200 on the same port (no key needed).

Safer than the reference server: it binds 127.0.0.1 unless told otherwise, can require an API key
(`Authorization: Api-Key <key>`, HTTP 401 otherwise) and never sends a traceback: a failing
policy gets the client one text frame `error: <Type>: <message>` and a close with code 1011; the
traceback goes to the server's log.

Each client gets its own thread, which reads its requests, runs the policy and writes the answers
itself (no event loop, no hand-over between threads: see `transport`); a slow policy holds up only
its own client.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import selectors
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import POLICY_LOADER, resolve
from embodied_eval.remote.transport import BlockingWebsocket, ClosedError, accept
from embodied_eval.remote.wire import pack, unpack

log = logging.getLogger("embodied_eval.policy_server")

#: On shutdown, how long each client gets to answer the closing handshake, s (a client that is
#: busy elsewhere — e.g. between episodes — does not hold the server up longer).
CLOSE_TIMEOUT_S = 2.0

#: How long a new client gets for the TLS and the opening (HTTP) handshake, s.
OPEN_TIMEOUT_S = 10.0


def load_factory(target: str) -> Callable[[str | None], Any]:
    """`factory(task_id) -> policy` for "module:factory[?key=value&...]"; EvalError when unusable.

    Policies are built the way the harness builds them (`plugins.POLICY_LOADER`, which reads the
    `?key=value` options); the import path is checked now, so a typo fails at start-up.
    """
    factory = resolve(target.partition("?")[0])
    if not callable(factory):
        raise EvalError(f"{target!r} is not a policy factory (not callable)", key="policy")
    try:
        loader = resolve(POLICY_LOADER)
    except EvalError:  # the harness's policy package is not installed: call the factory as is
        return lambda task: factory(task)
    return lambda task: loader(target, task)


def tls_context(certfile: str, keyfile: str | None = None) -> ssl.SSLContext:
    """A server TLS context from a PEM certificate (chain) and key; EvalError when unreadable."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise EvalError(f"--certfile {certfile}: cannot load the certificate/key ({exc})") from None
    return context


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Session:
    """The policies of one connection (one per task) and the one in use."""

    def __init__(self, factory: Callable[[str | None], Any], default_task: str | None) -> None:
        self.factory = factory
        self.default_task = default_task
        self.policies: dict[str | None, Any] = {}
        self.policy: Any = None

    def start(self, task: str | None, seed: int | None) -> str | None:
        task = task or self.default_task
        if task not in self.policies:
            policy = self.factory(task)
            if not (hasattr(policy, "act") and hasattr(policy, "reset")):
                raise TypeError(f"the factory returned {type(policy).__name__}, not a policy")
            self.policies[task] = policy
        self.policy = self.policies[task]
        self.policy.reset(seed)
        return task

    def infer(self, obs: Mapping[str, Any]) -> np.ndarray:
        if self.policy is None:
            self.start(None, None)
        # Arrays decoded from the wire are read-only views; a policy may write to its input.
        writable = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in obs.items()}
        action = np.asarray(self.policy.act(writable), dtype=np.float32)
        return action if action.ndim == 2 else np.atleast_2d(action.reshape(-1))


class PolicyServer:
    """Serve `factory_target` ("module:factory") over the openpi websocket protocol.

    Args:
        factory_target: the harness policy factory, called with the task id.
        host: interface to bind (default 127.0.0.1: this machine only).
        port: TCP port (0: any free port; see `port` once started).
        api_key: required from clients when given.
        task: the task id used when a client does not name one.
        ssl_context: serve TLS (clients connect with `wss://`).
    """

    def __init__(
        self,
        factory_target: str,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        api_key: str | None = None,
        task: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.factory_target = factory_target
        self.factory = load_factory(factory_target)
        self.host = host
        self.port = port
        self.api_key = api_key or None
        self.task = task
        self.ssl_context = ssl_context
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: set[BlockingWebsocket] = set()
        self._wake_r: socket.socket
        self._wake_w: socket.socket

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "server": "embodied-eval",
            "policy": self.factory_target,
            "episode_start": True,
            "task": self.task or "",
        }

    def _respond(self, protocol: Any, request: Any) -> Any:
        """The HTTP answer to a request that must not open a websocket, else None."""
        from http import HTTPStatus

        if request.path.split("?", 1)[0] == "/healthz":
            return protocol.reject(HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            sent = request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Api-Key {self.api_key}".encode()):
                log.warning("refused a connection without the right API key")
                return protocol.reject(HTTPStatus.UNAUTHORIZED, "missing or wrong API key\n")
        return None

    def _answer(self, session: _Session, frame: bytes | str) -> dict[str, Any]:
        """The answer to one client message (actions without their timing); raises on bad input
        or a failing policy."""
        if isinstance(frame, str):
            raise ValueError("expected a binary msgpack frame, got text")
        message = unpack(frame)
        if not isinstance(message, Mapping):
            raise ValueError("expected a map of observations")
        ctrl = message.get("__ctrl__")
        if ctrl == "episode_start":
            seed = message.get("__seed__")
            task = session.start(
                str(message.get("__task__") or "") or None, None if seed is None else int(seed)
            )
            started: dict[str, Any] = {"episode_start": True, "task": task or ""}
            space = getattr(session.policy, "command_space", None)
            if space:
                started["command_space"] = str(space)
            return started
        if ctrl == "episode_end":
            return {"episode_end": True}
        return {"actions": session.infer(message)}

    def _exchange(self, ws: BlockingWebsocket, peer: Any) -> None:
        """Answer one client's messages in order, each inferred in this connection's thread."""
        session = _Session(self.factory, self.task)
        prev_total_ms: float | None = None
        ws.send(pack(self.metadata))
        while True:
            frame = ws.recv(None)
            t0 = time.perf_counter()
            try:
                answer = self._answer(session, frame)
            except Exception as exc:
                log.exception("policy error for client %s", peer)
                ws.send_text(f"error: {_one_line(exc)}")
                ws.close(1011, "policy error", wait_s=CLOSE_TIMEOUT_S)
                return
            if "actions" in answer:
                timing: dict[str, float] = {"infer_ms": (time.perf_counter() - t0) * 1e3}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                answer["server_timing"] = timing
                ws.send(pack(answer))
                prev_total_ms = (time.perf_counter() - t0) * 1e3
            else:
                ws.send(pack(answer))

    def _connection(self, sock: socket.socket, peer: Any) -> None:
        """One client, in its own thread: TLS, the opening handshake, then the exchange."""
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.settimeout(OPEN_TIMEOUT_S)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_side=True)
            ws = accept(sock, self._respond, OPEN_TIMEOUT_S)
        except Exception as exc:  # a failed TLS or HTTP handshake: this client's problem
            log.info("client %s: no connection opened (%s)", peer, _one_line(exc))
            with contextlib.suppress(OSError):
                sock.close()
            return
        if ws is None:  # an HTTP answer (health check, refused key) was sent
            return
        log.info("client %s connected", peer)
        with self._lock:
            self._open.add(ws)
        try:
            self._exchange(ws, peer)
        except (ClosedError, OSError):
            pass
        finally:
            with self._lock:
                self._open.discard(ws)
            ws.close(wait_s=CLOSE_TIMEOUT_S)
            log.info("client %s disconnected", peer)

    def serve_forever(self, ready: Callable[[int], None] | None = None) -> None:
        """Accept clients (one thread each) until `stop()`; `ready(port)` once listening. On
        stop, open connections are closed with code 1001, each client getting up to
        CLOSE_TIMEOUT_S to answer."""
        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        listener = socket.create_server((self.host, self.port), family=family, backlog=64)
        self._wake_r, self._wake_w = socket.socketpair()
        threads: list[threading.Thread] = []
        try:
            self.port = int(listener.getsockname()[1])
            if ready is not None:
                ready(self.port)
            with selectors.DefaultSelector() as selector:
                selector.register(listener, selectors.EVENT_READ)
                selector.register(self._wake_r, selectors.EVENT_READ)
                while not self._stop.is_set():
                    for key, _ in selector.select():
                        if key.fileobj is not listener:
                            continue
                        sock, peer = listener.accept()
                        thread = threading.Thread(
                            target=self._connection, args=(sock, peer), daemon=True
                        )
                        thread.start()
                        threads = [t for t in threads if t.is_alive()] + [thread]
        finally:
            listener.close()
            with self._lock:
                closing = list(self._open)
            for ws in closing:
                ws.send_close(1001, "server shutting down")
            deadline = time.monotonic() + CLOSE_TIMEOUT_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            for ws in closing:  # clients that did not answer in time
                with contextlib.suppress(OSError):
                    ws.sock.shutdown(socket.SHUT_RDWR)
            self._wake_r.close()
            self._wake_w.close()

    def stop(self) -> None:
        """Make `serve_forever` return (from any thread, or a signal handler)."""
        self._stop.set()
        with contextlib.suppress(AttributeError, OSError):
            self._wake_w.send(b"x")

    def run(self, ready: Callable[[int], None] | None = None) -> None:
        """`serve_forever`, stopped by SIGINT/SIGTERM when run from the main thread."""
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self.serve_forever(ready)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
