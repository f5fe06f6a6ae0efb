"""The Discord channel adapter against dpytest: one message per stream, edits, splits, embeds."""

from __future__ import annotations

import asyncio
import itertools
import logging

import aiohttp
import anyio
import discord
import pytest
from discord.ext.test import callbacks

from tests.discord.conftest import (
    Edits,
    Requests,
    VirtualClock,
    channel,
    configured,
    contents,
    deny_sending,
    embeds,
    run,
)
from tests.discord.webhook_server import TOKEN, WEBHOOK_ID, Request, WebhookServer
from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.discord import (
    DeliveryError,
    DiscordChannel,
    DiscordPersona,
    EditWindow,
    WebhookVoice,
    notice_embed,
)
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.ports import Notice, StreamRequest, StreamSink, StreamSpan
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import (
    JsonObject,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

AVATAR = "https://cdn.example.org/tomo.png"


def span(iteration: int = 0, reply_to: str | None = None) -> StreamSpan:
    return StreamSpan(attempt=0, iteration=iteration, reply_to=reply_to)


def notice(level: str, *, hidden: bool = False, identity: str | None = None) -> Notice:
    return Notice(
        key="still_working",
        level=level,
        text=f"a {level}",
        hidden=hidden,
        iteration=1,
        identity=identity,
    )


async def stream_into(
    port: DiscordChannel, chunks: list[str], clock: VirtualClock, every: float, iteration: int = 0
) -> None:
    """The model's side: one chunk every `every` virtual seconds, then the stream's end."""
    port.stream_started(span(iteration))
    for chunk in chunks:
        await port.send_text(chunk, reply_to=None)
        clock.advance(every)
        await discord.utils.sleep_until(discord.utils.utcnow())  # one pass of the loop
    port.stream_ended(span(iteration))


async def settle(port: DiscordChannel, clock: VirtualClock) -> None:
    """Let the editors finish on the virtual clock, then close the turn's channel."""
    for _ in range(200):
        clock.advance(0.5)
        await discord.utils.sleep_until(discord.utils.utcnow())
    await port.__aexit__(None, None, None)


class TestStreaming:
    """One message per stream, edited under Discord's rate limit, ending on the last text."""

    def test_a_fast_stream_is_coalesced_to_five_edits_per_five_seconds(self) -> None:
        """300 chunks over 3 virtual seconds: at most 5 edits in any 5 s, the message ends whole."""

        async def main() -> tuple[list[str], list[float]]:
            await configured()
            clock = VirtualClock()
            edits = Edits(clock)
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, [f"w{i} " for i in range(300)], clock, every=0.01)
            await settle(port, clock)
            return contents(channel()), [at for at, _, _ in edits.log]

        texts, times = run(main)
        assert texts == ["".join(f"w{i} " for i in range(300)).rstrip()]
        assert 1 <= len(times) <= 5
        assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times))

    def test_a_stuck_edit_never_holds_the_stream_up(self) -> None:
        """While Discord holds an edit, every further chunk is accepted; the last text follows."""

        async def main() -> tuple[int, list[str]]:
            await configured()
            clock, release, held = VirtualClock(), asyncio.Event(), asyncio.Event()

            async def stuck(*args: object) -> None:
                held.set()
                await release.wait()

            callbacks.set_callback(stuck, "edit_message")
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            port.stream_started(span())
            await port.send_text("0 ", reply_to=None)
            await port.send_text("1 ", reply_to=None)
            clock.advance(1.0)  # the first message took a slot: the edit's comes a second later
            await held.wait()  # the editor is inside Discord's edit now
            # The edit hangs until `release`: sending must not wait for it, or this
            # raises TimeoutError (the failure this test exists for; not a timing bound).
            with anyio.fail_after(5):
                for i in range(2, 100):
                    await port.send_text(f"{i} ", reply_to=None)
            port.stream_ended(span())
            release.set()
            await settle(port, clock)
            return contents(channel())

        texts = run(main)
        assert texts == ["".join(f"{i} " for i in range(100)).rstrip()]

    def test_each_stream_gets_its_own_message(self) -> None:
        """Two streams of a tool chain are two messages."""

        async def main() -> list[str]:
            await configured()
            clock = VirtualClock()
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, ["Let me ", "check."], clock, every=0.1)
            await stream_into(port, ["It is ", "sunny."], clock, every=0.1, iteration=1)
            await settle(port, clock)
            return contents(channel())

        assert run(main) == ["Let me check.", "It is sunny."]


class TestSplitting:
    """The 2000-character limit, cut on boundaries, fences closed and reopened."""

    def test_a_long_reply_continues_in_new_messages_cut_at_paragraphs(self) -> None:
        """15 paragraphs of 301 characters: three messages of whole paragraphs, none over 2000."""
        paragraph = ("x" * 299) + "\n\n"

        async def main() -> list[str]:
            await configured()
            clock = VirtualClock()
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, [paragraph] * 15, clock, every=0.2)
            await settle(port, clock)
            return contents(channel())

        texts = run(main)
        assert [len(t.rstrip()) for t in texts] == [6 * 301 - 2, 6 * 301 - 2, 3 * 301 - 2]
        assert "".join(t.rstrip() + "\n\n" for t in texts) == paragraph * 15

    def test_a_code_fence_split_across_messages_is_closed_and_reopened(self) -> None:
        """A 3,000-character Python block: the first message closes it, the next reopens it."""
        code = "```python\n" + "print('hello world')\n" * 150 + "```\nDone."

        async def main() -> list[str]:
            await configured()
            clock = VirtualClock()
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, [code[i : i + 50] for i in range(0, len(code), 50)], clock, 0.1)
            await settle(port, clock)
            return contents(channel())

        first, second = run(main)
        assert first.startswith("```python\n") and first.endswith("print('hello world')\n```")
        assert second.startswith("```python\nprint('hello world')") and second.endswith(
            "```\nDone."
        )
        assert len(first) <= 2000

    def test_a_long_reply_takes_a_rate_limit_slot_for_every_message(self) -> None:
        """25,000 characters in one chunk: 13 new messages and their edits, never more than
        5 requests in any 5 virtual seconds, and the pages hold the whole reply."""
        reply = "".join(f"Line {n} of a long answer.\n" for n in range(1000))

        async def main() -> tuple[list[str], Requests]:
            await configured()
            clock = VirtualClock()
            requests = Requests(clock)
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, [reply], clock, every=0.1)
            await settle(port, clock)
            return contents(channel()), requests

        texts, requests = run(main)
        assert "\n".join(texts) + "\n" == reply
        assert [kind for _, kind, _ in requests.log].count("send") == len(texts) == 14
        assert requests.most_in_any(5.0) <= 5

    def test_a_fence_with_a_long_first_line_is_two_messages(self) -> None:
        """Issue 20's flood ("```" and 2,500 characters, no newline: 3,900 messages in 4 s)
        is two messages now, the second holding the rest of the line."""
        reply = "```" + "x" * 2500

        async def main() -> list[str]:
            await configured()
            clock = VirtualClock()
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, [reply[i : i + 100] for i in range(0, 2503, 100)], clock, 0.1)
            await settle(port, clock)
            return contents(channel())

        assert run(main) == [reply[:2000], reply[2000:]]

    def test_stop_ends_the_editors_at_once(self) -> None:
        """With pages still to send and the rate limit's clock stopped, `stop` lets the turn's
        channel close without another request."""
        reply = "word " * 5000

        async def main() -> tuple[int, int]:
            await configured()
            requests = Requests(clock := VirtualClock())
            # without `stop`, leaving the block waits for a clock that never moves
            with anyio.fail_after(5):
                async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as port:
                    port.stream_started(span())
                    await port.send_text(reply, reply_to=None)
                    port.stream_ended(span())
                    before = len(requests.log)
                    port.stop()
            return before, len(requests.log)

        assert run(main) == (1, 1)


class TestNotices:
    """Notices are embeds by value; hidden ones go to the thought log or nowhere."""

    @pytest.mark.parametrize(
        ("level", "colour"),
        [
            ("warning", discord.Colour.orange()),
            ("error", discord.Colour.red()),
            ("info", discord.Colour.blue()),
        ],
    )
    def test_a_notice_is_an_embed_coloured_by_its_level(
        self, level: str, colour: discord.Colour
    ) -> None:
        """The embed holds the localized text as its description, in the level's colour."""

        async def main() -> discord.Embed:
            await configured()
            async with DiscordChannel(channel(), window=EditWindow()) as port:
                await port.send_notice(notice(level))
            return embeds(channel())

        assert [(e.description, e.colour) for e in run(main)] == [(f"a {level}", colour)]

    def test_a_tools_progress_is_one_status_line_edited_in_place(self) -> None:
        """Three progress notices are one message showing the last; after a new stream,
        the next progress notice starts a new status line below it."""

        def progress(text: str) -> Notice:
            return Notice(key="tool_progress", level="info", text=text, hidden=False, iteration=1)

        async def main() -> list[str | None]:
            await configured()
            clock = VirtualClock()
            async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as port:
                for text in ("1 of 3 pages", "2 of 3 pages", "3 of 3 pages"):
                    await port.send_notice(progress(text))
                    clock.advance(1.0)
                await stream_into(port, ["Found it."], clock, every=1.0, iteration=1)
                await port.send_notice(progress("checking"))
            return [e.description for e in embeds(channel())]

        assert run(main) == ["3 of 3 pages", "checking"]

    def test_a_hidden_notice_goes_to_the_thought_log_channel(self) -> None:
        """`send_hidden_notice` posts the embed in the thought-log channel, not the turn's."""

        async def main() -> tuple[list[str], list[discord.Embed]]:
            await configured()
            async with DiscordChannel(
                channel(0), window=EditWindow(), thought_log=channel(1)
            ) as port:
                await port.send_hidden_notice(notice("error", hidden=True))
            return contents(channel(0)), embeds(channel(1))

        turn_channel, thoughts = run(main)
        assert turn_channel == []
        assert [(e.description, e.colour) for e in thoughts] == [("a error", discord.Colour.red())]

    def test_without_a_thought_log_a_hidden_notice_is_dropped(self) -> None:
        """Nothing is posted anywhere."""

        async def main() -> list[str]:
            await configured()
            async with DiscordChannel(channel(0), window=EditWindow()) as port:
                await port.send_hidden_notice(notice("error", hidden=True))
            return contents(channel(0)) + contents(channel(1))

        assert run(main) == []

    def test_a_loop_notice_reaches_discord_in_the_turns_locale(self) -> None:
        """A failed tool's hidden notice, rendered from the catalog in German, is the embed."""

        async def broken(args: JsonObject, call: ToolCall) -> ToolResult:
            return ToolResult(success=False, error="kaputt")

        async def main() -> list[discord.Embed]:
            await configured()
            registry = ToolRegistry()
            registry.register(broken, name="search")
            async with DiscordChannel(
                channel(0), window=EditWindow(), thought_log=channel(1)
            ) as port:
                await run_generation_turn(
                    turn=TurnSettings(locale="de"),
                    attempts=[Attempt(provider=ScriptProvider(calling("search"), completed()))],
                    registry=registry,
                    channel=port,
                    control=MemoryTurnControl(),
                )
            return embeds(channel(1))

        (embed,) = run(main)
        assert (embed.description, embed.colour) == (
            "Werkzeug search ist fehlgeschlagen: kaputt. Argumente: {}. Daten: null",
            discord.Colour.red(),
        )


class TestFailures:
    """A send Discord refuses fails the stream, logged with the channel and the status."""

    def test_a_refused_first_message_raises_from_send_text_and_is_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Without Send Messages the reader's first send raises DeliveryError (HTTP 403)."""

        async def main() -> tuple[DeliveryError, int]:
            await configured()
            place = channel()
            await deny_sending(place)
            async with DiscordChannel(place, window=EditWindow()) as port:
                port.stream_started(span())
                with pytest.raises(DeliveryError) as raised:
                    await port.send_text("Hello", reply_to=None)
                port.stream_ended(span())
            return raised.value, place.id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            failure, place_id = run(main)
        assert failure.status == 403
        assert str(failure) == (
            f"Discord refused the message in channel {place_id}: HTTP 403 (send_messages)"
        )
        ours = [r.getMessage() for r in caplog.records if r.name == "toolloop.discord"]
        assert ours == [str(failure)]


class TestDeletion:
    """A superseded attempt's messages are deleted."""

    def test_delete_messages_removes_the_streams_messages(self) -> None:
        """The ids the port reported are discord.py's ints; deleting them empties the channel."""

        async def main() -> tuple[list[str], list[str]]:
            await configured()
            clock = VirtualClock()
            port = await DiscordChannel(channel(), window=EditWindow(), clock=clock).__aenter__()
            await stream_into(port, ["About to ", "fail"], clock, every=0.1)
            ids = list(port.delivered_message_ids())
            await port.delete_messages(ids)
            await settle(port, clock)
            return ids, contents(channel())

        ids, left = run(main)
        assert len(ids) == 1 and int(ids[0]) > 0
        assert left == []

    def test_a_superseded_attempts_message_is_deleted_before_the_fallback_speaks(self) -> None:
        """The primary streams a little, then fails; only the fallback's reply is left."""

        async def broken(request: StreamRequest, sink: StreamSink) -> StreamResult:
            await sink.deliver("About to")
            error = StreamError(type="http_status", message="HTTP 500")
            return StreamResult(status=StreamStatus.ERROR, accumulated_text="About to", data=error)

        async def main() -> tuple[TurnStatus, list[str]]:
            await configured()
            async with DiscordChannel(channel(), window=EditWindow()) as port:
                result = await run_generation_turn(
                    turn=TurnSettings(),
                    attempts=[
                        Attempt(provider=ScriptProvider(broken)),
                        Attempt(provider=ScriptProvider(completed("Fallback."))),
                    ],
                    registry=ToolRegistry(),
                    channel=port,
                    control=MemoryTurnControl(),
                )
            return result.status, contents(channel())

        assert run(main) == (TurnStatus.COMPLETED, ["Fallback."])


class TestWebhookIdentity:
    """The persona speaks through the channel's webhook with its name and avatar.

    dpytest does not fake webhooks: `WebhookServer` answers discord.py's webhook
    requests on loopback (see its docstring).
    """

    def test_persona_text_and_notices_use_the_webhook_identity(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The stream's message is executed and edited on the webhook; notices keep their voice."""

        async def main() -> tuple[list[Request], list[str], list[str]]:
            await configured()
            async with WebhookServer(channel().id) as server, aiohttp.ClientSession() as session:
                monkeypatch.setattr(discord.http.Route, "BASE", server.base_url)
                hook = discord.Webhook.partial(WEBHOOK_ID, TOKEN, session=session)
                voice = WebhookVoice(hook, DiscordPersona(name="Tomo", avatar_url=AVATAR))
                clock = VirtualClock()
                port = await DiscordChannel(
                    channel(), window=EditWindow(), persona=voice, clock=clock
                ).__aenter__()
                await stream_into(port, ["Hello ", "from ", "Tomo."], clock, every=2.0)
                await port.send_notice(notice("warning", identity="Tomo"))
                await port.send_notice(notice("info"))  # the bot's own voice (impersonation)
                await settle(port, clock)
                ids = list(port.delivered_message_ids())
                await port.delete_messages(ids)
                return server.requests, ids, contents(channel())

        requests, ids, bot_messages = run(main)
        executed = [r.body for r in requests if r.method == "POST"]
        assert executed == [
            {
                "content": "Hello",
                "username": "Tomo",
                "avatar_url": AVATAR,
                "tts": False,
                "allowed_mentions": {"parse": [], "replied_user": True},
            },
            {
                "embeds": [notice_embed(notice("warning", identity="Tomo")).to_dict()],
                "username": "Tomo",
                "avatar_url": AVATAR,
                "tts": False,
                "allowed_mentions": {"parse": [], "replied_user": True},
            },
        ]
        edits = [(r.message_id, r.body["content"]) for r in requests if r.method == "PATCH"]
        assert edits[-1] == (int(ids[0]), "Hello from Tomo.")
        assert [r.message_id for r in requests if r.method == "DELETE"] == [int(ids[0])]
        assert bot_messages == [""]  # the bot's own info notice: an embed, no text
