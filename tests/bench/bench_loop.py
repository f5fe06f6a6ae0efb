"""The whole loop as a user runs it, beside a hand-written loop over the same data.

The workload of issue 13: `run_tool_loop` with `MemoryTurnControl`,
`RecordingChannel` and a `ToolRegistry` tool taking one integer (its JSON
Schema checked on every call, every timeout armed); a scripted provider asks
for the tool 100 times, then answers. Reported:

* µs per tool iteration on both anyio backends (the turn's CPU time over its
  100 tool calls), and a hand-written loop in the same process over the same
  provider and tool function (no events, no timeouts, no validation): their
  ratio is what the library costs over writing the loop by hand;
* the memory 1,000 concurrent 10-iteration turns add (tracemalloc, channel and
  turn control included), all held in the middle of their chain;
* where the time goes: a cProfile of the asyncio turn, the top functions by
  cumulative time.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from tests.bench.bench_interpreter import Gate, PlainSink, held_memory
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.commands import StreamOnce
from toolloop.states import (
    FunctionCall,
    LoopConfig,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    ToolHistoryEntry,
    TurnSettings,
    TurnStatus,
)

CALLS = 100
BACKENDS = ("asyncio", "trio")
TURN = TurnSettings()


async def add_one(args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """Adds one to `n`."""
    return {"n": args["n"] + 1}


REGISTRY = ToolRegistry()
REGISTRY.register(
    add_one,
    parameters={
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    },
)


class Scripted:
    """Asks for `add_one` `calls` times, then answers; can hold every turn at one call."""

    def __init__(self, calls: int, gate: Gate | None = None) -> None:
        self.left, self.gate = calls, gate

    @property
    def descriptor(self) -> ProviderDescriptor:
        return TURN.provider

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        if self.gate is not None and request.once.iteration == self.gate.at_iteration:
            await self.gate.wait()
        if self.left:
            self.left -= 1
            call = FunctionCall(name="add_one", args={"n": request.once.iteration})
            return StreamResult(status=StreamStatus.FUNCTION_CALL, data=call)
        sink.progress()
        await sink.deliver("Done.")
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="Done.")


async def through_library(calls: int = CALLS, gate: Gate | None = None) -> None:
    """One turn through `run_tool_loop`, as a user runs it."""
    result = await run_tool_loop(
        turn=TURN,
        config=LoopConfig(max_function_call_iterations=calls + 1),
        provider=Scripted(calls, gate),
        registry=REGISTRY,
        channel=RecordingChannel(),
        control=MemoryTurnControl(),
    )
    assert result.status is TurnStatus.COMPLETED, result.status


async def hand_written(calls: int = CALLS) -> None:
    """The same provider and tool function in a loop a bot author would write."""
    provider, channel = Scripted(calls), RecordingChannel()
    sink, history = PlainSink(channel), list[ToolHistoryEntry]()
    for iteration in range(calls + 1):
        once = StreamOnce(
            iteration=iteration,
            function_history=tuple(history),
            accumulated_model_parts=(),
            context=(),
            tail_directives=(),
            disabled=frozenset(),
            suppress_text_output=False,
        )
        result = await provider.stream(StreamRequest(turn=TURN, once=once), sink)
        call = result.data
        if not isinstance(call, FunctionCall):
            break
        data = await add_one(call.args or {}, None)  # type: ignore[arg-type]
        response = {"name": call.name, "response": {"result": data}}
        history.append(ToolHistoryEntry(function_call=call, function_response=response))
    assert channel.text == "Done."


def per_call(backend: str, turn: Callable[[], Awaitable[None]]) -> float:
    """Best CPU µs per tool call over several rounds of 10 turns."""

    async def rounds() -> float:
        await turn()
        best = float("inf")
        for _ in range(7):
            started = time.process_time()
            for _ in range(10):
                await turn()
            best = min(best, (time.process_time() - started) / (10 * CALLS))
        return best * 1e6

    result: float = anyio.run(rounds, backend=backend)
    return result


def memory_added(backend: str, turns: int = 1_000) -> float:
    """MiB tracemalloc sees added while `turns` 10-iteration turns are all mid-chain."""
    return held_memory(backend, turns, lambda gate: through_library(9, gate))


def profile(top: int = 25) -> str:
    """The asyncio turn's top functions by cumulative time (cProfile inflates small calls)."""

    async def turns() -> None:
        for _ in range(20):
            await through_library()

    anyio.run(through_library, backend="asyncio")  # imports and first-call caches, unprofiled
    profiler = cProfile.Profile()
    profiler.runcall(anyio.run, turns, backend="asyncio")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    for backend in BACKENDS:
        library, by_hand = per_call(backend, through_library), per_call(backend, hand_written)
        print(f"run_tool_loop {backend}, {CALLS} tool calls: {library:.1f} µs/iteration (CPU)")
        print(f"hand-written loop {backend}, same data: {by_hand:.2f} µs/iteration (CPU)")
        print(f"ratio run_tool_loop / hand-written {backend}: {library / by_hand:.0f}x")
    for backend in BACKENDS:
        added = memory_added(backend)
        print(f"memory, 1,000 concurrent 10-iteration turns {backend}: {added:.1f} MiB")
    print("profile, run_tool_loop asyncio, top functions by cumulative time:")
    print(profile())


if __name__ == "__main__":
    main()
