"""A batch of calls (SPEC 6b): four calls of a tool that sleeps 100 ms, side by side or not.

`run_tool_loop` with the in-memory ports and a scripted provider that asks for
the tool four times in one reply, then answers. Reported, on both anyio
backends (real clocks), the median of a few turns' wall time:

* with the default `TOOL_PARALLEL_LIMIT` (8) the four run at once: about 100 ms;
* with `TOOL_PARALLEL_LIMIT=1` they run one after another: about 400 ms.

What a batch costs over the same number of single calls is in bench_loop and
bench_step (the single-call workload), which `tests.bench.versus` compares
with another revision.
"""

from __future__ import annotations

import statistics
import time

import anyio

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    FunctionCall,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)

CALLS = 4
NAP_S = 0.1
TURNS = 5
BACKENDS = ("asyncio", "trio")


class FourAtOnce:
    """Asks for the tool `CALLS` times in one reply, then completes."""

    descriptor = ProviderDescriptor(name="bench")

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        if request.once.function_history:
            return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="done")
        calls = tuple(FunctionCall(name="nap", args={}, call_id=f"c{n}") for n in range(CALLS))
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=calls[0], calls=calls)


async def nap(args: JsonObject, call: ToolCall) -> JsonObject:
    await anyio.sleep(NAP_S)
    return {"slept": NAP_S}


async def one_turn(limit: int) -> float:
    registry = ToolRegistry()
    registry.register(nap, name="nap")
    started = time.perf_counter()
    result = await run_tool_loop(
        turn=TurnSettings(),
        config=LoopConfig(tool_parallel_limit=limit),
        provider=FourAtOnce(),
        registry=registry,
        channel=RecordingChannel(),
        control=MemoryTurnControl(),
    )
    assert result.status is TurnStatus.COMPLETED
    return time.perf_counter() - started


def median_ms(backend: str, limit: int) -> float:
    async def turns() -> list[float]:
        return [await one_turn(limit) for _ in range(TURNS)]

    return statistics.median(anyio.run(turns, backend=backend)) * 1000


def main() -> None:
    for backend in BACKENDS:
        parallel, serial = median_ms(backend, 8), median_ms(backend, 1)
        print(
            f"{backend:8} {CALLS} calls of {NAP_S * 1000:.0f} ms: "
            f"{parallel:6.1f} ms with the default limit, {serial:6.1f} ms with limit 1 "
            f"(median of {TURNS} turns)"
        )


if __name__ == "__main__":
    main()
