"""The stream activity hands the turn's verbatim limit to the provider (SPEC 2, SPEC 10).

The activity runs in Temporal's `ActivityEnvironment` (an activity context without a
server) against the real adapter and the loopback server: the turn's `LoopConfig` sets
the limit, the provider is built with nothing but its URL and model.
"""

from __future__ import annotations

import pytest
from temporalio.testing import ActivityEnvironment

from tests.openai_server import OpenAIServer, text_reply
from tests.providers.conftest import make_request
from toolloop.durable import TurnPorts
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.temporal.activities import TurnActivities
from toolloop.effects.temporal.messages import StreamInput
from toolloop.engine import tool_call
from toolloop.states import JsonObject, LoopConfig, StreamStatus, TurnSettings

pytestmark = pytest.mark.anyio

CALL = 'get_weather({"city": "Llanfairpwllgwyngyll"})'


async def _stream(server: OpenAIServer, limit: int) -> tuple[StreamStatus, str, int]:
    """One verbatim stream activity under `limit`: its status, the channel's text, the calls."""

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        return {"sky": "clear"}

    registry = ToolRegistry()
    registry.register(get_weather)
    channel = RecordingChannel()
    server.script(text_reply("Checking. ", CALL))
    turn = TurnSettings()
    given = StreamInput(
        turn=turn,
        once=make_request().once,
        config=LoopConfig(verbatim_tool_call_max_buffer_chars=limit),
        context=tool_call.tool_context(turn, 0, False, turn.context),
    )
    async with OpenAICompatProvider(base_url=server.base_url, model="m") as provider:
        ports = TurnPorts(
            provider=provider,
            registry=registry,
            channel=channel,
            control=MemoryTurnControl(),
            verbatim=True,
        )
        output = await ActivityEnvironment().run(TurnActivities(lambda _: ports).stream, given)
    return output.result.status, channel.text, len(output.result.batch)


async def test_a_call_over_the_turns_limit_is_shown_as_text(server: OpenAIServer) -> None:
    """With the turn's limit below the call's length, the stream completes with it as text."""
    assert await _stream(server, len(CALL) - 1) == (
        StreamStatus.COMPLETED,
        f"Checking. {CALL}",
        0,
    )


async def test_a_call_within_the_turns_limit_is_a_call(server: OpenAIServer) -> None:
    """With the turn's limit exactly the call's length, the same stream is the call."""
    assert await _stream(server, len(CALL)) == (StreamStatus.FUNCTION_CALL, "Checking. ", 1)
