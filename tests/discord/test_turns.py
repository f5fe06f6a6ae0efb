"""The turn manager on its own: the sticker after a completed turn, the reply target, nothing
new once it is suspended."""

from __future__ import annotations

import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import Payloads, channel, configured, run
from toolloop.effects.discord import DiscordChannel, EditWindow, TurnManager, TurnRequest
from toolloop.effects.discord.turns import Place
from toolloop.effects.durable.journal import JournaledTurn
from toolloop.effects.ports import StreamSpan
from toolloop.states import GenerationTurnResult, LoopConfig, Sticker, TurnSettings, TurnStatus

WAVE = Sticker(id="777000111", name="wave")


async def open_channel(place: Place) -> DiscordChannel:
    return DiscordChannel(place, window=EditWindow())


@pytest.mark.parametrize(
    ("status", "stickers"),
    [(TurnStatus.COMPLETED, [["777000111"]]), (TurnStatus.STOPPED_BY_USER, [])],
)
def test_the_selected_sticker_is_sent_after_a_completed_turn_only(
    monkeypatch: pytest.MonkeyPatch, status: TurnStatus, stickers: list[list[str]]
) -> None:
    """A completed turn's sticker follows as its own message, by int id; a stopped turn's not."""
    payloads = Payloads(monkeypatch)

    async def respond(request: TurnRequest) -> GenerationTurnResult:
        return GenerationTurnResult(status=status, selected_sticker=WAVE)

    async def main() -> None:
        await configured()
        turns = TurnManager(respond, open_channel)
        await turns.on_message(await dpytest.message("hi", channel=0))
        await turns.wait_idle()

    run(main)
    sent = [p["sticker_ids"] for p in payloads.sent if "sticker_ids" in p]
    assert sent == [[int(s) for s in ids] for ids in stickers]


def test_the_turns_first_message_replies_to_the_last_message_of_its_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reply reference is the trigger's int id; the stream's later messages reply to nothing."""
    payloads = Payloads(monkeypatch)

    async def respond(request: TurnRequest) -> GenerationTurnResult:
        trigger = str(request.messages[-1].id)
        for iteration, text in enumerate(["Hello.", "Again."]):
            stream = StreamSpan(attempt=0, iteration=iteration, reply_to=trigger)
            request.channel.stream_started(stream)
            await request.channel.send_text(text, reply_to=trigger)
            request.channel.stream_ended(stream)
        return GenerationTurnResult(status=TurnStatus.COMPLETED)

    async def main() -> int:
        await configured()
        turns = TurnManager(respond, open_channel)
        message = await dpytest.message("hi", channel=0)
        await turns.on_message(message)
        await turns.wait_idle()
        return message.id

    trigger = run(main)
    references = [p.get("message_reference") for p in payloads.sent]
    assert references == [
        {
            "type": 0,
            "message_id": trigger,
            "channel_id": channel(0).id,
            "fail_if_not_exists": False,
        },
        None,
    ]


def test_once_suspended_neither_a_message_nor_a_journaled_turn_starts_a_turn() -> None:
    """`suspend()` (a shutdown with a journal) takes nothing new: a message that arrives and
    a journaled turn handed over late (a signal during the bot's start) start no turn."""
    asked: list[TurnRequest] = []

    async def respond(request: TurnRequest) -> GenerationTurnResult:
        asked.append(request)
        return GenerationTurnResult(status=TurnStatus.COMPLETED)

    async def main() -> bool:
        await configured()
        turns = TurnManager(respond, open_channel)
        await turns.suspend()
        await turns.on_message(await dpytest.message("hi", channel=0))
        left = JournaledTurn(
            key="1/2",
            started_at=0.0,
            config=LoopConfig(),
            turn=TurnSettings(),
            reply_to=None,
            events=(),
            delivered={},
        )
        turns.resume(channel(0), left)
        busy = turns.busy(channel(0).id)
        await turns.wait_idle()
        return busy

    assert run(main) is False
    assert asked == []
