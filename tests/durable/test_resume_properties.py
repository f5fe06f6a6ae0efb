"""Properties of resuming from the journal over generated turns and crash points (hypothesis).

A generated turn is a chain of streams (each delivering one to three pieces of
text) joined by tool calls; it is crashed before or after any write of the
journal, except in the one instant the journal cannot know about (a piece the
channel took and the journal had not committed: docs/durable.md, Limits), and
resumed in a fresh set of ports over the same channel and tools.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def pieces(stream: int, count: int) -> list[str]:
    return [f"s{stream}p{n} " for n in range(count)]


class World:
    """The channel and each tool call's runs, which outlive the crash; the scripted model."""

    def __init__(self, shape: list[int], idempotent: bool) -> None:
        self.shape, self.idempotent = shape, idempotent
        self.channel = RecordingChannel()
        self.runs: dict[int, int] = {}
        self.provider = ScriptProvider(self.model)

    async def model(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Stream number k (k tool results so far) says its pieces, then calls `work` or ends."""
        k = len(request.once.function_history)
        text = pieces(k, self.shape[k])
        for piece in text:
            sink.progress()
            await sink.deliver(piece)
        if k == len(self.shape) - 1:
            return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="".join(text))
        call = FunctionCall(name="work", args={"k": k}, call_id=f"c{k}")
        return StreamResult(
            status=StreamStatus.FUNCTION_CALL, accumulated_text="".join(text), data=call
        )

    def ports(self) -> TurnPorts:
        registry = ToolRegistry()

        async def work(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs[args["k"]] = self.runs.get(args["k"], 0) + 1
            return {"done": args["k"]}

        registry.register(work, parameters={"type": "object"}, idempotent=self.idempotent)
        return TurnPorts(
            provider=self.provider,
            registry=registry,
            channel=self.channel,
            control=MemoryTurnControl(),
        )


async def run(
    folder: Path, world: World, crash_at: int | None, when: When
) -> tuple[GenerationTurnResult, list[str]]:
    """The turn, crashed at write `crash_at` and resumed; its result and the journal's writes."""
    journal = await CrashingJournal.open(folder / f"{crash_at}-{when}.db")
    journal.crash_at, journal.when = crash_at, when
    with anyio.CancelScope() as journal.scope:
        result = await run_journaled(
            journal, "t", turn=TurnSettings(), config=LoopConfig(), ports=world.ports()
        )
    await journal.close()
    if journal.scope.cancelled_caught:
        async with await Journal.open(folder / f"{crash_at}-{when}.db") as restarted:
            [outcome] = (await resume(restarted, lambda _: world.ports())).values()
            assert await restarted.unfinished() == []
        assert isinstance(outcome, GenerationTurnResult), outcome
        result = outcome
    return result, journal.kinds


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=25)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    idempotent=st.booleans(),
    crash=st.floats(0, 1, exclude_max=True),
    when=st.sampled_from(["before", "after"]),
)
def test_resumed_turns_show_each_piece_once_and_run_no_call_twice_unless_idempotent(
    backend: str, shape: list[int], idempotent: bool, crash: float, when: When
) -> None:
    """Invariant: whatever write the crash hits, the resumed turn completes, the channel shows
    every piece of every stream exactly once and in order, and a tool call runs at most once
    (when its tool is idempotent: at least once and at most twice)."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as folder:
            _, kinds = await run(Path(folder), World(shape, idempotent), None, "after")
            crash_at = int(crash * len(kinds))
            if kinds[crash_at] == "text" and when == "before":
                return  # the one instant the journal cannot know about (tested on its own)
            world = World(shape, idempotent)
            result, _ = await run(Path(folder), world, crash_at, when)
        assert result.status is TurnStatus.COMPLETED
        expected = [piece for k, count in enumerate(shape) for piece in pieces(k, count)]
        assert world.channel.texts == expected
        assert all(runs <= (2 if idempotent else 1) for runs in world.runs.values())
        if idempotent:  # then no call is answered as interrupted: each one ran
            assert sorted(world.runs) == list(range(len(shape) - 1))

    anyio.run(main, backend=backend)
