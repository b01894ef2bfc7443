"""The console's web app: a token-guarded local server with a JSON API, server-sent events and
the run's stop and pause.

Routes (every one needs an operator's token, as `?token=` or `Authorization: Bearer <token>`;
without one: 401; see `embodied_eval.console.access`):

- `GET /` the page; `GET /api/state` everything it shows, as JSON; `GET /api/events` the same as
  server-sent events: `state` (first, on connect: everything `/api/state` holds, the run's
  status read together with the events it lists; then the window read from the store, re-read
  when an episode is stored and every STORE_POLL_S), `run` (the run's status whenever it
  changes: running, paused, stopping, finished), `real` (the real episode in progress, up to REAL_HZ), `frame` (the
  latest camera frame as a JPEG data URI, up to FRAME_HZ) and `event` (each published event:
  episodes stored, real episodes started and ended, safety events, operator requests);
- `GET /api/frame.jpg` the latest camera frame; `GET /files/{episode}/{n}` an episode's n-th
  recorded artifact (only what the store lists);
- `POST /api/stop`, `/api/pause`, `/api/resume` (no body, or `{}`): see `LiveState.request`;
  recorded as asked by the operator whose token the request carried. 409 when no run is
  attached.

`ConsoleServer` runs it with uvicorn in a thread of the calling process (beside a run, sharing
its `LiveState`), on a socket bound before the thread starts, so a port in use is an EvalError;
an address other machines can reach needs TLS or `insecure_remote` (`access.check_bind`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from embodied_eval.console.access import Operators, TLSFiles, check_bind, listening_socket
from embodied_eval.console.frames import frame_jpeg
from embodied_eval.console.window import window_view
from embodied_eval.errors import EvalError
from embodied_eval.live_channel import LiveState, default_user
from embodied_eval.protocol.reader import Protocol

#: Seconds between re-reads of the store when nothing was published (another process may write).
STORE_POLL_S = 2.0
#: Shortest time between two re-reads of the store, s.
STORE_MIN_S = 0.5
ASSETS = Path(__file__).with_name("assets")


class ConsoleServer:
    """The console of one window (and, given a run's `LiveState`, of the run).

    Args:
        db_path: the store, read read-only.
        protocol: the window's protocol.
        live: the run's live state (None: watch the store only; stop and pause answer 409).
        host / port: where to listen (default 127.0.0.1; port 0 picks a free one).
        manifest_hash: the manifest to show (default: the run's, else the newest of the protocol).
        max_retries: the run's `--max-retries`.
        operators: who may use it, each with their token (default: one, the live state's user).
        tls: certificate and key to serve HTTPS with (None: plain HTTP).
        insecure_remote: allow plain HTTP on an address other machines can reach.
        host_option / port_option: the command-line options that set `host` and `port` (named
            in the errors).
    """

    def __init__(
        self,
        db_path: Path,
        protocol: Protocol,
        *,
        live: LiveState | None = None,
        host: str = "127.0.0.1",
        port: int = 8050,
        manifest_hash: str | None = None,
        max_retries: int = 1,
        operators: Operators | None = None,
        tls: TLSFiles | None = None,
        insecure_remote: bool = False,
        host_option: str = "--host",
        port_option: str = "--port",
    ) -> None:
        self.db_path = Path(db_path)
        self.protocol = protocol
        if operators is None:
            operators = Operators.issue([live.user if live is not None else default_user()])
        self.operators = operators
        self.live = live if live is not None else LiveState(operators.first)
        self.host = host
        self.port = port
        self.manifest_hash = manifest_hash
        self.max_retries = max_retries
        self.tls = tls
        self.insecure_remote = insecure_remote
        self.host_option, self.port_option = host_option, port_option
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._view: tuple[int, dict[str, Any]] | None = None
        self._view_at = 0.0
        self._view_seq = -1
        self._view_lock = threading.Lock()
        self._frame_cache: tuple[int, str] = (0, "")

    @property
    def closing(self) -> bool:
        """The server is shutting down: event streams end."""
        return self._server is None or bool(self._server.should_exit)

    @property
    def base_url(self) -> str:
        """The console's address, without a token."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/"

    def url_for(self, user: str) -> str:
        """The sign-in link of one operator (holds their token: show it to them only)."""
        return f"{self.base_url}?token={self.operators.tokens[user]}"

    @property
    def token(self) -> str:
        """The first operator's token."""
        return self.operators.tokens[self.operators.first]

    @property
    def url(self) -> str:
        """The first operator's sign-in link."""
        return self.url_for(self.operators.first)

    # ------------------------------------------------------------------ state

    def view(self) -> tuple[int, dict[str, Any]]:
        """(version, the window view): the latest read of the store (read now only before the
        first; the refresher thread keeps it current, see `_refresh`)."""
        current = self._view
        if current is not None:
            return current
        with self._view_lock:
            if self._view is None:
                self._read(self.live.last_seq)
            assert self._view is not None
            return self._view

    def _read(self, seq: int) -> None:
        info = self.live.run_info()
        manifest = self.manifest_hash or info.get("manifest_hash")
        version = (self._view[0] + 1) if self._view is not None else 1
        try:
            data = window_view(
                self.db_path,
                self.protocol,
                manifest_hash=manifest,
                max_retries=int(info.get("max_retries", self.max_retries)),
                since=str(info.get("started_at", "")) if self.live.attached else "",
            )
        except EvalError as exc:
            data = {"error": str(exc), "html": {}}
        self._view, self._view_at, self._view_seq = (version, data), time.monotonic(), seq

    def _refresh(self) -> None:
        """Re-read the store when something was published since the last read (at most every
        STORE_MIN_S) or STORE_POLL_S passed (another process may write it); the event streams
        never wait for the store."""
        while not self.closing:
            time.sleep(0.05)
            now, seq = time.monotonic(), self.live.last_seq
            due = now - self._view_at >= STORE_POLL_S or (
                seq != self._view_seq and now - self._view_at >= STORE_MIN_S
            )
            if due:
                with self._view_lock:
                    self._read(seq)

    def state(self, user: str = "") -> dict[str, Any]:
        """Everything the page shows to `user` (the operator viewing it), as JSON."""
        version, window = self.view()
        _, real = self.live.real()
        run, events, seq = self.live.snapshot(50)
        return {
            "version": version,
            "run": run,
            "user": user,
            "window": window,
            "real": real,
            "events": events,
            "seq": seq,
        }

    def frame_uri(self) -> tuple[int, str]:
        """(frame count, JPEG data URI) of the latest camera frame ((0, "") before one)."""
        import base64

        frame = self.live.frame()
        if frame is None:
            return 0, ""
        count, _, image = frame
        if self._frame_cache[0] != count:
            jpeg = base64.b64encode(frame_jpeg(image)).decode("ascii")
            self._frame_cache = (count, "data:image/jpeg;base64," + jpeg)
        return self._frame_cache

    def page(self) -> str:
        html = (ASSETS / "console.html").read_text(encoding="utf-8")
        css = (ASSETS / "console.css").read_text(encoding="utf-8")
        from embodied_eval.certificate.html_parts import CSS

        js = (ASSETS / "console.js").read_text(encoding="utf-8")
        title = f"{self.protocol.name} · {self.protocol.window_id}"
        return (
            html.replace("/*CSS*/", CSS + css)
            .replace("/*JS*/", js)
            .replace("{{TITLE}}", _escape(title))
        )

    def user_for(self, token: str | None) -> str | None:
        """The operator whose token this is (None: not one of theirs)."""
        return self.operators.user_for(token)

    # ------------------------------------------------------------------ serving

    def start(self) -> str:
        """Bind, start serving in a thread; returns the first operator's sign-in link."""
        check_bind(
            self.host,
            tls=self.tls is not None,
            insecure_remote=self.insecure_remote,
            what="console",
            option=self.host_option,
        )
        if self.tls is not None:
            self.tls.context()  # the files load, or a one-line error before anything listens
        try:
            import uvicorn

            from embodied_eval.console.routes import build_app
        except ImportError as exc:
            raise EvalError(
                f"the console needs FastAPI and uvicorn ({exc}): install the 'console' extra, "
                "pip install 'embodied-eval[console]'",
                key="console",
            ) from None

        sock = listening_socket(
            self.host, self.port, what="console", option=self.port_option, key="console_port"
        )
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            build_app(self),
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
            access_log=False,
            ssl_certfile=str(self.tls.cert) if self.tls else None,
            ssl_keyfile=str(self.tls.key) if self.tls else None,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise EvalError("console: the web server did not start", key="console_port")
        threading.Thread(target=self._refresh, name="console-store", daemon=True).start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> ConsoleServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


__all__ = ["ConsoleServer"]
