"""The token check in front of foxglove-sdk's WebSocket server.

The SDK's server (0.30) accepts every client and offers no hook to refuse one, so
`FoxgloveLive` starts it on a free port of 127.0.0.1 and `FoxgloveGate` listens where operators
connect: a WebSocket handshake without an operator's token (`?token=`, `Authorization: Bearer`,
or the subprotocol `token.<TOKEN>` offered beside `foxglove.sdk.v1`) is refused with HTTP 401
before any WebSocket opens; with one, the gate opens its own connection to the SDK's server and
relays every message both ways, unchanged, until either side closes (the other side is closed
with the same code). The gate speaks TLS (`wss://`) when given a context.

The SDK's own port stays on the loopback interface, where a program of another account on the
same machine could still reach it; the gate protects the streams from the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from http import HTTPStatus
from typing import Any

from embodied_eval.console.access import Operators, listening_socket, token_in_request
from embodied_eval.errors import EvalError

#: The only subprotocol foxglove-sdk's server speaks.
SUBPROTOCOL = "foxglove.sdk.v1"
#: The body of a refused handshake.
REFUSED = (
    "this Foxglove server needs an operator's token: add ?token=<token> to its address (your "
    "sign-in token, or one from the console's token file)\n"
)
log = logging.getLogger("embodied_eval.console.foxglove")


class FoxgloveGate:
    """Authenticating relay from (host, port) to the SDK server on 127.0.0.1:`upstream_port`.

    Args:
        operators: whose tokens open a connection.
        upstream_port: the SDK server's port on 127.0.0.1.
        host / port: where operators connect (port 0: a free one).
        tls: a server TLS context (None: plain `ws://`).
    """

    def __init__(
        self,
        operators: Operators,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.operators = operators
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        self.tls = tls
        self.connected: list[str] = []  # the operators who opened a connection, in order
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind (EvalError when the port is taken), serve in a thread; returns the port."""
        sock = listening_socket(
            self.host, self.port, what="the Foxglove server", option="--foxglove-port",
            key="foxglove_port",
        )  # fmt: skip
        self.port = int(sock.getsockname()[1])
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, ready), name="foxglove-gate", daemon=True
        )
        self._thread.start()
        if not ready.wait(10.0):
            raise EvalError("--foxglove-port: the Foxglove gate did not start", key="foxglove_port")
        return self.port

    def stop(self) -> None:
        if self._loop is not None and self._closing is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._closing.set)
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    # ------------------------------------------------------------------ serving

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(sock, ready))
        finally:
            loop.close()

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        self._closing = asyncio.Event()
        async with serve(
            self._relay,
            sock=sock,
            ssl=self.tls,
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            process_request=self._check,
            compression=None,
            max_size=None,
            logger=log,
        ):
            ready.set()
            await self._closing.wait()

    def _check(self, connection: Any, request: Any) -> Any:
        """Refuse the handshake (401) unless it carries an operator's token."""
        path = str(request.path)
        query = path.split("?", 1)[1] if "?" in path else ""
        offered = [
            p.strip()
            for value in request.headers.get_all("Sec-WebSocket-Protocol")
            for p in value.split(",")
        ]
        user = self.operators.user_for(token_in_request(query, request.headers, offered))
        if user is None:
            log.warning("refused a Foxglove connection without an operator's token")
            return connection.respond(HTTPStatus.UNAUTHORIZED, REFUSED)
        connection.operator = user
        return None

    async def _relay(self, client: Any) -> None:
        from websockets.asyncio.client import connect

        self.connected.append(str(getattr(client, "operator", "")))
        log.info("operator %s connected to Foxglove", self.connected[-1])
        async with connect(
            f"ws://127.0.0.1:{self.upstream_port}",
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            compression=None,
            max_size=None,
            logger=log,
        ) as upstream:
            pumps = [
                asyncio.ensure_future(_pump(client, upstream)),
                asyncio.ensure_future(_pump(upstream, client)),
            ]
            closing = asyncio.ensure_future(self._closing.wait()) if self._closing else None
            waiting = [*pumps, *([closing] if closing else [])]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in waiting:
                task.cancel()
            code = upstream.close_code or client.close_code or 1001
            await client.close(code if code != 1005 else 1000)
            await upstream.close()


async def _pump(source: Any, sink: Any) -> None:
    """Every message from `source` to `sink`, as it came (text stays text, bytes stay bytes)."""
    from websockets.exceptions import ConnectionClosed

    with contextlib.suppress(ConnectionClosed):
        async for message in source:
            await sink.send(message)


__all__ = ["SUBPROTOCOL", "FoxgloveGate"]
