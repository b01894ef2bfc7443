"""The console's FastAPI routes and its event stream (see `embodied_eval.console.app` for what
each serves). `console` is the `ConsoleServer` being served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.sse import EventSourceResponse

from embodied_eval.console.access import token_in_request
from embodied_eval.console.frames import frame_jpeg
from embodied_eval.console.window import episode_artifact
from embodied_eval.errors import EvalError

#: How often the real episode's fields and camera frames reach the page, at most, Hz.
REAL_HZ = 10.0
FRAME_HZ = 5.0
#: How often the event stream looks for news, s.
TICK_S = 0.05

UNAUTHORIZED = (
    "this console needs an operator's token: open your sign-in link (shown on the terminal "
    "that started it, …/?token=…), or send `Authorization: Bearer <token>` (the token file)"
)


class TokenGuard:
    """ASGI middleware: 401 for any request without an operator's token (query or header);
    the operator's name is put in the request's state (`request.state.user`)."""

    def __init__(self, app: Any, console: Any) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            token = token_in_request(scope.get("query_string", b"").decode("latin-1"),
                                     request.headers)  # fmt: skip
            user = self.console.user_for(token)
            if user is None:
                response = JSONResponse({"error": UNAUTHORIZED}, status_code=401)
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)


async def event_stream(console: Any, user: str) -> Any:
    """The page's server-sent events for operator `user` (see `embodied_eval.console.app`)."""
    from fastapi.sse import ServerSentEvent

    live = console.live
    state = await asyncio.to_thread(console.state, user)
    version, seq, run = state["version"], state["seq"], state["run"]
    yield ServerSentEvent(data=state, event="state")
    real_version, frame_count = -1, 0
    real_due = frame_due = 0.0
    while not console.closing:
        now = time.monotonic()
        for event in live.events_since(seq):
            seq = event["seq"]
            yield ServerSentEvent(data=event, event="event", id=str(seq))
        current_run = live.run_info()
        if current_run != run:
            run = current_run
            yield ServerSentEvent(data=run, event="run")
        current, window = console.view()
        if current != version:
            version = current
            yield ServerSentEvent(
                data={"version": version, "window": window, "run": live.run_info()},
                event="state",
            )
        if now >= real_due:
            v, real = live.real()
            if v != real_version:
                real_version, real_due = v, now + 1.0 / REAL_HZ
                yield ServerSentEvent(data=real, event="real")
        if now >= frame_due:
            count, uri = await asyncio.to_thread(console.frame_uri)
            if count != frame_count:
                frame_count, frame_due = count, now + 1.0 / FRAME_HZ
                yield ServerSentEvent(data={"count": count, "uri": uri}, event="frame")
        await asyncio.sleep(TICK_S)


def check_body(raw: bytes) -> None:
    """A stop/pause/resume request's body is empty or `{}`: who asks is the operator whose token
    the request carries, never a name in the body (EvalError otherwise)."""
    if not raw.strip():
        return
    data = None
    with contextlib.suppress(ValueError):
        data = json.loads(raw)
    if data == {}:
        return
    if isinstance(data, dict):
        raise EvalError(
            f"the request takes no fields (got {', '.join(sorted(map(str, data)))}): who asks "
            "is the operator whose token it carries",
            key="body",
        )
    raise EvalError("the body must be empty or {}", key="body")


def build_app(console: Any) -> FastAPI:
    """The app serving `console`."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TokenGuard, console=console)

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return console.page()

    @app.get("/api/state")
    def state(request: Request) -> JSONResponse:
        return JSONResponse(console.state(request.state.user))

    @app.get("/api/events", response_class=EventSourceResponse)
    async def events(request: Request) -> Any:
        async for item in event_stream(console, request.state.user):
            yield item

    @app.get("/api/frame.jpg")
    def frame() -> Response:
        found = console.live.frame()
        if found is None:
            return JSONResponse({"error": "no camera frame received yet"}, status_code=404)
        return Response(frame_jpeg(found[2]), media_type="image/jpeg")

    @app.get("/files/{episode_id}/{index}")
    def artifact(episode_id: str, index: int) -> Response:
        try:
            path = episode_artifact(console.db_path, episode_id, index)
        except EvalError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return FileResponse(path, filename=path.name)

    async def operator(action: str, request: Request) -> JSONResponse:
        try:
            check_body(await request.body())
        except EvalError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        via = "page" if request.headers.get("x-console-via") == "page" else "api"
        try:
            done = await asyncio.to_thread(console.live.request, action, request.state.user, via)
        except EvalError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse(done.to_json())

    @app.post("/api/stop")
    async def stop(request: Request) -> JSONResponse:
        return await operator("stop", request)

    @app.post("/api/pause")
    async def pause(request: Request) -> JSONResponse:
        return await operator("pause", request)

    @app.post("/api/resume")
    async def resume(request: Request) -> JSONResponse:
        return await operator("resume", request)

    return app
