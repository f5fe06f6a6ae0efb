"""The inspector's web app (Starlette): the page, its JSON and its server-sent events.

Everything it serves ships in the package (`static/`): no build step, nothing
from a CDN. `/api/events` pushes the turns that changed since the last push,
at most `rate` times a second, so a thousand busy turns cost the page a few
messages a second, not one per step: each turn a row of values, not an object
of named fields.

With a `token`, every request must carry it (`Authorization: Bearer TOKEN`, or
`?token=TOKEN` once, which sets an HttpOnly cookie for the page's own
requests). Without one, only requests addressed to a loopback name are
answered, so a web page cannot reach the inspector by rebinding a DNS name to
127.0.0.1.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from toolloop.effects.inspect.board import ROW, Inspector, row_of
from toolloop.effects.inspect.machine import machine
from toolloop.states.errors import InvalidOption

STATIC = Path(__file__).parent / "static"
COOKIE = "toolloop_inspect"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def create_app(
    inspector: Inspector,
    *,
    token: str | None = None,
    rate: float = 10.0,
    host: str = "127.0.0.1",
    closing: threading.Event | None = None,
) -> Starlette:
    """The app over `inspector`; `rate` is the most event pushes a second to each page
    (fewer when many turns change: `ROWS_PER_SECOND`).

    `host` is the address it is bound to: without a token, it and the loopback names
    are the Host headers answered. Once `closing` is set, every event stream ends at its
    next tick, so the server can stop without cutting a page off mid-response.
    """
    closing = threading.Event() if closing is None else closing
    if rate <= 0:
        raise InvalidOption(f"rate must be more than 0 pushes a second, not {rate}")
    drawn = machine()

    async def index(request: Request) -> Response:
        response = FileResponse(STATIC / "index.html")
        if token is not None and request.query_params.get("token") is not None:
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    async def machine_json(request: Request) -> Response:
        return JSONResponse(drawn)

    async def turns(request: Request) -> Response:
        return JSONResponse([view.summary() for view in inspector.turns()])

    async def turn(request: Request) -> Response:
        view = inspector.turn(request.path_params["turn_id"])
        if view is None:
            return JSONResponse({"error": "no such turn (or no longer kept)"}, status_code=404)
        return JSONResponse(view.detail())

    async def events(request: Request) -> Response:
        return StreamingResponse(
            _changes(inspector, request, 1 / rate, closing),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    routes = [
        Route("/", index),
        Route("/api/machine", machine_json),
        Route("/api/turns", turns),
        Route("/api/turns/{turn_id:int}", turn),
        Route("/api/events", events),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    if token is None:
        allowed = [*LOOPBACK_NAMES, host]
        middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed)]
    else:
        middleware = [Middleware(TokenGuard, token=token)]
    return Starlette(routes=routes, middleware=middleware)


async def _changes(
    inspector: Inspector, request: Request, period: float, closing: threading.Event
) -> AsyncIterator[str]:
    """`turns` events: the rows (`ROW`'s fields) of the turns changed since the last, and the
    ids gone; nothing is sent while nothing changed.

    A turn's version is read before its row: a step between the two is sent again next time.
    A push finds a page gone by itself (the response's send ends when the page has left), so
    the page is asked after only on a tick with nothing to send: the ask, a cancelled
    receive, is a third of what an idle tick costs the bot's process.
    """
    sent: dict[int, int] = {}
    while not closing.is_set():
        seen: dict[int, int] = {}
        changed = []
        for view in inspector.turns():
            seen[view.id] = version = view.version
            if sent.get(view.id) != version:
                changed.append(row_of(view))
        gone = sent.keys() - seen.keys()
        sent = seen
        if changed or gone:
            payload = {"fields": ROW, "turns": changed, "removed": sorted(gone)}
            yield f"event: turns\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"
        elif await request.is_disconnected():
            return
        await anyio.sleep(pause(period, len(changed)))


ROWS_PER_SECOND = 1_000
"""The most rows a page is sent a second: when more turns change than that (over 100
between two pushes at 10 a second), it is pushed to less often, down to once in
`LONGEST_PAUSE`. So a page costs the bot about the same however many turns run, and
the browser redraws a busy list a few times a second, not ten."""
LONGEST_PAUSE = 1.0
"""Seconds a page waits at most between pushes, however many turns change (unless its
`rate` asks for fewer pushes): a busy list still moves every second."""


def pause(period: float, sent: int) -> float:
    """Seconds until the next push, after one of `sent` rows: `period`, or longer for many."""
    return max(period, min(sent / ROWS_PER_SECOND, LONGEST_PAUSE))


class TokenGuard:
    """Refuses (401) every request that does not carry the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._carries_token(Request(scope)):
            await self.app(scope, receive, send)
            return
        refusal = PlainTextResponse(
            "toolloop inspect: this inspector needs its token "
            "(open the URL it printed, or send Authorization: Bearer TOKEN)",
            status_code=401,
        )
        await refusal(scope, receive, send)

    def _carries_token(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        offered = [
            header.removeprefix("Bearer ") if header.startswith("Bearer ") else None,
            request.query_params.get("token"),
            request.cookies.get(COOKIE),
        ]
        return any(
            hmac.compare_digest(candidate.encode(), self.token)
            for candidate in offered
            if candidate is not None
        )
