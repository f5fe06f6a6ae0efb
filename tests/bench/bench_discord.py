"""The Discord adapter under a long, fast stream: what the model's stream waits for.

Run with ``python -m tests.bench bench_discord``. A 2,000-chunk reply streams
through the real interpreter into `DiscordChannel` over dpytest, whose Discord
answers every send and edit after a simulated round trip (`LATENCY`). Reported:
the edits and messages sent, and the time the stream spent inside `send_text`
against its own time. Goal: the stream waits under 5% of its time. Only a
stream's first message is awaited (so that a refused channel fails the stream,
SPEC 5); edits run in the background, 5 per 5 s. A short reply (200 chunks) is
measured too: that one round trip weighs more in it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import discord
import discord.ext.test as dpytest
from discord.ext.test import backend, callbacks

from tests.effects.harness import Script, ScriptProvider
from toolloop.effects.discord import DiscordChannel, EditWindow
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolRegistry
from toolloop.states import LoopConfig, StreamResult, StreamStatus, TurnSettings

CHUNKS = 2_000
SHORT = 200
"""A short reply too: the one awaited round trip weighs more in it."""
EVERY = 0.002
"""Seconds between two chunks: 500 chunks/s, a fast model."""
LATENCY = 0.15
"""Seconds Discord takes to answer a send or an edit."""


class TimedChannel(DiscordChannel):
    """The adapter, timing how long each `send_text` keeps the stream waiting."""

    waited = 0.0

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        started = time.perf_counter()
        await super().send_text(text, reply_to=reply_to)
        self.waited += time.perf_counter() - started


def streaming(chunks: int) -> Script:
    """A reply of `chunks` words, one every `EVERY` seconds, with a paragraph every 97."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        parts = [f"word{i} " + ("\n\n" if i % 97 == 96 else "") for i in range(chunks)]
        for part in parts:
            sink.progress()
            await sink.deliver(part)
            await asyncio.sleep(EVERY)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="".join(parts))

    return play


def contents(channel_id: int) -> list[str]:
    """The final text of every message in the channel, as dpytest's Discord holds it."""
    data = backend._cur_config.messages.get(channel_id, [])  # type: ignore[attr-defined]
    return [m.get("content") or "" for m in data]


async def run(chunks: int) -> dict[str, Any]:
    client = discord.Client(intents=discord.Intents.all())
    await client._async_setup_hook()
    dpytest.configure(client)
    counts = {"send_message": 0, "edit_message": 0}

    def slow(event: str) -> Any:
        async def answer(*args: Any) -> None:
            counts[event] += 1
            await asyncio.sleep(LATENCY)

        return answer

    for event in counts:
        callbacks.set_callback(slow(event), event)
    place = dpytest.get_config().channels[0]
    started = time.perf_counter()
    async with TimedChannel(place, window=EditWindow()) as channel:
        result = await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=ScriptProvider(streaming(chunks)),
            registry=ToolRegistry(),
            channel=channel,
            control=MemoryTurnControl(),
        )
        streamed = time.perf_counter() - started
    flushed = time.perf_counter() - started
    text = result.stream_results[0].accumulated_text
    shown = "".join(contents(place.id))
    return {
        "stream_s": streamed,
        "flushed_s": flushed,
        "waited_s": channel.waited,
        "messages": counts["send_message"],
        "edits": counts["edit_message"],
        "chars": len(text),
        "complete": "".join(shown.split()) == "".join(text.split()),
    }


def main() -> None:
    for chunks in (CHUNKS, SHORT):
        figures = asyncio.run(run(chunks))
        share = 100 * figures["waited_s"] / figures["stream_s"]
        print(
            f"{chunks} chunks every {EVERY * 1000:.0f} ms, Discord latency "
            f"{LATENCY * 1000:.0f} ms: stream {figures['stream_s']:.2f} s, waiting on the "
            f"channel {figures['waited_s']:.3f} s ({share:.1f}%, goal < 5%); "
            f"{figures['messages']} messages, {figures['edits']} edits; last edit "
            f"{figures['flushed_s'] - figures['stream_s']:.2f} s after the stream ended; "
            f"{figures['chars']} characters streamed, all shown: {figures['complete']}"
        )


if __name__ == "__main__":
    main()
