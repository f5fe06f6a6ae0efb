"""A batch's calls side by side: one status line per call, in one message edited in place.

The bot runs on dpytest's objects (discord.py's own send and edit); the model is
the scripted provider asking for several tools in one reply. The channel's rate
limit runs on `JumpingClock`, virtual time that jumps to whatever a request
waits for, so the lines are paced as in a bot without the test waiting.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import EVERY_MESSAGE, channel, configured, contents, run
from tests.discord.discord_server import DiscordServer, refusal
from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.discord.batch import CallLine, render, seconds
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import FunctionCall, JsonObject, StreamResult, StreamStatus


class JumpingClock:
    """The channel's clock: time stands still until a request waits, then jumps there."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    async def sleep_until(self, deadline: float) -> None:
        self.time = max(self.time, deadline)
        await anyio.sleep(0)


def asking(*names: str) -> Any:
    """A reply asking for each named tool once, in this order."""

    async def play(request: Any, sink: Any) -> StreamResult:
        calls = tuple(
            FunctionCall(name=name, args={}, call_id=f"c{index}")
            for index, name in enumerate(names)
        )
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=calls[0], calls=calls)

    return play


def tools(gate: anyio.Event) -> ToolRegistry:
    """`slow` (done once `gate` is set), `fast` (done at once) and `broken` (raises)."""

    async def slow(args: JsonObject, call: ToolCall) -> JsonObject:
        await gate.wait()
        return {"slow": True}

    async def fast(args: JsonObject, call: ToolCall) -> JsonObject:
        return {"fast": True}

    async def broken(args: JsonObject, call: ToolCall) -> JsonObject:
        raise RuntimeError("the disk is\nfull")

    registry = ToolRegistry()
    for tool in (slow, fast, broken):
        registry.register(tool)
    return registry


def bot(provider: ScriptProvider, registry: ToolRegistry) -> ToolloopBot:
    return ToolloopBot(
        BotSettings(token="test", access=EVERY_MESSAGE),
        provider=provider,
        registry=registry,
        clock=JumpingClock(),
        intents=discord.Intents.all(),
    )


async def until(condition: Any) -> None:
    """Wait (at most 10 s) for what the bot's tasks do."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)


DONE = r"✅ `{}` done in \d+ ms"


class TestLines:
    """One message per batch, a line per call in the model's order, edited as each settles."""

    def test_each_call_has_its_line_edited_in_place_as_it_settles(self) -> None:
        """`slow` then `fast`: once `fast` is done its line says so while `slow` still runs;
        once `slow` is done too, the same message shows both done, in the model's order."""
        gate = anyio.Event()

        async def main() -> tuple[list[str], list[str]]:
            client = bot(
                ScriptProvider(asking("slow", "fast"), completed("Both done.")), tools(gate)
            )
            await configured(client)
            await dpytest.message("go", channel=0)
            midway = "⏳ `slow` running\n✅ `fast` done in"
            await until(lambda: any(text.startswith(midway) for text in contents(channel(0))))
            during = contents(channel(0))
            gate.set()
            await client.turns.wait_idle()
            return during, contents(channel(0))

        during, after = run(main)
        assert during[0] == "go" and len(during) == 2
        assert re.fullmatch(r"⏳ `slow` running\n" + DONE.format("fast"), during[1])
        assert after[0] == "go" and after[2] == "Both done." and len(after) == 3
        assert re.fullmatch(DONE.format("slow") + "\n" + DONE.format("fast"), after[1])

    def test_a_failed_call_says_why_on_its_line(self) -> None:
        """A tool that raised: its line says it failed, after how long, and the error on
        one line; the other call's line says done."""

        async def main() -> list[str]:
            client = bot(
                ScriptProvider(asking("broken", "fast"), completed("One failed.")),
                tools(anyio.Event()),
            )
            await configured(client)
            await dpytest.message("go", channel=0)
            await client.turns.wait_idle()
            return contents(channel(0))

        texts = run(main)
        assert len(texts) == 3
        first, second = texts[1].split("\n")
        assert re.fullmatch(r"❌ `broken` failed after \d+ ms: .*the disk is full.*", first)
        assert re.fullmatch(DONE.format("fast"), second)

    def test_a_single_call_shows_no_lines(self) -> None:
        """A reply's only call keeps the quiet look: the channel holds the reply only."""

        async def main() -> list[str]:
            client = bot(ScriptProvider(calling("fast"), completed("Done.")), tools(anyio.Event()))
            await configured(client)
            await dpytest.message("go", channel=0)
            await client.turns.wait_idle()
            return contents(channel(0))

        assert run(main) == ["go", "Done."]

    def test_a_refused_lines_message_is_logged_and_the_turn_goes_on(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Discord refuses the lines' message (403): it is logged with the channel and the
        status, the lines are given up, and the reply still arrives."""

        async def main() -> tuple[list[str], int]:
            client = bot(
                ScriptProvider(asking("fast", "fast"), completed("Done twice.")),
                tools(anyio.Event()),
            )
            await configured(client)
            async with DiscordServer() as server:
                await server.connect(client, monkeypatch)
                server.plan("POST", refusal(403, 50013, "Missing Permissions"), containing="`fast`")
                await dpytest.message("go", channel=0)
                await client.turns.wait_idle()
                await client.http.close()
                return server.contents(channel(0).id), channel(0).id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            shown, place = run(main)
        assert shown == ["Done twice."]
        assert (
            f"Discord refused the batch status lines in channel {place}: "
            "HTTP 403 (Missing Permissions)"
        ) in [r.getMessage() for r in caplog.records]


class TestRender:
    """The lines as text."""

    def test_lines_are_in_the_model_order_whatever_order_they_came_in(self) -> None:
        """Index 1 settled before index 0 started: still line 0 first."""
        lines = {1: CallLine("fast", 12, None, True), 0: CallLine("slow")}
        assert render(lines) == "⏳ `slow` running\n✅ `fast` done in 12 ms"

    @pytest.mark.parametrize(
        ("duration_ms", "shown"), [(0, "0 ms"), (999, "999 ms"), (1000, "1.0 s"), (12345, "12.3 s")]
    )
    def test_durations_read_as_ms_then_seconds(self, duration_ms: int, shown: str) -> None:
        """Under a second in ms, then seconds with one decimal."""
        assert seconds(duration_ms) == shown

    def test_a_long_error_is_cut_and_its_markdown_escaped(self) -> None:
        """An error of any length is one line of at most 120 characters, `*` escaped."""
        line = CallLine("t", 5, "*bold* " + "x" * 500, False).text()
        assert line.startswith("❌ `t` failed after 5 ms: \\*bold\\* xxx")
        assert line.endswith("…")
        assert "\n" not in line
