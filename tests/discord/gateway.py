"""A loopback stand-in for Discord's gateway: the websocket a bot process logs in to.

dpytest fakes the gateway inside the bot's own process; a bot started as a
process of its own (`toolloop discord`) needs a real one. This websocket
speaks the gateway's protocol as far as a bot that answers messages needs:
HELLO, IDENTIFY answered by READY and one guild with its text channel
(GUILD_CREATE), heartbeats acknowledged, and a user's message sent with `say`
as MESSAGE_CREATE. Frames are plain JSON text, which discord.py reads as it
reads compressed ones. `DiscordServer` serves it at `gateway_url`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import WSMsgType, web

#: The ids of the world the gateway describes (the bot's are `discord_server.BOT_ID`'s).
GUILD_ID = 1_000_000_000_000_000_002
CHANNEL_ID = 1_000_000_000_000_000_010
USER_ID = 1_000_000_000_000_000_020
HELLO, IDENTIFY, HEARTBEAT, HEARTBEAT_ACK, DISPATCH = 10, 2, 1, 11, 0
JOINED = "2026-12-01T00:00:00+00:00"


class Gateway:
    """Discord's gateway for one bot at a time: `identified` once it logged in, `say` a
    user's message to it."""

    def __init__(self, bot: dict[str, Any]) -> None:
        """`bot` is the bot's user, as `users/@me` answers it."""
        self.bot = bot
        self.identified = asyncio.Event()
        self._socket: web.WebSocketResponse | None = None
        self._sequence = itertools.count(1)
        self._ids = itertools.count(7_000_000_000_000_000_001)

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        """One connection: HELLO, then READY and the guild once the bot identifies."""
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_str(json.dumps({"op": HELLO, "d": {"heartbeat_interval": 45_000}}))
        async for frame in socket:
            if frame.type is not WSMsgType.TEXT:
                continue
            op = json.loads(frame.data)["op"]
            if op == HEARTBEAT:
                await socket.send_str(json.dumps({"op": HEARTBEAT_ACK}))
            elif op == IDENTIFY:
                await self._dispatch(socket, "READY", self._ready())
                await self._dispatch(socket, "GUILD_CREATE", self._guild())
                self._socket = socket
                self.identified.set()
        if self._socket is socket:
            self._socket, self.identified = None, asyncio.Event()
        return socket

    async def say(self, content: str) -> int:
        """A user's message in the guild's channel, mentioning the bot; its id."""
        assert self._socket is not None, "no bot is logged in to the gateway"
        message_id = next(self._ids)
        await self._dispatch(
            self._socket,
            "MESSAGE_CREATE",
            {
                "id": str(message_id),
                "channel_id": str(CHANNEL_ID),
                "guild_id": str(GUILD_ID),
                "type": 0,
                "content": f"<@{self.bot['id']}> {content}",
                "author": {
                    "id": str(USER_ID),
                    "username": "ada",
                    "discriminator": "0",
                    "avatar": None,
                },
                "member": {"roles": [], "joined_at": JOINED, "deaf": False, "mute": False},
                "mentions": [self.bot],
                "mention_roles": [],
                "mention_everyone": False,
                "attachments": [],
                "embeds": [],
                "pinned": False,
                "tts": False,
                "timestamp": JOINED,
                "edited_timestamp": None,
                "flags": 0,
            },
        )
        return message_id

    async def _dispatch(self, socket: web.WebSocketResponse, event: str, data: object) -> None:
        frame = {"op": DISPATCH, "t": event, "s": next(self._sequence), "d": data}
        await socket.send_str(json.dumps(frame))

    def _ready(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": "session",
            "resume_gateway_url": "ws://127.0.0.1:1/unused",
            "application": {"id": self.bot["id"], "flags": 0},
        }

    def _guild(self) -> dict[str, Any]:
        return {
            "id": str(GUILD_ID),
            "name": "guild",
            "unavailable": False,
            "owner_id": str(USER_ID),
            "member_count": 2,
            "roles": [
                {
                    "id": str(GUILD_ID),
                    "name": "@everyone",
                    "permissions": str((1 << 50) - 1),
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                }
            ],
            "channels": [
                {
                    "id": str(CHANNEL_ID),
                    "type": 0,
                    "guild_id": str(GUILD_ID),
                    "name": "general",
                    "position": 0,
                    "permission_overwrites": [],
                }
            ],
            "members": [],
            "emojis": [],
            "stickers": [],
            "threads": [],
            "features": [],
        }
