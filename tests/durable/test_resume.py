"""Resume after a crash at every write of the journal: each text once, no tool run twice.

The turn: the model says "Let me check." in two pieces, calls `charge` (a
card payment, not idempotent) or `lookup` (idempotent), then says "Charged
once." in two pieces. It is crashed right before and right after each write
of the journal (every event, every piece of delivered text), then resumed
with fresh ports over the same channel and tools, the way a restarted bot
would: the outcome is the outcome of the run that never crashed.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.durable.crash import CrashingJournal, When
from tests.effects.harness import ScriptProvider
from toolloop.durable import Journal, ReplayError, TurnPorts, resume, run_journaled
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.events import TurnStarted
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    Persona,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio

BEFORE, AFTER = ("Let me ", "check."), ("Charged", " once.")


async def model(request: StreamRequest, sink: StreamSink) -> StreamResult:
    """The same reply for the same history, as a model at temperature 0 (or a cache) gives."""
    answered = request.once.function_history
    for piece in AFTER if answered else BEFORE:
        sink.progress()
        await sink.deliver(piece)
    if answered:
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="".join(AFTER))
    call = FunctionCall(name=request.turn.persona.name, args={"cents": 500}, call_id="c1")
    text = "".join(BEFORE)
    return StreamResult(status=StreamStatus.FUNCTION_CALL, accumulated_text=text, data=call)


class World:
    """What outlives the bot's process: the chat channel, and each tool's runs."""

    def __init__(self) -> None:
        self.channel = RecordingChannel()
        self.runs: dict[str, int] = {"charge": 0, "lookup": 0}
        self.provider = ScriptProvider(model)

    def ports(self) -> TurnPorts:
        """A fresh process's ports: a new registry and turn control, the same world."""
        registry = ToolRegistry()

        async def charge(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["charge"] += 1
            return {"charged": args["cents"]}

        async def lookup(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["lookup"] += 1
            return {"found": True}

        registry.register(charge, parameters=_CENTS)
        registry.register(lookup, parameters=_CENTS, idempotent=True)
        control = MemoryTurnControl()
        return TurnPorts(
            provider=self.provider, registry=registry, channel=self.channel, control=control
        )


_CENTS: JsonObject = {"type": "object", "properties": {"cents": {"type": "integer"}}}


def turn_calling(tool: str) -> TurnSettings:
    """The turn; the scripted model calls the tool named like the persona."""
    return TurnSettings(persona=Persona(name=tool))


async def crash_then_resume(
    path: Path, tool: str, crash_at: int | None, when: When
) -> tuple[World, GenerationTurnResult, CrashingJournal]:
    world = World()
    journal = await CrashingJournal.open(path)
    journal.crash_at, journal.when = crash_at, when
    turn = turn_calling(tool)
    with anyio.CancelScope() as journal.scope:
        result = await run_journaled(
            journal, "turn-1", turn=turn, config=LoopConfig(), ports=world.ports()
        )
    await journal.close()
    if not journal.scope.cancelled_caught:
        return world, result, journal
    async with await Journal.open(path) as restarted:
        outcomes = await resume(restarted, lambda journaled: world.ports())
        assert await restarted.unfinished() == []
    [resumed] = outcomes.values()
    assert isinstance(resumed, GenerationTurnResult), resumed
    return world, resumed, journal


async def writes_of_a_whole_run(path: Path, tool: str) -> int:
    _, result, journal = await crash_then_resume(path, tool, None, "after")
    assert result.status is TurnStatus.COMPLETED
    return journal.writes


WHOLE_RUN = ("event", "text", "text", "event", "event", "text", "text", "event")
"""TurnStarted, "Let me ", "check.", StreamEnded, ToolSettled, "Charged", " once.", StreamEnded."""


async def test_the_journal_writes_each_event_and_each_piece_of_text(tmp_path: Path) -> None:
    """An uncrashed run writes its 4 events and its 4 pieces of text, in order, and ends empty."""
    _, result, journal = await crash_then_resume(tmp_path / "j.db", "charge", None, "after")
    assert result.status is TurnStatus.COMPLETED
    assert tuple(journal.kinds) == WHOLE_RUN


@pytest.mark.parametrize(
    ("crash_at", "when"),
    [
        (n, when)
        for n, kind in enumerate(WHOLE_RUN)
        for when in ("before", "after")
        if kind == "event" or when == "after"
    ],
)
async def test_a_crash_at_any_write_leaves_each_text_once_and_the_charge_run_at_most_once(
    tmp_path: Path, crash_at: int, when: When
) -> None:
    """Crashed before or after each event's write, or after a piece of text was written, the
    turn completes on resume: every piece of text shown exactly once, no charge run twice."""
    world, result, journal = await crash_then_resume(tmp_path / "j.db", "charge", crash_at, when)
    assert journal.scope is not None and journal.scope.cancelled_caught
    assert result.status is TurnStatus.COMPLETED
    assert world.channel.texts == ["Let me ", "check.", "Charged", " once."]
    assert world.runs["charge"] <= 1


async def test_a_crash_between_a_piece_shown_and_its_commit_shows_that_piece_twice(
    tmp_path: Path,
) -> None:
    """The one instant the journal cannot know about: the channel took "Let me " and the
    process died before the journal's commit of it. Text is never lost, so it shows twice."""
    world, result, _ = await crash_then_resume(tmp_path / "j.db", "charge", 1, "before")
    assert world.channel.texts == ["Let me ", "Let me ", "check.", "Charged", " once."]
    assert result.status is TurnStatus.COMPLETED


async def test_a_charge_in_flight_is_not_run_again_and_the_model_is_told(
    tmp_path: Path,
) -> None:
    """The crash came after the charge ran, before its outcome was journaled: on resume the
    model gets a failure saying the call was interrupted by a restart and may have run."""
    world, result, _ = await crash_then_resume(tmp_path / "j.db", "charge", 4, "before")
    assert world.runs["charge"] == 1
    [entry] = world.provider.requests[-1].once.function_history
    assert entry.function_response["response"]["result"] == {
        "status": "tool_execution_failed",
        "tool_name": "charge",
        "reason": "Tool charge was interrupted by a restart of the bot and may have run: "
        "check its effect before calling it again",
    }
    assert result.status is TurnStatus.COMPLETED


async def test_an_idempotent_tool_in_flight_runs_again(tmp_path: Path) -> None:
    """The same crash with a tool registered `idempotent=True`: it runs again and succeeds."""
    world, result, _ = await crash_then_resume(tmp_path / "j.db", "lookup", 4, "before")
    assert world.runs["lookup"] == 2
    [entry] = world.provider.requests[-1].once.function_history
    assert entry.function_response["response"] == {"result": {"found": True}}
    assert result.status is TurnStatus.COMPLETED


async def test_a_stream_cut_after_its_first_piece_goes_on_without_repeating_it(
    tmp_path: Path,
) -> None:
    """Crashed right after "Let me " reached the channel and the journal: the stream is made
    again and the channel receives only "check." of it, then the rest of the turn."""
    world, result, _ = await crash_then_resume(tmp_path / "j.db", "charge", 1, "after")
    assert world.channel.texts == ["Let me ", "check.", "Charged", " once."]
    assert len(world.provider.requests) == 3  # the first stream was made twice
    assert result.stream_results[0].accumulated_text == "Let me check."


async def test_a_turn_older_than_the_stale_timeout_ends_with_a_notice(tmp_path: Path) -> None:
    """Not resumed: its channel gets the turn_interrupted notice and the journal lets it go."""
    world = World()
    async with await Journal.open(tmp_path / "j.db") as journal:
        await journal.begin("old", LoopConfig(), TurnSettings(locale="de"))
        await journal.append("old", 0, TurnStarted())
        outcomes = await resume(journal, lambda journaled: world.ports(), stale_after=-1)
        assert await journal.unfinished() == []
    assert outcomes == {"old": None}
    [notice] = world.channel.notices
    assert (notice.key, notice.level) == ("turn_interrupted", "warning")
    assert notice.text.startswith("Diese Antwort wurde vor 0 Min. durch einen Neustart")
    assert world.provider.requests == []


async def test_events_that_do_not_replay_are_that_turns_error_and_stay_journaled(
    tmp_path: Path,
) -> None:
    """A log `step` refuses (another engine's) is a ReplayError naming the turn and the
    event; the turn is left in the journal for a person to look at."""
    world = World()
    async with await Journal.open(tmp_path / "j.db") as journal:
        await journal.begin("odd", LoopConfig(), TurnSettings())
        await journal.append("odd", 0, TurnStarted())
        await journal.append("odd", 1, TurnStarted())
        outcomes = await resume(journal, lambda journaled: world.ports())
        assert [turn.key for turn in await journal.unfinished()] == ["odd"]
    error = outcomes["odd"]
    assert isinstance(error, ReplayError)
    assert str(error) == (
        "turn 'odd' of the journal does not replay: Invalid event TurnStarted in phase streaming"
    )
