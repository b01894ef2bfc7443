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

from embodied_eval.console.live_state import frame_jpeg
from embodied_eval.console.window import episode_artifact
from embodied_eval.errors import EvalError

#: How often the real episode's fields and camera frames reach the page, at most, Hz.
REAL_HZ = 10.0
FRAME_HZ = 5.0
#: How often the event stream looks for news, s.
TICK_S = 0.05

UNAUTHORIZED = (
    "this console needs its session token: open the URL it printed when it started "
    "(…/?token=…), or send `Authorization: Bearer <token>`"
)


class TokenGuard:
    """ASGI middleware: 401 for any request without the console's token (query or header)."""

    def __init__(self, app: Any, console: Any) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            token = request.query_params.get("token")
            if not self.console.authorized(token, request.headers.get("authorization")):
                response = JSONResponse({"error": UNAUTHORIZED}, status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def event_stream(console: Any) -> Any:
    """The page's server-sent events (see the module docstring)."""
    from fastapi.sse import ServerSentEvent

    live = console.live
    state = await asyncio.to_thread(console.state)
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


def json_body(raw: bytes) -> dict[str, Any]:
    """A request's optional JSON object body ({} when empty)."""
    if not raw.strip():
        return {}
    with contextlib.suppress(ValueError):
        data = json.loads(raw)
        if isinstance(data, dict):
            return data
    raise EvalError('the body must be a JSON object such as {"user": "ana"}', key="body")


def build_app(console: Any) -> FastAPI:
    """The app serving `console`."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TokenGuard, console=console)

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return console.page()

    @app.get("/api/state")
    def state() -> JSONResponse:
        return JSONResponse(console.state())

    @app.get("/api/events", response_class=EventSourceResponse)
    async def events() -> Any:
        async for item in event_stream(console):
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
            body = json_body(await request.body())
        except EvalError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        via = "page" if request.headers.get("x-console-via") == "page" else "api"
        try:
            done = await asyncio.to_thread(
                console.live.request, action, str(body.get("user", "")), via
            )
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
