"""The bot and its per-channel turns against dpytest: queue, follow-ups, stops, two channels.

Messages come in through dpytest (discord.py's own `on_message` dispatch). The
`/kill` slash command cannot be invoked through dpytest, so its handler
(`ToolloopBot.kill_reply`, which the registered command calls) is called
directly. The model is the scripted provider of the interpreter tests where a
test is about Discord only; `test_a_message_is_answered_through_a_real_tool_chain`
runs the real OpenAI-compatible provider against the loopback model server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import (
    EVERY_MESSAGE,
    Requests,
    VirtualClock,
    channel,
    configured,
    contents,
    deny_sending,
    run,
)
from tests.effects.harness import Script, ScriptProvider, calling, completed, silent
from toolloop.effects.discord import BotSettings, ChannelEvent, ToolloopBot
from toolloop.effects.discord.bot import TRANSCRIPT
from toolloop.effects.observe import HostEvent, StreamFinished, TurnFinished
from toolloop.effects.ports import Provider, StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import ContextItem, JsonObject, StreamResult, StreamStatus
from toolloop.testing.model_server import ModelServer
from toolloop.tools import demo_model
from toolloop.tools.demo import demo_registry


class Bot:
    """A ToolloopBot on dpytest, with the host events it reported."""

    def __init__(
        self,
        provider: Provider,
        registry: ToolRegistry | None = None,
        clock: VirtualClock | None = None,
        **settings: object,
    ) -> None:
        self.events: list[HostEvent] = []
        self.finished_in: list[int] = []
        """The channel of each TurnFinished event."""
        self.client = ToolloopBot(
            BotSettings(token="test", access=EVERY_MESSAGE, **settings),  # type: ignore[arg-type]
            provider=provider,
            registry=registry or ToolRegistry(),
            clock=clock,
            intents=discord.Intents.all(),
            on_event=self.seen,
        )

    def seen(self, seen: ChannelEvent) -> None:
        self.events.append(seen.event)
        self.finished_in.extend([seen.channel_id] if isinstance(seen.event, TurnFinished) else [])

    def statuses(self) -> list[StreamStatus]:
        return [e.status for e in self.events if isinstance(e, StreamFinished)]

    async def idle(self) -> None:
        await self.client.turns.wait_idle()


def search_tool(started: anyio.Event, gate: anyio.Event, log: list[str]) -> ToolRegistry:
    """A `search` tool that says when it started and finishes when `gate` is set."""

    async def search(args: JsonObject, call: ToolCall) -> JsonObject:
        started.set()
        try:
            await gate.wait()
        except anyio.get_cancelled_exc_class():
            log.append("cancelled")
            raise
        return {"hits": 1}

    registry = ToolRegistry()
    registry.register(search, name="search")
    return registry


class TestTurns:
    """One turn per channel, answering its trigger."""

    def test_a_message_is_answered_in_its_channel(self) -> None:
        """The reply is one message after the user's."""

        async def main() -> list[str]:
            bot = Bot(ScriptProvider(completed("Hello there.")))
            await configured(bot.client)
            await dpytest.message("hi", channel=0)
            await bot.idle()
            return contents(channel(0))

        assert run(main) == ["hi", "Hello there."]

    def test_two_channels_run_their_turns_at_the_same_time(self) -> None:
        """Each channel's stream waits for the other's to start: both finish only if concurrent."""
        started: list[str] = []
        both = anyio.Event()

        async def meet(request: StreamRequest, sink: StreamSink) -> StreamResult:
            started.append(request.turn.channel_id)
            if len(started) == 2:
                both.set()
            with anyio.fail_after(5):
                await both.wait()
            return await completed(f"Done in {request.turn.channel_id[-4:]}.")(request, sink)

        async def main() -> tuple[list[str], list[str], list[int]]:
            bot = Bot(ScriptProvider(meet))
            await configured(bot.client)
            await dpytest.message("one", channel=0)
            await dpytest.message("two", channel=1)
            await bot.idle()
            return contents(channel(0)), contents(channel(1)), [channel(0).id, channel(1).id]

        first, second, ids = run(main)
        assert first == ["one", f"Done in {str(ids[0])[-4:]}."]
        assert second == ["two", f"Done in {str(ids[1])[-4:]}."]

    def test_the_observer_sees_each_event_with_its_channel(self) -> None:
        """`on_event` gets `ChannelEvent`s: each turn's finish names the channel it ran in."""

        async def main() -> tuple[list[int], list[int]]:
            bot = Bot(ScriptProvider(completed("A."), completed("B.")))
            await configured(bot.client)
            await dpytest.message("one", channel=0)
            await bot.idle()
            await dpytest.message("two", channel=1)
            await bot.idle()
            return bot.finished_in, [channel(0).id, channel(1).id]

        finished_in, ids = run(main)
        assert finished_in == ids


class TestStops:
    """`/kill` and the stop phrase stop the running turn; nothing leaks into the next."""

    def run_killed(
        self,
        stop: Callable[[ToolloopBot], Awaitable[object]],
        script: Script,
        point: anyio.Event,
        registry: ToolRegistry | None = None,
        stop_phrase: str | None = None,
    ) -> tuple[Bot, ScriptProvider, list[str]]:
        """Start a turn on "go", `stop` it once `point` is set, then send "again"."""
        provider = ScriptProvider(script, completed("Fresh start."))
        bot = Bot(provider, registry, stop_phrase=stop_phrase)

        async def main() -> list[str]:
            await configured(bot.client)
            await dpytest.message("go", channel=0)
            await point.wait()
            await stop(bot.client)
            await bot.idle()
            await dpytest.message("again", channel=0)
            await bot.idle()
            return contents(channel(0))

        return bot, provider, run(main)

    def test_kill_during_a_stream_stops_it_with_its_text_kept(self) -> None:
        """`/kill` mid-stream cancels the model call; the next message gets a normal turn."""
        point, replies = anyio.Event(), list[str]()

        async def kill(bot: ToolloopBot) -> None:
            replies.append(bot.kill_reply(channel(0).id))

        bot, provider, texts = self.run_killed(kill, silent("Thinking", started=point), point)
        assert replies == ["Stopped."]
        assert texts == ["go", "Thinking\n-# stopped", "again", "Fresh start."]
        assert len(provider.cancelled_at) == 1
        assert bot.statuses() == [StreamStatus.STOPPED_BY_USER, StreamStatus.COMPLETED]

    def test_kill_during_a_tool_cancels_the_tool(self) -> None:
        """`/kill` while the tool runs: the tool is cancelled and the model is not asked again."""
        started, gate, log = anyio.Event(), anyio.Event(), list[str]()

        async def kill(bot: ToolloopBot) -> None:
            assert bot.kill_reply(channel(0).id) == "Stopped."

        _, provider, texts = self.run_killed(
            kill, calling("search", text="Searching."), started, search_tool(started, gate, log)
        )
        assert log == ["cancelled"]
        assert texts == ["go", "Searching.\n-# stopped", "again", "Fresh start."]
        assert len(provider.requests) == 2  # the killed turn's one call, then the next turn's

    def test_the_stop_phrase_is_a_genuine_stop(self) -> None:
        """A message that is the stop phrase kills the running turn and is not answered."""
        point = anyio.Event()

        async def say_stop(bot: ToolloopBot) -> None:
            await dpytest.message("  STOP please ", channel=0)

        bot, _, texts = self.run_killed(
            say_stop, silent("Thinking", started=point), point, stop_phrase="stop please"
        )
        assert texts == ["go", "Thinking\n-# stopped", "  STOP please ", "again", "Fresh start."]
        assert bot.statuses() == [StreamStatus.STOPPED_BY_USER, StreamStatus.COMPLETED]

    def test_kill_with_no_turn_says_so(self) -> None:
        """`/kill` in an idle channel stops nothing, and the next turn is not affected."""

        async def main() -> tuple[str, list[str]]:
            bot = Bot(ScriptProvider(completed("Fine.")))
            await configured(bot.client)
            reply = bot.client.kill_reply(channel(0).id)
            await dpytest.message("hi", channel=0)
            await bot.idle()
            return reply, contents(channel(0))

        assert run(main) == ("Nothing to stop here.", ["hi", "Fine."])

    def test_a_stale_turn_is_cancelled_and_the_channel_answers_again(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A turn outliving the stale timeout is cancelled and logged; the channel answers again."""

        async def main() -> tuple[list[str], int]:
            bot = Bot(
                ScriptProvider(silent("Thinking"), completed("Back.")), stale_turn_seconds=0.2
            )
            await configured(bot.client)
            await dpytest.message("go", channel=0)
            await bot.idle()
            await dpytest.message("again", channel=0)
            await bot.idle()
            return contents(channel(0)), channel(0).id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            texts, place = run(main)
        assert texts == ["go", "Thinking\n-# cut off: this reply took too long", "again", "Back."]
        ours = [r.getMessage() for r in caplog.records if r.name == "toolloop.discord"]
        assert ours == [f"the turn in channel {place} outlived 0.2 s and was cancelled"]


class TestLongReplies:
    """A reply of many pages is bounded by a kill, a shutdown and the stale timeout.

    The adapter's clock is a virtual one that never moves: after the reply's
    first message every request waits for a rate-limit slot that never comes,
    so the turn's channel could close only when its editors are stopped. Each
    test would hang without the fix; `fail_after` turns the hang into a failure.
    """

    REPLY = "A long answer, line after line.\n" * 2000

    def test_kill_stops_the_writer_of_a_long_reply(self) -> None:
        """`/kill` after the model finished: one edit marks the page shown as stopped, no
        page follows, and the channel answers again."""
        clock = VirtualClock()
        bot = Bot(ScriptProvider(completed(self.REPLY), completed("Next.")), clock=clock)

        async def main() -> tuple[str, list[tuple[str, str]], list[str]]:
            await configured(bot.client)
            requests = Requests(clock)
            await dpytest.message("go", channel=0)
            while not bot.statuses():  # the model's stream ended; the editor is behind
                await anyio.sleep(0.01)
            reply = bot.client.kill_reply(channel(0).id)
            with anyio.fail_after(5):
                await bot.idle()
            sent = [(kind, text) for _, kind, text in requests.log]
            clock.advance(5.0)  # the next turn may take a slot
            await dpytest.message("again", channel=0)
            await bot.idle()
            return reply, sent, contents(channel(0))

        reply, sent, texts = run(main)
        assert reply == "Stopped."
        (first, page), (edit, marked) = sent  # the reply's first page, then its marker only
        assert (first, edit, marked) == ("send", "edit", page + "\n-# stopped")
        assert texts == ["go", marked, "again", "Next."]

    def test_closing_the_bot_stops_the_writer_of_a_long_reply(self) -> None:
        """`close()` stops the running turn and its editors, then disconnects."""
        clock = VirtualClock()
        bot = Bot(ScriptProvider(completed(self.REPLY)), clock=clock)

        async def main() -> bool:
            await configured(bot.client)
            await dpytest.message("go", channel=0)
            while not bot.statuses():
                await anyio.sleep(0.01)
            bot.client.ws = None  # type: ignore[assignment]  # dpytest's has no socket to close
            with anyio.fail_after(5):
                await bot.client.close()
            return bot.client.turns.busy(channel(0).id)

        assert run(main) is False

    def test_a_closing_bot_takes_no_new_message(self) -> None:
        """Once the bot's `close()` (SIGTERM's) stopped its turns, a message arriving before
        Discord's connection closes neither starts a turn nor reaches the transcript."""
        bot = Bot(ScriptProvider(completed("Hi.")))

        async def main() -> tuple[bool, list[ContextItem]]:
            await configured(bot.client)
            with anyio.fail_after(5):
                await bot.client.turns.close()
            await dpytest.message("anyone there?", channel=0)
            return bot.client.turns.busy(channel(0).id), bot.client._transcript(channel(0).id)

        assert run(main) == (False, [])
        assert bot.statuses() == []

    def test_the_stale_timeout_covers_the_channels_exit(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The model finished at once, but the editors would take forever: the stale timeout
        (0.3 s) cancels the turn while its channel closes, and says so."""
        bot = Bot(ScriptProvider(completed(self.REPLY)), clock=VirtualClock())
        bot.client.turns = type(bot.client.turns)(
            bot.client.respond, bot.client.open_channel, stale_after=0.3
        )

        async def main() -> int:
            await configured(bot.client)
            await dpytest.message("go", channel=0)
            with anyio.fail_after(5):
                await bot.idle()
            return channel(0).id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            place = run(main)
        assert bot.statuses() == [StreamStatus.COMPLETED]
        ours = [r.getMessage() for r in caplog.records if r.name == "toolloop.discord"]
        assert ours == [f"the turn in channel {place} outlived 0.3 s and was cancelled"]


class TestFollowUps:
    """A message during a turn is a follow-up: answered next, batched."""

    def test_a_follow_up_waits_behind_a_tool_chain_and_is_answered_next(self) -> None:
        """During the tool a second message arrives; the chain finishes, then a turn answers it."""
        started, gate, log = anyio.Event(), anyio.Event(), list[str]()
        provider = ScriptProvider(
            calling("search", text="Checking."), completed("Answer one."), completed("Answer two.")
        )

        async def main() -> list[str]:
            bot = Bot(provider, search_tool(started, gate, log))
            await configured(bot.client)
            await dpytest.message("first", channel=0)
            await started.wait()
            await dpytest.message("second", channel=0)
            await dpytest.message("third", channel=0)
            gate.set()
            await bot.idle()
            assert bot.statuses() == [
                StreamStatus.FUNCTION_CALL,
                StreamStatus.COMPLETED,
                StreamStatus.COMPLETED,
            ]
            return contents(channel(0))

        assert run(main) == ["first", "Checking.", "second", "third", "Answer one.", "Answer two."]
        last_context = [item.content for item in provider.requests[2].once.context]
        assert last_context[-4:] == ["first", "Answer one.", "second", "third"]
        assert len(provider.requests) == 3  # one turn for both follow-ups

    def test_a_full_transcript_keeps_the_reply_before_the_follow_ups(self) -> None:
        """With the transcript already at its cap, the chain's reply still goes before the
        messages that arrived during it, and the next turn reads them in that order."""
        started, gate, log = anyio.Event(), anyio.Event(), list[str]()
        provider = ScriptProvider(
            calling("search", text="Checking."), completed("Answer one."), completed("Answer two.")
        )

        async def main() -> None:
            bot = Bot(provider, search_tool(started, gate, log))
            await configured(bot.client)
            old = [ContextItem(author="u", content=f"old {n}") for n in range(TRANSCRIPT)]
            bot.client.transcripts[channel(0).id] = old
            await dpytest.message("first", channel=0)
            await started.wait()
            await dpytest.message("second", channel=0)
            gate.set()
            await bot.idle()

        run(main)
        last_context = [item.content for item in provider.requests[2].once.context]
        assert last_context[-3:] == ["first", "Answer one.", "second"]

    def test_a_follow_up_interrupts_a_first_stream(self) -> None:
        """A message during a first stream ends it `follow_up_interrupt`; the batch is answered."""
        point = anyio.Event()
        provider = ScriptProvider(silent("Thinking", started=point), completed("Both answered."))

        async def main() -> Bot:
            bot = Bot(provider, stale_turn_seconds=2.0)
            await configured(bot.client)
            await dpytest.message("first", channel=0)
            await point.wait()
            await dpytest.message("second", channel=0)
            await bot.idle()
            return bot

        bot = run(main)
        assert bot.statuses() == [StreamStatus.FOLLOW_UP_INTERRUPT, StreamStatus.COMPLETED]
        assert [i.content for i in provider.requests[1].once.context][-2:] == ["first", "second"]


class TestRefusals:
    """A channel where Discord refuses the bot's messages."""

    def test_a_refused_reply_is_logged_with_the_channel_and_status(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Without Send Messages the refusal is logged, naming the channel and HTTP 403."""

        async def main() -> int:
            bot = Bot(ScriptProvider(completed("Hello.")))
            await configured(bot.client)
            await deny_sending(channel(0))
            await dpytest.message("hi", channel=0)
            await bot.idle()
            return channel(0).id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            place = run(main)
        refusal = f"Discord refused the message in channel {place}: HTTP 403 (send_messages)"
        assert refusal in [r.getMessage() for r in caplog.records]

    def test_a_refused_reply_ends_the_stream_as_an_error(self) -> None:
        """The loop handles the refusal: the stream ends `error`, nothing escapes the turn."""

        async def main() -> list[StreamStatus]:
            bot = Bot(ScriptProvider(completed("Hello.")))
            await configured(bot.client)
            await deny_sending(channel(0))
            await dpytest.message("hi", channel=0)
            await bot.idle()
            return bot.statuses()

        assert run(main) == [StreamStatus.ERROR]


class TestRealProvider:
    """The runnable bot's pieces: the OpenAI-compatible provider, the demo tools, over HTTP."""

    def test_a_message_is_answered_through_a_real_tool_chain(self) -> None:
        """The demo model calls both tools over loopback HTTP; the last message has the answer."""

        async def main() -> list[str]:
            with ModelServer(demo_model.chunks, delay=0.001) as server:
                async with OpenAICompatProvider(
                    base_url=server.base_url, model=demo_model.MODEL
                ) as provider:
                    bot = Bot(provider, demo_registry())
                    await configured(bot.client)
                    await dpytest.message("What is 17 * 23 + 4?", channel=0)
                    await bot.idle()
            return contents(channel(0))

        texts = run(main)
        assert texts[:3] == [
            "What is 17 * 23 + 4?",
            "Let me work out the sum first.",
            "Now the time in Tokyo.",
        ]
        assert texts[3].startswith("17 × 23 + 4 is 395, and in Tokyo it is now ")
