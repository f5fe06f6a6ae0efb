"""Discord's refusals handled by what they mean, against a loopback Discord.

discord.py's real HTTP client (its rate limiter and its own retries) talks to
`DiscordServer`, which refuses requests by plan: a deleted message's 404, a
429, a 503, a 403. A deleted reply and a transient refusal continue and lose
no text; a permanent refusal ends the stream `error` with the text Discord
holds; a refused final edit is not reported as said.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import EVERY_MESSAGE, VirtualClock, channel, configured, run
from tests.discord.discord_server import DiscordServer, rate_limited, refusal
from tests.effects.harness import ScriptProvider
from toolloop.effects.discord import (
    BotSettings,
    DeliveryError,
    DiscordChannel,
    EditWindow,
    ToolloopBot,
)
from toolloop.effects.ports import StreamRequest, StreamSink, StreamSpan
from toolloop.effects.registry import ToolRegistry
from toolloop.states import StreamResult, StreamStatus

SPAN = StreamSpan(attempt=0, iteration=0, reply_to=None)
Scene = Callable[[DiscordServer, DiscordChannel, VirtualClock], Awaitable[None]]


async def tick(clock: VirtualClock, seconds: float = 1.0) -> None:
    """Move the virtual clock and let the editor take its slot and finish its request."""
    clock.advance(seconds)
    for _ in range(50):
        await anyio.sleep(0.001)


def on_loopback(monkeypatch: pytest.MonkeyPatch, scene: Scene) -> list[str]:
    """Run `scene` on a DiscordChannel whose requests go to a DiscordServer; its messages."""

    async def main() -> list[str]:
        client = await configured()
        async with DiscordServer() as server:
            await server.connect(client, monkeypatch)
            clock = VirtualClock()
            async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as port:
                await scene(server, port, clock)
                port.stream_ended(SPAN)
                for _ in range(10):
                    await tick(clock)
            return server.contents(channel().id)

    return run(main)


class TestContinued:
    """What Discord refuses for now, or a message someone deleted, costs no text."""

    def test_a_deleted_reply_continues_in_a_new_message(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A moderator deletes the reply mid-stream: the edit's 404 (Unknown Message) sends
        the whole text as a new message, and the log says so."""

        async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
            port.stream_started(SPAN)
            await port.send_text("Hello", reply_to=None)
            server.messages.clear()  # deleted on Discord
            await port.send_text(" world.", reply_to=None)

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            assert on_loopback(monkeypatch, scene) == ["Hello world."]
        assert any("was deleted: the reply continues" in r.getMessage() for r in caplog.records)

    def test_rate_limits_and_server_errors_are_tried_again(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Five 429s on the first message (discord.py waits out each, then gives up) and two
        503s on the edit: the writer tries again at its next slot, and all the text shows."""

        async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
            server.plan("POST", *[rate_limited()] * 5)
            server.plan("PATCH", refusal(503), refusal(503))
            port.stream_started(SPAN)
            with anyio.fail_after(10):  # the first message waits for its next slot
                async with anyio.create_task_group() as group:
                    group.start_soon(functools.partial(port.send_text, "Hello", reply_to=None))
                    await tick(clock, 5.0)
            await port.send_text(" again.", reply_to=None)

        assert on_loopback(monkeypatch, scene) == ["Hello again."]


class TestEnded:
    """A permanent refusal ends the stream `error`, with the text Discord holds."""

    def test_a_forbidden_edit_fails_the_streams_next_text(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """403 on an edit: the next `send_text` raises DeliveryError; the message keeps the
        text Discord confirmed, and `delivered_texts` says exactly that."""
        seen: list[object] = []

        async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
            server.plan("PATCH", refusal(403, 50013, "Missing Permissions"))
            port.stream_started(SPAN)
            await port.send_text("Kept", reply_to=None)
            await port.send_text(" lost", reply_to=None)
            await tick(clock)
            with pytest.raises(DeliveryError) as raised:
                await port.send_text(" more", reply_to=None)
            seen.extend([raised.value.status, port.delivered_texts()])

        assert on_loopback(monkeypatch, scene) == ["Kept"]
        assert seen == [403, ["Kept"]]


class TestFinalEdit:
    """The turn reports as said only what Discord confirmed."""

    def test_a_refused_final_edit_is_not_reported_as_said(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The model completes "Hello there."; Discord refuses the edit that would show
        " there.": the turn ends `error`, logged, the transcript holds "Hello" only, and the
        message is marked as cut off."""
        clock = VirtualClock()

        async def two_chunks(request: StreamRequest, sink: StreamSink) -> StreamResult:
            sink.progress()
            await sink.deliver("Hello")
            await sink.deliver(" there.")
            clock.advance(1.0)  # the edit's slot
            return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="Hello there.")

        async def main() -> tuple[list[str], list[str], int]:
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE),
                provider=ScriptProvider(two_chunks),
                registry=ToolRegistry(),
                clock=clock,
                intents=discord.Intents.all(),
            )
            await configured(bot)
            async with DiscordServer() as server:
                await server.connect(bot, monkeypatch)
                server.plan("PATCH", refusal(403, 50013, "Missing Permissions"))
                await dpytest.message("hi", channel=0)
                with anyio.fail_after(10):
                    await bot.turns.wait_idle()
                said = [item.content for item in bot.transcripts[channel().id]]
                return server.contents(channel().id), said, channel().id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            shown, said, place = run(main)
        assert shown == ["Hello\n-# cut off by an error"]
        assert said == ["hi", "Hello"]
        assert (
            f"the turn in channel {place} ended error: channel_send_failed: Discord refused the "
            f"message in channel {place}: HTTP 403 (Missing Permissions)"
        ) in [r.getMessage() for r in caplog.records]
