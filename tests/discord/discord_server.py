"""A loopback stand-in for Discord's message routes, with a plan of failures.

dpytest answers every request in memory and cannot refuse one the way Discord
does (a deleted message's 404, a 429 with its `retry_after`, a 503). This
aiohttp server answers the routes the host uses (log in, fetch a channel,
create, edit and delete a message, the typing indicator, the global slash
commands, the application) as Discord does, records each request, and answers from `plan` first:
`server.plan("PATCH", refusal(404, 10008))` makes the next edit fail as
Discord fails an edit of a deleted message. A message created with a `nonce` and
`enforce_nonce: true` (discord.py sends both with every `send`) is created once:
the same author's later create with that nonce within `NONCE_WINDOW_S` gets the
message already created (as it is now) back, as Discord documents for
`enforce_nonce`. `before_answer` lets a test act between creating a message and
answering (kill the bot there, say).
`connect` points discord.py's real `HTTPClient` (its rate limiter and retries
included) at it, under the objects of a dpytest-configured client.

dpytest cannot fire interactions either: `press` (a button) and `submit` (a
modal) build the INTERACTION_CREATE payload Discord's gateway sends and hand it
to discord.py's own gateway parser, and the server answers the interaction
callback route as Discord does, applying a message update to the message.

A bot run as a process of its own logs in to the server's `gateway`
(`gateway.Gateway`) at `gateway_url`, where `gateway.say` sends it a user's message.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self

import anyio
import attrs
import discord
import pytest
from aiohttp import web

from tests.discord.gateway import GUILD_ID, Gateway

BOT_ID = 1_000_000_000_000_000_001
APPLICATION_ID = 4242
BOT = {"id": str(BOT_ID), "username": "bot", "discriminator": "0", "avatar": None, "bot": True}
"""The bot's user, as Discord describes it."""
NONCE_WINDOW_S = 300.0
"""How long a create's enforced nonce returns the message it made ("the past few minutes")."""


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


@attrs.frozen
class Callback:
    """One interaction response: its type (4 a message, 7 a message update, 9 a modal)."""

    interaction_id: int
    type: int
    data: dict[str, Any]

    @property
    def ephemeral(self) -> bool:
        return bool(self.data.get("flags", 0) & 64)


class DiscordServer:
    """Discord's message routes on loopback; `requests` lists what arrived, failures included."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self.typing: list[int] = []
        self.commands: list[dict[str, Any]] = []
        """The application's global slash commands; `syncs` counts their bulk overwrites."""
        self.syncs = 0
        self.callbacks: list[Callback] = []
        """Every interaction response, in order."""
        self._pressed_on: dict[int, int] = {}
        """The message each interaction was fired from."""
        self._plans: dict[str, collections.deque[Refusal]] = collections.defaultdict(
            collections.deque
        )
        self._ids = itertools.count(8_000_000_000_000_000_001)
        self._nonces: dict[tuple[str, str], tuple[int, float]] = {}
        """Each enforced nonce, by (author id, nonce): the message it made, and when."""
        self.before_answer: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        """Awaited with each newly created message before the create is answered."""
        app = web.Application()
        app.router.add_get("/api/v10/users/@me", self._me)
        app.router.add_get("/api/v10/channels/{channel}", self._channel)
        app.router.add_post("/api/v10/channels/{channel}/messages", self._create)
        app.router.add_patch("/api/v10/channels/{channel}/messages/{message}", self._edit)
        app.router.add_delete("/api/v10/channels/{channel}/messages/{message}", self._delete)
        app.router.add_post("/api/v10/channels/{channel}/typing", self._typing)
        app.router.add_get("/api/v10/applications/{app}/commands", self._commands)
        app.router.add_put("/api/v10/applications/{app}/commands", self._sync)
        app.router.add_post("/api/v10/interactions/{id}/{token}/callback", self._callback)
        app.router.add_get("/api/v10/oauth2/applications/@me", self._application)
        self.gateway = Gateway(BOT)
        """The gateway a bot process logs in to (`gateway_url`); dpytest needs none."""
        app.router.add_get("/gateway", self.gateway.handle)
        self._runner = web.AppRunner(app)
        self.base_url = self.gateway_url = ""

    def plan(self, method: str, *answers: Refusal, containing: str | None = None) -> None:
        """The next requests with `method` get these answers, in order, before any success;
        with `containing`, only requests whose JSON body contains that text count."""
        key = method if containing is None else f"{method} {containing}"
        self._plans[key].extend(answers)

    def contents(self, channel_id: int) -> list[str]:
        """The current text of every message in the channel, oldest first."""
        return [m["content"] for m in self.messages.values() if m["channel_id"] == str(channel_id)]

    def posts(self) -> int:
        """How many text messages were asked for (each POST with content, a nonce's repeat
        included)."""
        return sum(1 for r in self.requests if r.method == "POST" and "content" in r.body)

    def with_components(self, channel_id: int) -> list[dict[str, Any]]:
        """The channel's messages that carry components (buttons), oldest first."""
        return [
            m
            for m in self.messages.values()
            if m["channel_id"] == str(channel_id) and m.get("components")
        ]

    async def press(
        self, client: discord.Client, message_id: int, custom_id: str, user: discord.Member
    ) -> Callback:
        """`user` presses the button `custom_id` of the message: discord.py parses the
        gateway's INTERACTION_CREATE; returns the bot's response once its handling ended."""
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._interact(client, 3, data, message_id, user)

    async def submit(
        self, client: discord.Client, modal: Callback, values: dict[str, str], user: discord.Member
    ) -> Callback:
        """`user` submits the modal the bot opened (`modal`, a type 9 response) with
        `values` by text input custom_id; returns the bot's response."""
        assert modal.type == 9, modal
        components = [_filled(row, values) for row in modal.data["components"]]
        data = {"custom_id": modal.data["custom_id"], "components": components}
        return await self._interact(client, 5, data, self._pressed_on[modal.interaction_id], user)

    async def _interact(
        self,
        client: discord.Client,
        kind: int,
        data: dict[str, Any],
        message_id: int,
        user: discord.Member,
    ) -> Callback:
        interaction_id = next(self._ids)
        self._pressed_on[interaction_id] = message_id
        message = self.messages[message_id]
        payload = {
            "id": str(interaction_id),
            "application_id": str(APPLICATION_ID),
            "type": kind,
            "token": f"token-{interaction_id}",
            "version": 1,
            "guild_id": str(user.guild.id),
            "channel_id": message["channel_id"],
            "channel": {  # the partial channel Discord sends
                "id": message["channel_id"],
                "type": 0,
                "guild_id": str(user.guild.id),
                "name": "general",
                "position": 0,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
            },
            "member": {
                "user": {
                    "id": str(user.id),
                    "username": user.name,
                    "discriminator": "0",
                    "global_name": None,
                    "avatar": None,
                },
                "nick": user.nick,
                "roles": [str(role.id) for role in user.roles if not role.is_default()],
                "joined_at": "2026-12-04T17:00:00+00:00",
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            },
            "message": message,
            "data": data,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 0,
            "attachment_size_limit": 8 * 1024 * 1024,
        }
        store = client._connection._view_store
        client._connection.parsers["INTERACTION_CREATE"](payload)
        handling = list(store._ViewStore__tasks)  # type: ignore[attr-defined]
        with anyio.fail_after(10):  # the bot handled the interaction: its tasks ended
            await asyncio.gather(*handling)
        answers = [c for c in self.callbacks if c.interaction_id == interaction_id]
        assert len(answers) == 1, f"the bot answered interaction {interaction_id} {answers}"
        return answers[0]

    async def __aenter__(self) -> Self:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/api/v10"
        self.gateway_url = f"ws://127.0.0.1:{port}/gateway"
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
        return _json(BOT)

    async def _application(self, request: web.Request) -> web.Response:
        """The bot's application, which discord.py reads when it logs in."""
        return _json(
            {
                "id": str(APPLICATION_ID),
                "name": "bot",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": BOT,
                "verify_key": "0",
                "flags": 0,
            }
        )

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
        text = json.dumps(body, ensure_ascii=False)
        keys = [k for k in self._plans if k.startswith(f"{request.method} ") and self._plans[k]]
        matching = [k for k in keys if k.split(" ", 1)[1] in text]
        plan = self._plans[matching[0] if matching else request.method]
        if not plan:
            return None
        answer = plan.popleft()
        payload = answer.body or {"message": answer.message, "code": answer.code}
        return _json(payload, status=answer.status, headers=answer.headers)

    async def _channel(self, request: web.Request) -> web.Response:
        """A guild text channel under the id asked for (a host fetches one its cache lacks)."""
        if refused := await self._answer(request, {}):
            return refused
        return _json(
            {
                "id": request.match_info["channel"],
                "type": 0,
                "guild_id": str(GUILD_ID),
                "name": "general",
                "position": 0,
                "permission_overwrites": [],
            }
        )

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if refused := await self._answer(request, body):
            return refused
        nonce = (str(BOT["id"]), str(body["nonce"])) if body.get("enforce_nonce") else None
        if nonce in self._nonces:
            made, at = self._nonces[nonce]
            if made in self.messages and time.monotonic() - at < NONCE_WINDOW_S:
                return _json(self.messages[made])  # the same message, not a second one
        message_id = next(self._ids)
        self.messages[message_id] = _message(message_id, request.match_info["channel"], body)
        if nonce is not None:
            self._nonces[nonce] = (message_id, time.monotonic())
        if self.before_answer is not None:
            await self.before_answer(self.messages[message_id])
        return _json(self.messages[message_id])

    async def _edit(self, request: web.Request) -> web.Response:
        body = await request.json()
        if refused := await self._answer(request, body):
            return refused
        message_id = int(request.match_info["message"])
        if message_id not in self.messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        self.messages[message_id].update({k: v for k, v in body.items() if k in _EDITABLE})
        return _json(self.messages[message_id])

    async def _delete(self, request: web.Request) -> web.Response:
        if refused := await self._answer(request, {}):
            return refused
        self.messages.pop(int(request.match_info["message"]), None)
        return web.Response(status=204)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        interaction_id = int(request.match_info["id"])
        kind, data = body["type"], body.get("data") or {}
        self.callbacks.append(Callback(interaction_id, kind, data))
        answer: dict[str, Any] = {"interaction": {"id": str(interaction_id), "type": 3}}
        if kind == 7:  # the message the component was on, updated
            message = self.messages[self._pressed_on[interaction_id]]
            message.update({k: v for k, v in data.items() if k in _EDITABLE})
            answer["resource"] = {"type": 7, "message": message}
        elif kind == 4:
            message_id = next(self._ids)
            channel_id = self.messages[self._pressed_on[interaction_id]]["channel_id"]
            answer["resource"] = {"type": 4, "message": _message(message_id, channel_id, data)}
        else:
            answer["resource"] = {"type": kind}
        return _json(answer)

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


_EDITABLE = ("content", "embeds", "components")
"""The fields of a message an edit or a message update replaces."""


def _filled(component: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """A modal's component as its submission carries it: text inputs with their values."""
    if component["type"] == 1:
        return {"type": 1, "components": [_filled(c, values) for c in component["components"]]}
    if component["type"] == 18:
        return {"type": 18, "component": _filled(component["component"], values)}
    custom_id = component["custom_id"]
    return {"type": component["type"], "custom_id": custom_id, "value": values.get(custom_id, "")}


def _message(message_id: int, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(message_id),
        "channel_id": channel_id,
        "type": 0,
        "content": body.get("content", ""),
        "embeds": body.get("embeds", []),
        "components": body.get("components", []),
        "author": BOT,
        "attachments": [],
        "mentions": [],
        "mention_roles": [],
        "mention_everyone": False,
        "pinned": False,
        "tts": False,
        "timestamp": "2026-12-04T17:00:00+00:00",
        "edited_timestamp": None,
        "flags": 0,
        **({"nonce": str(body["nonce"])} if "nonce" in body else {}),
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
