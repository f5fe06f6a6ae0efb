"""A loopback stand-in for Discord's webhook routes, for the persona's webhook identity.

dpytest fakes the bot's own HTTP client but not webhooks, which discord.py
sends through their own adapter over aiohttp. This aiohttp server answers the
routes the adapter uses (execute with `wait`, fetch, edit and delete a
webhook message) the way Discord does, and records every request; `discord.http.Route`
is pointed at it, so the requests are discord.py's own, over real HTTP.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Self

import attrs
from aiohttp import web

WEBHOOK_ID, TOKEN = 4242, "webhook-token"


@attrs.frozen
class Request:
    method: str
    message_id: int | None
    body: dict[str, Any]


class WebhookServer:
    """Discord's webhook message routes on loopback; `requests` lists what arrived."""

    def __init__(self, channel_id: int) -> None:
        self.channel_id = channel_id
        self.requests: list[Request] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count(9_000_000_000_000_000_001)
        app = web.Application()
        base = f"/api/v10/webhooks/{WEBHOOK_ID}/{TOKEN}"
        app.router.add_post(base, self._execute)
        app.router.add_get(base + "/messages/{message}", self._fetch)
        app.router.add_patch(base + "/messages/{message}", self._edit)
        app.router.add_delete(base + "/messages/{message}", self._delete)
        self._runner = web.AppRunner(app)
        self.base_url = ""

    async def __aenter__(self) -> Self:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/api/v10"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._runner.cleanup()

    async def _execute(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(Request("POST", None, body))
        message_id = next(self._ids)
        self.messages[message_id] = self._message(message_id, body)
        return _json(self.messages[message_id])

    async def _fetch(self, request: web.Request) -> web.Response:
        message_id = int(request.match_info["message"])
        self.requests.append(Request("GET", message_id, {}))
        if message_id not in self.messages:
            unknown = {"message": "Unknown Message", "code": 10008}
            return web.Response(
                body=json.dumps(unknown).encode(), status=404, content_type="application/json"
            )
        return _json(self.messages[message_id])

    async def _edit(self, request: web.Request) -> web.Response:
        message_id, body = int(request.match_info["message"]), await request.json()
        self.requests.append(Request("PATCH", message_id, body))
        self.messages[message_id].update(body)
        return _json(self.messages[message_id])

    async def _delete(self, request: web.Request) -> web.Response:
        message_id = int(request.match_info["message"])
        self.requests.append(Request("DELETE", message_id, {}))
        del self.messages[message_id]
        return web.Response(status=204)

    def _message(self, message_id: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": str(message_id),
            "channel_id": str(self.channel_id),
            "type": 0,
            "content": body.get("content", ""),
            "embeds": body.get("embeds", []),
            "author": {
                "id": str(WEBHOOK_ID),
                "username": body.get("username", "webhook"),
                "discriminator": "0000",
                "avatar": None,
                "bot": True,
            },
            "webhook_id": str(WEBHOOK_ID),
            "attachments": [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": "2026-12-03T18:00:00+00:00",
            "edited_timestamp": None,
            "flags": 0,
        }


def _json(data: dict[str, Any]) -> web.Response:
    """A JSON body as Discord sends it: discord.py parses only `application/json` exactly."""
    return web.Response(body=json.dumps(data).encode(), content_type="application/json")
