"""Resume in the middle of a batch (SPEC 6b): a call that settled is not run again; the calls
still running are started again when idempotent, else answered as interrupted."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.durable.crash import CrashingJournal, When
from tests.effects.harness import ScriptProvider
from toolloop.durable import Journal, TurnPorts, resume, run_journaled
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio

PRICE = FunctionCall(name="price", args={}, call_id="c_price")
BOOK = FunctionCall(name="book", args={}, call_id="c_book")
INTERRUPTED = (
    "Tool book was interrupted by a restart of the bot and may have run: "
    "check its effect before calling it again"
)


async def model(request: StreamRequest, sink: StreamSink) -> StreamResult:
    """Asks for both tools at once, then says it is done."""
    if request.once.function_history:
        sink.progress()
        await sink.deliver("Done.")
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="Done.")
    calls = (PRICE, BOOK)
    return StreamResult(status=StreamStatus.FUNCTION_CALL, data=PRICE, calls=calls)


class World:
    """The channel and the tools' runs; `book` hangs until the process is restarted."""

    def __init__(self, book_idempotent: bool) -> None:
        self.channel = RecordingChannel()
        self.runs = {"price": 0, "book": 0}
        self.provider = ScriptProvider(model)
        self.restarted = False
        self.book_idempotent = book_idempotent

    def ports(self) -> TurnPorts:
        registry = ToolRegistry()

        async def price(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["price"] += 1
            return {"eur": 120}

        async def book(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["book"] += 1
            if not self.restarted:
                await anyio.sleep_forever()  # the process dies while it waits
            return {"booked": True}

        registry.register(price, parameters={"type": "object"})
        registry.register(book, parameters={"type": "object"}, idempotent=self.book_idempotent)
        return TurnPorts(
            provider=self.provider,
            registry=registry,
            channel=self.channel,
            control=MemoryTurnControl(),
        )


async def crash_then_resume(
    path: Path, world: World, crash_at: int, when: When
) -> GenerationTurnResult:
    journal = await CrashingJournal.open(path)
    journal.crash_at, journal.when = crash_at, when
    with anyio.CancelScope() as journal.scope:
        await run_journaled(
            journal, "t", turn=TurnSettings(), config=LoopConfig(), ports=world.ports()
        )
    await journal.close()
    assert journal.scope.cancelled_caught
    world.restarted = True
    async with await Journal.open(path) as restarted:
        [outcome] = (await resume(restarted, lambda _: world.ports())).values()
    assert isinstance(outcome, GenerationTurnResult), outcome
    return outcome


def responses(world: World) -> list[JsonObject]:
    """What the model was told about each call, in its order, in the last request."""
    return [entry.response for entry in world.provider.requests[-1].once.function_history]


#: Writes: TurnStarted (0), StreamEnded (1), price's ToolSettled (2), ...
PRICE_SETTLED = 2


async def test_a_call_still_running_is_answered_as_interrupted_and_the_settled_one_kept(
    tmp_path: Path,
) -> None:
    """Crashed once price's outcome was journaled, while book still ran: price is not run again
    and keeps its result; book is not run again and the model is told it may have run."""
    world = World(book_idempotent=False)
    result = await crash_then_resume(tmp_path / "j.db", world, PRICE_SETTLED, "after")
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == {"price": 1, "book": 1}
    price, book = responses(world)
    assert price == {"eur": 120}
    assert book["reason"] == INTERRUPTED


async def test_an_idempotent_call_still_running_is_started_again(tmp_path: Path) -> None:
    """The same crash with book registered idempotent: only book runs again, and succeeds."""
    world = World(book_idempotent=True)
    result = await crash_then_resume(tmp_path / "j.db", world, PRICE_SETTLED, "after")
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == {"price": 1, "book": 2}
    assert responses(world) == [{"eur": 120}, {"booked": True}]
    assert world.channel.texts == ["Done."]


async def test_a_crash_before_any_outcome_was_journaled_answers_every_call(
    tmp_path: Path,
) -> None:
    """Crashed before price's outcome was journaled: both calls were in flight; neither runs
    again (not idempotent) and each gets exactly one response, in the model's order."""
    world = World(book_idempotent=False)
    result = await crash_then_resume(tmp_path / "j.db", world, PRICE_SETTLED, "before")
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == {"price": 1, "book": 1}
    price, book = responses(world)
    assert price["reason"] == INTERRUPTED.replace("book", "price")
    assert book["reason"] == INTERRUPTED
