"""The configured verbatim buffer limit reaches the real adapter over HTTP (SPEC 2, SPEC 10).

The bot author sets `VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS` in the loop's config and
builds `OpenAICompatProvider` with nothing but its URL and model: the loop hands the
limit to the provider on each `StreamRequest`. A verbatim call longer than the
configured limit (and far shorter than SPEC's default of 8192) is then released as
text, and the same call under a limit it fits is run.
"""

from __future__ import annotations

import anyio
import pytest

from tests.openai_server import OpenAIServer, text_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio

CITY = "Llanfairpwllgwyngyll" * 5
CALL = f'`get_weather({{"city": "{CITY}"}})`'
"""A verbatim candidate of 135 characters, code span included."""
LIMIT = 64
"""A configured limit the call outgrows."""


async def _turn(
    server: OpenAIServer, config: LoopConfig
) -> tuple[GenerationTurnResult, str, list[str]]:
    """One verbatim turn with a provider left at its defaults: result, channel text, cities."""
    cities: list[str] = []

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        cities.append(str(args["city"]))
        return {"sky": "clear"}

    registry = ToolRegistry()
    registry.register(get_weather)
    channel = RecordingChannel()
    provider = OpenAICompatProvider(base_url=server.base_url, model="m")
    try:
        with anyio.fail_after(30):  # a hang guard, not a timing assertion
            result = await run_tool_loop(
                turn=TurnSettings(),
                config=config,
                provider=provider,
                registry=registry,
                channel=channel,
                control=MemoryTurnControl(),
                verbatim=True,
            )
    finally:
        await provider.aclose()
    return result, channel.text, cities


async def test_a_call_over_the_configured_limit_is_shown_as_text(server: OpenAIServer) -> None:
    """With the config's limit below the call's length, the call is text and no tool runs."""
    assert LIMIT < len(CALL) < VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS
    server.script(text_reply("Checking. ", CALL[:70], CALL[70:]))
    config = LoopConfig(verbatim_tool_call_max_buffer_chars=LIMIT)
    result, shown, cities = await _turn(server, config)
    assert (result.status, shown, cities) == (TurnStatus.COMPLETED, f"Checking. {CALL}", [])
    assert len(server.requests) == 1


async def test_a_call_within_the_configured_limit_runs(server: OpenAIServer) -> None:
    """With the config's limit exactly the call's length, the same call runs the tool."""
    server.script(text_reply("Checking. ", CALL[:70], CALL[70:]), text_reply("Clear."))
    config = LoopConfig(verbatim_tool_call_max_buffer_chars=len(CALL))
    result, shown, cities = await _turn(server, config)
    assert (result.status, shown, cities) == (TurnStatus.COMPLETED, "Checking. Clear.", [CITY])
