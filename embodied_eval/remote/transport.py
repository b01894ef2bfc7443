"""Websockets driven in the calling thread over a blocking socket (client and server sides).

websockets' own synchronous client reads the socket on a background thread and hands each message
over to the caller, and its asyncio server hands each request from the event loop to a worker
thread and back: a thread wake-up or two per message on top of the network round trip, and on a
busy machine each wake-up waits for a CPU. The openpi protocol is strict request/answer round
trips, so both sides here drive the websockets library's sans-I/O protocol objects (framing,
masking, the opening handshake, ping/pong and the closing handshake, all from the library) over a
plain blocking socket in the thread that uses the connection: a read goes into one preallocated
buffer (`recv_into`), a message is written with one `sendall`, TCP_NODELAY is set (a frame goes
out at once), compression is off and there is no size limit (the openpi protocol's settings).

- `connect(url, timeout_s, headers)`: a client connection (`ws://` or `wss://`).
- `accept(sock, respond, timeout_s)`: the server side of an accepted socket, after `respond`
  (the server's check of the HTTP request: an HTTP answer, or None to open the websocket).

Errors: `ClosedError` (the peer closed, or the connection dropped), `HandshakeRefused` (an HTTP
answer other than 101, e.g. 401 for a missing API key), `TimeoutError`, `OSError`.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.exceptions import InvalidState
from websockets.frames import Frame, Opcode
from websockets.protocol import State

#: Bytes asked from the socket per read (one buffer per connection, allocated once).
READ_SIZE = 1 << 20


class ClosedError(ConnectionError):
    """The connection is closed; `detail` says how (close code and reason, or none received)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class HandshakeRefused(ConnectionError):
    """The server answered the opening handshake with HTTP `status` instead of 101."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _tune(sock: socket.socket) -> None:
    """TCP_NODELAY: a frame goes out at once."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _deadline(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else time.monotonic() + timeout_s


class BlockingWebsocket:
    """One open websocket: `send(bytes)`, `send_text(str)` and `recv(timeout) -> bytes | str`
    in the thread that owns it; `close` may also come from another thread (a server shutting
    down), which is why the protocol object is only touched under `lock`."""

    def __init__(self, sock: socket.socket, protocol: Any) -> None:
        self.sock = sock
        self.protocol = protocol
        self.lock = threading.Lock()
        #: Events received but not yet consumed (a read can hold several).
        self._pending: deque[Any] = deque()
        self._parts: list[bytes] = []
        self._text = False
        self._buffer = bytearray(READ_SIZE)
        self._view = memoryview(self._buffer)

    def _flush(self) -> None:
        data = self.protocol.data_to_send()
        payload = b"".join(data)
        if payload:
            self.sock.sendall(payload)
        if data and not data[-1]:  # the protocol ends the stream: half-close
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def _read(self, deadline: float | None) -> None:
        """Wait for data (until `deadline`, monotonic s; None: no limit) and take it in."""
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
        elif self.sock.gettimeout() is not None:
            self.sock.settimeout(None)
        try:
            n = self.sock.recv_into(self._buffer)
        except TimeoutError:
            raise
        except OSError as exc:  # reset by the peer: a dropped connection
            with self.lock:
                self.protocol.receive_eof()
            raise ClosedError(f"no close frame: {exc}") from None
        with self.lock:
            if n:
                self.protocol.receive_data(self._view[:n])
            else:
                self.protocol.receive_eof()
            self._flush()  # pongs and the closing handshake's answer

    def _handshake(self, kind: type, deadline: float | None) -> Any:
        """Read until the opening handshake's `kind` (Request or Response) arrives; the frames
        right behind it are kept for `recv`."""
        while True:
            events = self.protocol.events_received()
            for i, event in enumerate(events):
                if isinstance(event, kind):
                    self._pending.extend(events[i + 1 :])
                    return event
            if self.protocol.handshake_exc is not None:
                raise self.protocol.handshake_exc
            self._read(deadline)

    def send(self, data: bytes) -> None:
        """Send one binary message."""
        self._send(data, text=False)

    def send_text(self, text: str) -> None:
        """Send one text message."""
        self._send(text.encode("utf-8"), text=True)

    def _send(self, data: bytes, text: bool) -> None:
        with self.lock:
            try:
                if text:
                    self.protocol.send_text(data)
                else:
                    self.protocol.send_binary(data)
            except InvalidState:
                raise ClosedError(self._close_detail()) from None
            self._flush()

    def recv(self, timeout_s: float | None) -> bytes | str:
        """The next data message (bytes for binary, str for text); pings are answered.
        `timeout_s` None waits as long as the connection stays open."""
        deadline = _deadline(timeout_s)
        while True:
            self._pending.extend(self.protocol.events_received())
            while self._pending:
                frame = self._pending.popleft()
                if not isinstance(frame, Frame):
                    continue
                if frame.opcode in (Opcode.BINARY, Opcode.TEXT):
                    self._parts, self._text = [bytes(frame.data)], frame.opcode is Opcode.TEXT
                elif frame.opcode is Opcode.CONT:
                    self._parts.append(bytes(frame.data))
                else:  # ping, pong, close: the protocol answers what needs an answer
                    continue
                if frame.fin:
                    data = b"".join(self._parts)
                    self._parts = []
                    return data.decode("utf-8") if self._text else data
            if not self.open:
                raise ClosedError(self._close_detail())
            self._read(deadline)

    def poll(self) -> None:
        """Take in whatever arrived while the owner was not reading, without waiting: pings
        are answered, and a close (or a dropped connection) shows in `open`."""
        if not self.open:
            return
        self.sock.setblocking(False)
        try:
            while self.open:
                try:
                    n = self.sock.recv_into(self._buffer)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                except OSError:
                    n = 0
                with self.lock:
                    if n:
                        self.protocol.receive_data(self._view[:n])
                    else:
                        self.protocol.receive_eof()
                    self._flush()
        finally:
            with contextlib.suppress(OSError):
                self.sock.setblocking(True)

    def _close_detail(self) -> str:
        rcvd = self.protocol.close_rcvd
        if rcvd is None:
            return "no close frame: the peer process died or the network dropped"
        return f"code {rcvd.code}: {rcvd.reason}" if rcvd.reason else f"code {rcvd.code}"

    @property
    def open(self) -> bool:
        return bool(self.protocol.state is State.OPEN)

    def send_close(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake (best effort; safe from another thread)."""
        with contextlib.suppress(Exception), self.lock:
            if self.open:
                self.protocol.send_close(code, reason)
                self._flush()

    def close(self, code: int = 1000, reason: str = "", wait_s: float = 0.0) -> None:
        """Start the closing handshake, wait up to `wait_s` for the peer's answer, close the
        socket."""
        self.send_close(code, reason)
        deadline = time.monotonic() + wait_s
        with contextlib.suppress(Exception):
            while wait_s > 0 and not self.protocol.close_rcvd and not self.protocol.reader.eof:
                self._read(deadline)
        with contextlib.suppress(OSError):
            self.sock.close()

    def __del__(self) -> None:  # never leave a socket open behind
        sock: Any = getattr(self, "sock", None)
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.close()


def connect(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> BlockingWebsocket:
    """A client websocket to `url` (`ws://`, or `wss://` with the system trust store or
    `SSL_CERT_FILE`); `timeout_s` bounds connecting and the opening handshake; `headers` are
    added to the request (e.g. Authorization)."""
    from websockets.client import ClientProtocol
    from websockets.http11 import Response
    from websockets.uri import parse_uri

    uri = parse_uri(url)
    sock = socket.create_connection((uri.host, uri.port), timeout=timeout_s)
    try:
        _tune(sock)
        if uri.secure:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
        ws = BlockingWebsocket(sock, ClientProtocol(uri, max_size=None))
        request = ws.protocol.connect()
        for name, value in (headers or {}).items():
            request.headers[name] = value
        ws.protocol.send_request(request)
        ws._flush()
        response = ws._handshake(Response, _deadline(timeout_s))
        if response.status_code != 101:
            raise HandshakeRefused(response.status_code)
        if ws.protocol.handshake_exc is not None:
            raise ws.protocol.handshake_exc
        return ws
    except BaseException:
        sock.close()
        raise


def accept(
    sock: socket.socket, respond: Callable[[Any, Any], Any], timeout_s: float
) -> BlockingWebsocket | None:
    """The server side of an accepted (and, for TLS, wrapped) socket: read the HTTP request
    within `timeout_s`; `respond(protocol, request)` returns an HTTP answer (e.g.
    `protocol.reject(401, …)`) or None to open the websocket. None when no websocket opened (the
    answer is sent and the socket closed)."""
    from websockets.http11 import Request
    from websockets.server import ServerProtocol

    _tune(sock)
    ws = BlockingWebsocket(sock, ServerProtocol(max_size=None))
    try:
        request = ws._handshake(Request, _deadline(timeout_s))
        response = respond(ws.protocol, request)
        ws.protocol.send_response(response or ws.protocol.accept(request))
        ws._flush()
    except Exception:
        sock.close()
        raise
    if not ws.open:
        ws.close(wait_s=timeout_s)  # the client reads the answer, then closes
        return None
    sock.settimeout(None)
    return ws
