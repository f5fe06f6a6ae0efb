"""The Discord channel and the journal: the messages holding each stream, reported and restored.

discord.py's real HTTP client against the loopback Discord server, the channel's
editors on a virtual clock: what `report_held` is told after each confirmed
send or edit, and how `restore` takes an earlier process's messages back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable

import aiohttp
import anyio
import discord
import pytest

from tests.discord.conftest import VirtualClock, channel, configured, run
from tests.discord.discord_server import DiscordServer
from tests.discord.webhook_server import TOKEN, WEBHOOK_ID, WebhookServer
from toolloop.durable import HeldMessage, HoldingChannel
from toolloop.effects.discord import DiscordChannel, DiscordPersona, EditWindow, WebhookVoice
from toolloop.effects.ports import StreamSpan

SPAN = StreamSpan(attempt=0, iteration=0, reply_to=None)
Reports = list[tuple[Hashable, tuple[HeldMessage, ...]]]
Scene = Callable[[DiscordServer, DiscordChannel, VirtualClock], Awaitable[None]]


async def tick(clock: VirtualClock, seconds: float = 1.0) -> None:
    """Move the virtual clock and let the editors take their slots and finish their requests."""
    clock.advance(seconds)
    for _ in range(50):
        await anyio.sleep(0.001)


def on_loopback(monkeypatch: pytest.MonkeyPatch, scene: Scene) -> tuple[list[str], Reports, int]:
    """Run `scene` on a reporting DiscordChannel against a DiscordServer: the channel's
    messages afterwards, every report, and how many messages were created."""
    reports: Reports = []

    async def report(stream: Hashable, held: tuple[HeldMessage, ...]) -> None:
        reports.append((stream, held))

    async def main() -> tuple[list[str], Reports, int]:
        client = await configured()
        async with DiscordServer() as server:
            await server.connect(client, monkeypatch)
            clock = VirtualClock()
            async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as port:
                port.report_held(report)
                await scene(server, port, clock)
                for _ in range(10):
                    await tick(clock)
            posts = server.posts()
            return server.contents(channel().id), reports, posts

    return run(main)


def test_the_discord_channel_is_a_holding_channel() -> None:
    """The journal recognises it: it reports, restores and settles."""
    assert issubclass(DiscordChannel, HoldingChannel)


def test_each_confirmed_send_and_edit_reports_the_message_and_the_text_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first message, then its edit: each report names the stream, the message's id and
    exactly the text Discord confirmed, never text only accepted."""
    ids: list[str] = []

    async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
        port.stream_started(SPAN)
        await port.send_text("Hello", reply_to=None)
        ids.extend(str(message.id) for message in port.messages)
        await port.send_text(" world.", reply_to=None)
        port.stream_ended(SPAN)

    contents, reports, _ = on_loopback(monkeypatch, scene)
    assert contents == ["Hello world."]
    [first] = ids
    assert reports == [
        (SPAN, (HeldMessage(message_id=first, text="Hello"),)),
        (SPAN, (HeldMessage(message_id=first, text="Hello world."),)),
    ]


def test_a_stream_cut_into_pages_reports_each_message_with_its_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reply over 2000 characters: the last report holds two messages whose texts join to
    the whole reply."""
    text = ("word " * 400).strip() + "\n\n" + ("more " * 100).strip()

    async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
        port.stream_started(SPAN)
        await port.send_text(text, reply_to=None)
        port.stream_ended(SPAN)

    contents, reports, _ = on_loopback(monkeypatch, scene)
    _, held = reports[-1]
    assert len(held) == len(contents) == 2
    assert "".join(message.text for message in held) == text


def restored(text: str, *, continues: bool) -> Scene:
    """A scene whose earlier process's message showed "Let me " (made here, as it would have
    been), then restored up to `text`."""

    async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
        earlier = await channel().send("Let me")
        held = (HeldMessage(message_id=str(earlier.id), text="Let me "),)
        await port.restore(7, held, text, continues=continues)
        if continues:
            port.stream_started(SPAN)
            await port.send_text("the card.", reply_to=None)
            port.stream_ended(SPAN)

    return scene


def test_a_restored_stream_goes_on_in_the_same_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream made again after a restart appends to the earlier process's message: one
    message with the whole text, no new one, the reports naming it under the new stream."""
    contents, reports, posts = on_loopback(monkeypatch, restored("Let me check ", continues=True))
    assert contents == ["Let me check the card."]
    assert posts == 1  # the earlier process's
    assert reports[-1][0] == SPAN
    assert [message.text for message in reports[-1][1]] == ["Let me check the card."]


def test_text_accepted_but_not_shown_before_the_restart_is_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A finished stream whose last edit never reached Discord: restored up to the text the
    channel had accepted, its message is edited to show it, under the restore's key."""
    contents, reports, posts = on_loopback(
        monkeypatch, restored("Let me check the card.", continues=False)
    )
    assert contents == ["Let me check the card."]
    assert posts == 1
    assert reports[-1][0] == 7


def test_a_held_message_deleted_meanwhile_continues_in_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Someone deleted the message while the bot was down: the edit's 404 sends the stream's
    text in a new message rather than losing it."""

    async def scene(server: DiscordServer, port: DiscordChannel, clock: VirtualClock) -> None:
        earlier = await channel().send("Let me")
        server.messages.clear()  # deleted on Discord
        held = (HeldMessage(message_id=str(earlier.id), text="Let me "),)
        await port.restore(7, held, "Let me check.", continues=False)

    contents, _, posts = on_loopback(monkeypatch, scene)
    assert contents == ["Let me check."]
    assert posts == 2


def on_the_webhook(monkeypatch: pytest.MonkeyPatch, deleted: bool) -> tuple[list[str], int]:
    """A persona's message "Let me " of an earlier process, restored (and continued) through
    the webhook, or deleted meanwhile: the webhook's messages afterwards, and how many it
    created."""

    async def main() -> tuple[list[str], int]:
        await configured()
        async with WebhookServer(channel().id) as server, aiohttp.ClientSession() as session:
            monkeypatch.setattr(discord.http.Route, "BASE", server.base_url)
            hook = discord.Webhook.partial(WEBHOOK_ID, TOKEN, session=session)
            earlier = await hook.send("Let me", username="Tomo", wait=True)
            if deleted:
                server.messages.clear()
            voice = WebhookVoice(hook, DiscordPersona(name="Tomo"))
            clock = VirtualClock()
            async with DiscordChannel(
                channel(), window=EditWindow(), persona=voice, clock=clock
            ) as port:
                held = (HeldMessage(message_id=str(earlier.id), text="Let me "),)
                await port.restore(7, held, "Let me ", continues=True)
                port.stream_started(SPAN)
                await port.send_text("check.", reply_to=None)
                port.stream_ended(SPAN)
                for _ in range(10):
                    await tick(clock)
            posts = sum(1 for r in server.requests if r.method == "POST")
            return [m["content"] for m in server.messages.values()], posts

    return run(main)


def test_a_personas_message_is_taken_back_through_its_webhook_and_continued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the webhook may edit the persona's message: it is fetched through the webhook
    and edited on, no new message."""
    assert on_the_webhook(monkeypatch, deleted=False) == (["Let me check."], 1)


def test_a_personas_message_deleted_meanwhile_starts_the_reply_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The webhook answers 404 for the earlier message: the reply's whole text goes out in a
    new message, none of it lost."""
    assert on_the_webhook(monkeypatch, deleted=True) == (["Let me check."], 2)


@pytest.mark.parametrize(
    "span",
    [
        StreamSpan(attempt=0, iteration=2, reply_to="123456789012345678"),
        StreamSpan(attempt=0, iteration=2, turn="scene-1/7"),
    ],
    ids=["answering a message", "a scene turn named by its journal key"],
)
def test_a_stream_asked_again_in_a_new_channel_gets_its_first_message_back_by_its_nonce(
    monkeypatch: pytest.MonkeyPatch, span: StreamSpan
) -> None:
    """A dead process's channel made the stream's first message ("Let me") and nothing was
    reported; the next process's channel asks for the same stream's first message with the
    same nonce, gets that message back and edits it to the whole text: one message."""

    async def main() -> tuple[list[str], int]:
        client = await configured()
        async with DiscordServer() as server:
            await server.connect(client, monkeypatch)
            clock = VirtualClock()
            async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as dead:
                dead.stream_started(span)
                await dead.send_text("Let me ", reply_to=None)
                dead.stop()  # the process dies: its editor makes no further request
            async with DiscordChannel(channel(), window=EditWindow(), clock=clock) as port:
                port.stream_started(span)
                await port.send_text("Let me check ", reply_to=None)
                await port.send_text("the card.", reply_to=None)
                port.stream_ended(span)
                for _ in range(10):
                    await tick(clock)
            posts = server.posts()
            return server.contents(channel().id), posts

    contents, posts = run(main)
    assert contents == ["Let me check the card."]
    assert posts == 2  # asked twice, made once
