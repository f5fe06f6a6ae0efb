"""A loopback stand-in for Discord's message routes, with a plan of failures.

dpytest answers every request in memory and cannot refuse one the way Discord
does (a deleted message's 404, a 429 with its `retry_after`, a 503). This
aiohttp server answers the routes the host uses (log in, create, edit and
delete a message, the typing indicator, the global slash commands) as Discord
does, records each request, and answers from `plan` first:
`server.plan("PATCH", refusal(404, 10008))` makes the next edit fail as
Discord fails an edit of a deleted message.
`connect` points discord.py's real `HTTPClient` (its rate limiter and retries
included) at it, under the objects of a dpytest-configured client.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
from typing import Any, Self

import attrs
import discord
import pytest
from aiohttp import web

BOT_ID = 1_000_000_000_000_000_001


@attrs.frozen
class Request:
    method: str
    channel_id: int
    message_id: int | None
    body: dict[str, Any]


@attrs.frozen
class Refusal:
    """One planned error answer: the HTTP status, Discord's JSON error code, headers."""

    status: int
    code: int = 0
    message: str = "refused"
    headers: dict[str, str] = attrs.field(factory=dict)
    body: dict[str, Any] = attrs.field(factory=dict)


def refusal(status: int, code: int = 0, message: str = "refused") -> Refusal:
    """An error answer as Discord sends it."""
    return Refusal(status, code, message)


def rate_limited(retry_after: float = 0.01) -> Refusal:
    """A 429 that discord.py's client honours: it waits `retry_after` and tries again."""
    return Refusal(
        429,
        message="You are being rate limited.",
        headers={"Via": "1.1 google", "Retry-After": str(retry_after)},
        body={"retry_after": retry_after, "global": False},
    )


class DiscordServer:
    """Discord's message routes on loopback; `requests` lists what arrived, failures included."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self.typing: list[int] = []
        self.commands: list[dict[str, Any]] = []
        """The application's global slash commands; `syncs` counts their bulk overwrites."""
        self.syncs = 0
        self._plans: dict[str, collections.deque[Refusal]] = collections.defaultdict(
            collections.deque
        )
        self._ids = itertools.count(8_000_000_000_000_000_001)
        app = web.Application()
        app.router.add_get("/api/v10/users/@me", self._me)
        app.router.add_post("/api/v10/channels/{channel}/messages", self._create)
        app.router.add_patch("/api/v10/channels/{channel}/messages/{message}", self._edit)
        app.router.add_delete("/api/v10/channels/{channel}/messages/{message}", self._delete)
        app.router.add_post("/api/v10/channels/{channel}/typing", self._typing)
        app.router.add_get("/api/v10/applications/{app}/commands", self._commands)
        app.router.add_put("/api/v10/applications/{app}/commands", self._sync)
        self._runner = web.AppRunner(app)
        self.base_url = ""

    def plan(self, method: str, *answers: Refusal) -> None:
        """The next requests with `method` get these answers, in order, before any success."""
        self._plans[method].extend(answers)

    def contents(self, channel_id: int) -> list[str]:
        """The current text of every message in the channel, oldest first."""
        return [m["content"] for m in self.messages.values() if m["channel_id"] == str(channel_id)]

    async def __aenter__(self) -> Self:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/api/v10"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._runner.cleanup()

    async def connect(self, client: discord.Client, monkeypatch: pytest.MonkeyPatch) -> None:
        """Give `client` (configured by dpytest) discord.py's real HTTP client, aimed here."""
        monkeypatch.setattr(discord.http.Route, "BASE", self.base_url)
        http = discord.http.HTTPClient(asyncio.get_running_loop())
        await http.static_login("bot-token")
        client.http = http
        client._connection.http = http
        tree = getattr(client, "tree", None)
        if tree is not None:  # a CommandTree keeps the client's HTTP client of its making
            tree._http = http

    async def _me(self, request: web.Request) -> web.Response:
        return _json({"id": str(BOT_ID), "username": "bot", "discriminator": "0", "bot": True})

    async def _answer(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        """Record the request; the planned refusal for its method, if one is due."""
        message = request.match_info.get("message")
        self.requests.append(
            Request(
                request.method,
                int(request.match_info["channel"]),
                int(message) if message else None,
                body,
            )
        )
        plan = self._plans[request.method]
        if not plan:
            return None
        answer = plan.popleft()
        payload = answer.body or {"message": answer.message, "code": answer.code}
        return _json(payload, status=answer.status, headers=answer.headers)

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if refused := await self._answer(request, body):
            return refused
        message_id = next(self._ids)
        self.messages[message_id] = _message(message_id, request.match_info["channel"], body)
        return _json(self.messages[message_id])

    async def _edit(self, request: web.Request) -> web.Response:
        body = await request.json()
        if refused := await self._answer(request, body):
            return refused
        message_id = int(request.match_info["message"])
        if message_id not in self.messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        self.messages[message_id]["content"] = body.get("content", "")
        return _json(self.messages[message_id])

    async def _delete(self, request: web.Request) -> web.Response:
        if refused := await self._answer(request, {}):
            return refused
        self.messages.pop(int(request.match_info["message"]), None)
        return web.Response(status=204)

    async def _commands(self, request: web.Request) -> web.Response:
        return _json(self.commands)

    async def _sync(self, request: web.Request) -> web.Response:
        self.syncs += 1
        app = request.match_info["app"]
        self.commands = [
            {**command, "id": str(900 + n), "application_id": app, "version": "1"}
            for n, command in enumerate(await request.json())
        ]
        return _json(self.commands)

    async def _typing(self, request: web.Request) -> web.Response:
        if refused := await self._answer(request, {}):
            return refused
        self.typing.append(int(request.match_info["channel"]))
        return web.Response(status=204)


def _message(message_id: int, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(message_id),
        "channel_id": channel_id,
        "type": 0,
        "content": body.get("content", ""),
        "embeds": body.get("embeds", []),
        "author": {"id": str(BOT_ID), "username": "bot", "discriminator": "0", "bot": True},
        "attachments": [],
        "mentions": [],
        "mention_roles": [],
        "mention_everyone": False,
        "pinned": False,
        "tts": False,
        "timestamp": "2026-12-04T17:00:00+00:00",
        "edited_timestamp": None,
        "flags": 0,
    }


def _json(
    data: dict[str, Any] | list[dict[str, Any]],
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """A JSON body as Discord sends it: discord.py parses only `application/json` exactly."""
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers=headers,
        content_type="application/json",
    )
