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
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import signal
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from embodied_eval.errors import EvalError
from embodied_eval.plugins import POLICY_LOADER, resolve
from embodied_eval.remote.wire import pack, unpack

log = logging.getLogger("embodied_eval.policy_server")

#: On shutdown, how long each client gets to answer the closing handshake, s (a client that is
#: busy elsewhere — e.g. between episodes — does not hold the server up longer).
CLOSE_TIMEOUT_S = 2.0


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

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "server": "embodied-eval",
            "policy": self.factory_target,
            "episode_start": True,
            "task": self.task or "",
        }

    def _process_request(self, connection: Any, request: Any) -> Any:
        from http import HTTPStatus

        if request.path.split("?", 1)[0] == "/healthz":
            return connection.respond(HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            sent = request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Api-Key {self.api_key}".encode()):
                log.warning("refused a connection without the right API key")
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong API key\n")
        return None

    async def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        session = _Session(self.factory, self.task)
        peer = getattr(ws, "remote_address", None)
        log.info("client %s connected", peer)
        prev_total_ms: float | None = None
        try:
            await ws.send(pack(self.metadata))
            async for frame in ws:
                t0 = time.perf_counter()
                try:
                    if isinstance(frame, str):
                        raise ValueError("expected a binary msgpack frame, got text")
                    message = unpack(frame)
                    if not isinstance(message, Mapping):
                        raise ValueError("expected a map of observations")
                    ctrl = message.get("__ctrl__")
                    if ctrl == "episode_start":
                        seed = message.get("__seed__")
                        task = session.start(
                            str(message.get("__task__") or "") or None,
                            None if seed is None else int(seed),
                        )
                        started: dict[str, Any] = {"episode_start": True, "task": task or ""}
                        space = getattr(session.policy, "command_space", None)
                        if space:
                            started["command_space"] = str(space)
                        await ws.send(pack(started))
                        continue
                    if ctrl == "episode_end":
                        await ws.send(pack({"episode_end": True}))
                        continue
                    # In a worker thread: a slow policy must not stall pings and other clients.
                    actions = await asyncio.to_thread(session.infer, message)
                except Exception as exc:
                    log.exception("policy error for client %s", peer)
                    await ws.send(f"error: {_one_line(exc)}")
                    await ws.close(code=1011, reason="policy error")
                    return
                infer_ms = (time.perf_counter() - t0) * 1e3
                timing: dict[str, float] = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                await ws.send(pack({"actions": actions, "server_timing": timing}))
                prev_total_ms = (time.perf_counter() - t0) * 1e3
        except ConnectionClosed:
            pass
        finally:
            log.info("client %s disconnected", peer)

    async def serve(self, ready: Callable[[int], None] | None = None) -> None:
        """Serve until SIGINT/SIGTERM; `ready(port)` is called once listening."""
        from websockets.asyncio.server import serve

        loop = asyncio.get_running_loop()
        stop: asyncio.Future[None] = loop.create_future()

        def request_stop() -> None:
            if not stop.done():
                stop.set_result(None)

        for sig in (signal.SIGINT, signal.SIGTERM):
            # Not possible outside the main thread (tests serve from a thread).
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, request_stop)
        async with serve(
            self._handle,
            self.host,
            self.port,
            compression=None,
            max_size=None,
            process_request=self._process_request,
            ssl=self.ssl_context,
            close_timeout=CLOSE_TIMEOUT_S,
        ) as server:
            sockets = list(server.sockets)
            if sockets:
                self.port = int(sockets[0].getsockname()[1])
            if ready is not None:
                ready(self.port)
            await stop

    def run(self, ready: Callable[[int], None] | None = None) -> None:
        """Blocking `serve`."""
        asyncio.run(self.serve(ready))
