"""`run_turn`: one turn for the common case, in one call.

A first program has a prompt, a model and some tools; the other ports and
the configuration have sensible defaults (a terminal, an in-memory turn
control, the process environment). What it returns is what `run_tool_loop`
returns, so a program can grow into the full call without changing how it
reads the result.
"""

from __future__ import annotations

import attrs

from toolloop.effects.config_loading import environment_config
from toolloop.effects.console import ConsoleChannel
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import Observer, run_tool_loop
from toolloop.effects.ports import Channel, Provider, ToolRegistryPort, TurnControl
from toolloop.states import ContextItem, GenerationTurnResult, LoopConfig, TurnSettings


async def run_turn(
    prompt: str,
    *,
    provider: Provider,
    registry: ToolRegistryPort,
    channel: Channel | None = None,
    control: TurnControl | None = None,
    config: LoopConfig | None = None,
    turn: TurnSettings | None = None,
    observer: Observer | None = None,
) -> GenerationTurnResult:
    """Answer `prompt` (a user's message) with `provider` and `registry`'s tools.

    `channel` defaults to a `ConsoleChannel` (the reply printed as it streams),
    `control` to a fresh `MemoryTurnControl` (keep your own to `kill()` the turn
    from another task), `config` to the process environment's
    (`TOOL_EXECUTION_TIMEOUT_MS`, `BOT_MAX_FUNCTION_CALL_ITERATIONS`, ...), and
    `turn` to default settings; the prompt is appended to `turn.context` and the
    turn speaks through `provider.descriptor`.
    """
    settings = turn or TurnSettings()
    settings = attrs.evolve(
        settings,
        provider=provider.descriptor,
        context=(*settings.context, ContextItem(content=prompt)),
    )
    return await run_tool_loop(
        turn=settings,
        config=config or environment_config(),
        provider=provider,
        registry=registry,
        channel=channel or ConsoleChannel(),
        control=control or MemoryTurnControl(),
        observer=observer,
    )
