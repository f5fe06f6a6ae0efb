"""A 150-iteration turn: the workflow continues as new before its history grows too large.

The history's event count and size per iteration are printed (`-s` shows them);
docs/durable.md quotes them.
"""

from __future__ import annotations

import pytest

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from tests.temporal.world import World, history, serving, start
from toolloop.states import LoopConfig, TurnSettings, TurnStatus
from toolloop.temporal import HISTORY_BYTES, HISTORY_EVENTS, TurnInput

pytestmark = pytest.mark.anyio

ITERATIONS = 150


async def test_a_150_iteration_turn_completes_over_runs_each_within_the_limits(
    temporal: str, server: OpenAIServer
) -> None:
    """150 tool calls, then the answer: the turn completes with every call run once, its
    text once, and it continued as new, no run's history past the limits by more than an
    iteration's worth."""
    calls = [tool_call_reply("lookup", {"cents": n}, call_id=f"c{n}") for n in range(ITERATIONS)]
    server.script(*calls, text_reply("Done."))
    world = World(server)
    config = LoopConfig(max_function_call_iterations=ITERATIONS + 10)
    async with serving(temporal, world) as (client, queue):
        handle = await start(client, queue, TurnInput(turn=TurnSettings(), config=config))
        result = await handle.result()
        runs = await history(client, handle.id)
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == ["lookup"] * ITERATIONS
    assert "".join(world.channel.texts) == "Done."
    assert len(runs) > 1
    events = sum(count for count, _ in runs)
    size = sum(size for _, size in runs)
    print(
        f"\n{ITERATIONS} iterations, {len(runs)} runs: {events} events, {size} bytes of history;"
        f" per iteration {events / ITERATIONS:.1f} events, {size / ITERATIONS / 1000:.1f} kB;"
        f" largest run {max(c for c, _ in runs)} events, {max(s for _, s in runs)} bytes"
    )
    assert all(count < HISTORY_EVENTS + 50 for count, _ in runs)
    assert all(size < HISTORY_BYTES * 1.5 for _, size in runs)
