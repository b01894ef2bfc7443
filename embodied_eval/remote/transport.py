"""A websocket client that runs entirely in the calling thread (for the policy client).

websockets' own synchronous client reads the socket on a background thread and hands each
message over to the caller, which costs a thread wake-up per message on top of the network round
trip; on a busy machine that wake-up waits for a CPU. A policy client does strict request/answer
round trips, so this one drives the websockets library's sans-I/O `ClientProtocol` (framing,
masking, the opening handshake, ping/pong and the closing handshake, all from the library) over a
plain blocking socket, reading only while the caller waits for an answer (and, through `poll`,
before each use, so what arrived in between — a ping, the server closing — is handled before a
request goes out). TCP_NODELAY is set (a
frame goes out at once), messages are written with one `sendall`, compression is off and there
is no size limit (the openpi protocol's settings).

Errors: `ClosedError` (the peer closed, or the connection dropped), `HandshakeRefused` (an HTTP
answer other than 101, e.g. 401 for a missing API key), `TimeoutError`, `OSError`.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections import deque
from typing import Any

#: Bytes asked from the socket per read.
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


class BlockingWebsocket:
    """One client websocket; `send(bytes)` and `recv(timeout) -> bytes | str` in the caller's
    thread.

    Args:
        url: `ws://` or `wss://` (TLS with the system trust store, or `SSL_CERT_FILE`).
        timeout_s: for connecting and the opening handshake.
        headers: extra request headers (e.g. Authorization).
    """

    def __init__(self, url: str, timeout_s: float, headers: dict[str, str] | None = None) -> None:
        from websockets.client import ClientProtocol
        from websockets.uri import parse_uri

        uri = parse_uri(url)
        self.protocol = ClientProtocol(uri, max_size=None)
        #: Frames received but not yet consumed (a read can hold several).
        self._pending: deque[Any] = deque()
        self._parts: list[bytes] = []
        self._text = False
        sock = socket.create_connection((uri.host, uri.port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if uri.secure:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=uri.host)
            self.sock = sock
            request = self.protocol.connect()
            for name, value in (headers or {}).items():
                request.headers[name] = value
            self.protocol.send_request(request)
            self._flush()
            self._handshake(time.monotonic() + timeout_s)
        except BaseException:
            sock.close()
            raise

    def _flush(self) -> None:
        data = self.protocol.data_to_send()
        if data:
            payload = b"".join(d for d in data if d)
            if payload:
                self.sock.sendall(payload)

    def _read(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(READ_SIZE)
        except TimeoutError:
            raise
        except OSError as exc:  # reset by the peer: a dropped connection
            self.protocol.receive_eof()
            raise ClosedError(f"no close frame: {exc}") from None
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        self._flush()  # pongs and the closing handshake's answer

    def _handshake(self, deadline: float) -> None:
        from websockets.http11 import Response

        while True:
            events = self.protocol.events_received()
            for i, event in enumerate(events):
                if isinstance(event, Response):
                    if event.status_code != 101:
                        raise HandshakeRefused(event.status_code)
                    if self.protocol.handshake_exc is not None:
                        raise self.protocol.handshake_exc
                    self._pending.extend(events[i + 1 :])  # frames right behind the answer
                    return
            if self.protocol.handshake_exc is not None:
                raise self.protocol.handshake_exc
            self._read(deadline)

    def send(self, data: bytes) -> None:
        """Send one binary message."""
        from websockets.exceptions import InvalidState

        try:
            self.protocol.send_binary(data)
        except InvalidState:
            raise ClosedError(self._close_detail()) from None
        self._flush()

    def recv(self, timeout_s: float) -> bytes | str:
        """The next data message (bytes for binary, str for text); pings are answered."""
        from websockets.frames import Frame, Opcode

        deadline = time.monotonic() + timeout_s
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
        """Take in whatever arrived while the caller was not reading, without waiting: pings
        are answered, and a close (or a dropped connection) shows in `open`."""
        if not self.open:
            return
        self.sock.setblocking(False)
        try:
            while self.open:
                try:
                    data = self.sock.recv(READ_SIZE)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                except OSError:
                    self.protocol.receive_eof()
                    break
                if data:
                    self.protocol.receive_data(data)
                else:
                    self.protocol.receive_eof()
                self._flush()
        finally:
            with contextlib.suppress(OSError):
                self.sock.setblocking(True)

    def _close_detail(self) -> str:
        rcvd = self.protocol.close_rcvd
        if rcvd is None:
            return "no close frame: the server process died or the network dropped"
        return f"code {rcvd.code}: {rcvd.reason}" if rcvd.reason else f"code {rcvd.code}"

    @property
    def open(self) -> bool:
        from websockets.protocol import State

        return bool(self.protocol.state is State.OPEN)

    def close(self) -> None:
        """Start the closing handshake (best effort) and close the socket."""
        with contextlib.suppress(Exception):
            if self.open:
                self.protocol.send_close()
                self._flush()
        with contextlib.suppress(OSError):
            self.sock.close()

    def __del__(self) -> None:  # never leave a socket open behind
        sock: Any = getattr(self, "sock", None)
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.close()
