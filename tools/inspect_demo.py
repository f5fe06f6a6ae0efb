"""`toolloop inspect --demo`: the inspector page over a few concurrent demo turns.

Each of `--turns` workers runs the demo conversation (`toolloop demo`'s model,
served on loopback, through the real OpenAI-compatible adapter and registry)
turn after turn, each on its own channel, with the model's chunks and the
tools slowed down so a person can follow the phases; every third turn of a
worker is killed during its first tool, so the list shows another ending too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import anyio

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.inspect import Inspector, TokenRequired, serve_in_thread
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import JsonObject, LoopConfig
from toolloop.testing.model_server import ModelServer
from toolloop.tools import demo_model, demo_tools
from toolloop.tools.demo import demo_turn

TOKEN_VARIABLE = "TOOLLOOP_INSPECT_TOKEN"
CHUNK_DELAY = 0.12
"""Seconds between the demo model's chunks: a provider call lasts a second or two."""
TOOL_DELAY = 1.0
"""Seconds each demo tool takes, so DISPATCHING is seen lit."""
KILL_AFTER = 0.5
"""Seconds into its first tool that a killed demo turn is killed."""


def inspect(
    *,
    demo: bool,
    host: str,
    port: int,
    token: str | None,
    turns: int,
    rounds: int | None,
) -> int:
    """Serve the page over demo turns until interrupted (or `rounds` turns per worker)."""
    if not demo:
        print(
            "toolloop inspect: the inspector shows the turns of the process that runs them: "
            "attach it to your bot (docs/inspect.md), or see it now with --demo",
            file=sys.stderr,
        )
        return 2
    if turns < 1:
        print(f"toolloop inspect: --turns must be 1 or more, not {turns}", file=sys.stderr)
        return 2
    inspector = Inspector()
    try:
        running = serve_in_thread(
            inspector, host=host, port=port, token=token or os.environ.get(TOKEN_VARIABLE)
        )
    except (TokenRequired, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    print(f"toolloop inspect: {running.url}", flush=True)
    try:
        anyio.run(_workers, inspector, turns, rounds, backend="trio")
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
    return 0


async def _workers(inspector: Inspector, turns: int, rounds: int | None) -> None:
    with ModelServer(demo_model.chunks, delay=CHUNK_DELAY) as server:
        provider = OpenAICompatProvider(
            base_url=server.base_url, model=demo_model.MODEL, name="demo"
        )
        async with provider, anyio.create_task_group() as group:
            for worker in range(turns):
                group.start_soon(_worker, inspector, provider, worker, rounds)


async def _worker(
    inspector: Inspector, provider: OpenAICompatProvider, worker: int, rounds: int | None
) -> None:
    await anyio.sleep(worker * 0.7)  # staggered, so the turns are in different phases
    count = 0
    while rounds is None or count < rounds:
        control = MemoryTurnControl()
        killed = count % 3 == 2
        turn = demo_turn()
        with inspector.watch(turn, channel=f"#demo-{worker + 1}") as view:
            await run_generation_turn(
                turn=turn,
                attempts=[Attempt(provider=provider, config=LoopConfig())],
                registry=_slow_registry(control.kill if killed else None),
                channel=RecordingChannel(),
                control=control,
                observer=view.observer,
            )
        count += 1
        await anyio.sleep(1.0)


def _slow_registry(kill: Callable[[], None] | None) -> ToolRegistry:
    """The demo's two tools, each taking `TOOL_DELAY`; with `kill`, the first call is killed."""

    async def calculate(args: JsonObject, call: ToolCall) -> Any:
        if kill is not None:
            await anyio.sleep(KILL_AFTER)
            kill()
        await anyio.sleep(TOOL_DELAY)
        return demo_tools.calculate(args["expression"])

    async def get_time(args: JsonObject, call: ToolCall) -> Any:
        await anyio.sleep(TOOL_DELAY)
        return demo_tools.get_time(args["timezone"])

    registry = ToolRegistry()
    registry.register(calculate, name="calculate", parameters=demo_tools.CALCULATE)
    registry.register(get_time, name="get_time", parameters=demo_tools.GET_TIME)
    return registry
