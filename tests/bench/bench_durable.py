"""The journal's cost: a 100-iteration tool chain with and without the SQLite journal.

The chain of bench_interpreter (one streamed chunk, a tool that answers at
once) run by `run_tool_loop` alone, then by `run_journaled` into a journal
file in a temporary folder: µs per iteration each, and the journal's overhead
per iteration. An iteration journals three writes (the stream's chunk, its
StreamEnded, the tool's ToolSettled), each one transaction in a worker thread.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from tests.bench.bench_interpreter import TURN, Channel, Provider, Registry
from toolloop.durable import Journal, TurnPorts, run_journaled
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import run_tool_loop
from toolloop.states import LoopConfig

ITERATIONS = 100
RUNS = 5
CONFIG = LoopConfig(max_function_call_iterations=ITERATIONS)


def ports() -> TurnPorts:
    return TurnPorts(
        provider=Provider(), registry=Registry(), channel=Channel(), control=MemoryTurnControl()
    )


async def bare(_: int) -> None:
    p = ports()
    await run_tool_loop(
        turn=TURN,
        config=CONFIG,
        provider=p.provider,
        registry=p.registry,
        channel=p.channel,
        control=p.control,
    )


def journaled(folder: Path) -> Callable[[int], Awaitable[None]]:
    async def run(number: int) -> None:
        async with await Journal.open(folder / f"{number}.db") as journal:
            await run_journaled(journal, "bench", turn=TURN, config=CONFIG, ports=ports())

    return run


def per_iteration_us(backend: str, chain: Callable[[int], Awaitable[None]]) -> float:
    """The best of RUNS chains, in µs per iteration."""

    async def best() -> float:
        times = []
        for number in range(RUNS):
            started = time.perf_counter()
            await chain(number)
            times.append(time.perf_counter() - started)
        return min(times) / ITERATIONS * 1e6

    return float(anyio.run(best, backend=backend))


def main() -> None:
    for backend in ("trio", "asyncio"):
        with tempfile.TemporaryDirectory() as folder:
            without = per_iteration_us(backend, bare)
            with_journal = per_iteration_us(backend, journaled(Path(folder)))
        print(
            f"{backend}: {without:.0f} µs/iteration without a journal, {with_journal:.0f} µs "
            f"with one: +{with_journal - without:.0f} µs (x{with_journal / without:.1f})"
        )


if __name__ == "__main__":
    main()
