"""dpytest against discord.py's own objects: a configured bot, a virtual clock, what was sent.

dpytest replaces discord.py's HTTP client with an in-memory Discord, so the
adapter's `channel.send`, `message.edit` and `message.delete` are discord.py's
real code paths; the tests read the result back from dpytest's message log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import discord
import discord.ext.test as dpytest
from discord.ext.test import backend, callbacks

from toolloop.effects.discord import Access

T = TypeVar("T")
EVERY_MESSAGE = Access(answer_all=True)
"""For tests about turns, not about whom the bot answers (test_access.py)."""


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run `main` on a fresh asyncio loop (discord.py is asyncio-only)."""
    return asyncio.run(_run(main))


async def _run(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


class VirtualClock:
    """The adapter's clock, moved only by the test: `sleep_until` waits for `advance`."""

    def __init__(self) -> None:
        self.time = 0.0
        self._moved = asyncio.Event()

    def now(self) -> float:
        return self.time

    async def sleep_until(self, deadline: float) -> None:
        while self.time < deadline:
            await self._moved.wait()

    def advance(self, seconds: float) -> None:
        self.time += seconds
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()


class Edits:
    """Every message edit dpytest saw, with the virtual time it happened at."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.log: list[tuple[float, int, str]] = []
        callbacks.set_callback(self._edited, "edit_message")

    async def _edited(self, channel: Any, message: discord.Message, fields: Any) -> None:
        content = fields["params"].payload.get("content")
        self.log.append((self.clock.now(), message.id, content))


class Requests:
    """Every message the bot created and every edit dpytest saw, with its virtual time.

    Made after `configured`, whose dpytest callback for new messages it wraps.
    """

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.log: list[tuple[float, str, str]] = []
        """(time, "send" | "edit", content), in order."""
        sent = callbacks.get_callback("send_message")

        async def on_send(message: discord.Message) -> None:
            self.log.append((clock.now(), "send", message.content))
            await sent(message)

        callbacks.set_callback(on_send, "send_message")
        callbacks.set_callback(self._edited, "edit_message")

    async def _edited(self, channel: Any, message: discord.Message, fields: Any) -> None:
        self.log.append((self.clock.now(), "edit", fields["params"].payload.get("content")))

    def most_in_any(self, seconds: float) -> int:
        """The most requests that went in any `seconds`-long span."""
        times = [at for at, _, _ in self.log]
        return max((sum(1 for t in times if s <= t < s + seconds) for s in times), default=0)


async def configured(client: discord.Client | None = None, channels: int = 2) -> discord.Client:
    """A client wired to dpytest's in-memory Discord with `channels` text channels."""
    for event in ("edit_message", "delete_message"):  # a callback a previous test set
        callbacks.remove_callback(event)
    client = client or discord.Client(intents=discord.Intents.all())
    await client._async_setup_hook()
    dpytest.configure(client, text_channels=channels, members=2)
    return client


def channel(index: int = 0) -> discord.TextChannel:
    found = dpytest.get_config().channels[index]
    assert isinstance(found, discord.TextChannel)
    return found


def _messages(place: discord.TextChannel) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = backend._cur_config.messages.get(place.id, [])  # type: ignore[attr-defined]
    return data


def contents(place: discord.TextChannel) -> list[str]:
    """The current text of every message in `place` (edits applied, deleted ones gone)."""
    return [m.get("content") or "" for m in _messages(place)]


def embeds(place: discord.TextChannel) -> list[discord.Embed]:
    """Every embed posted in `place`, as discord.py reads it back."""
    return [discord.Embed.from_dict(e) for m in _messages(place) for e in m.get("embeds") or []]


async def deny_sending(place: discord.TextChannel) -> None:
    """Take Send Messages away from everyone in `place` (the bot included)."""
    await dpytest.set_permission_overrides(place.guild.default_role, place, send_messages=False)


class Payloads:
    """The JSON payload of every message the bot created (dpytest drops stickers and replies).

    dpytest's `send_message` finds the channel among its caller's locals, so the
    recording wrapper keeps one named `channel`.
    """

    def __init__(self, monkeypatch: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        original = backend.FakeHttp.send_message
        payloads = self.sent

        async def send_message(http: Any, channel_id: int, *, params: Any) -> Any:
            channel = backend._get_higher_locs(1)["channel"]  # noqa: F841 (read by dpytest)
            payloads.append(dict(params.payload))
            return await original(http, channel_id, params=params)

        monkeypatch.setattr(backend.FakeHttp, "send_message", send_message)


def thread_from(opener: discord.Message, name: str) -> discord.Thread:
    """A thread started from `opener` (so it has the opener's id), added to its guild."""
    guild = opener.guild
    assert guild is not None
    thread = discord.Thread(
        guild=guild,
        state=backend.get_state(),
        data={  # type: ignore[typeddict-item]
            "id": str(opener.id),
            "guild_id": str(guild.id),
            "parent_id": str(opener.channel.id),
            "owner_id": str(opener.author.id),
            "name": name,
            "type": 11,
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": "2026-12-04T17:00:00+00:00",
                "locked": False,
            },
        },
    )
    guild._add_thread(thread)
    return thread
