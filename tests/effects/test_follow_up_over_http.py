"""A follow-up interrupt against the real adapter and the loopback server (SPEC 5, amended).

The interrupt ends the provider call as the kill does: the HTTP request is
closed (the server sees the client leave) and nothing more is delivered.
"""

from __future__ import annotations

import anyio
import pytest

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import GenerationTurnResult, JsonObject, LoopConfig, TurnSettings, TurnStatus

pytestmark = pytest.mark.anyio


class FollowingUpChannel(RecordingChannel):
    """A channel whose user sends another message as soon as the first text arrives."""

    control: MemoryTurnControl | None = None

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        await super().send_text(text, reply_to=reply_to)
        assert self.control is not None
        self.control.request_follow_up()


async def run(
    server: OpenAIServer, registry: ToolRegistry
) -> tuple[GenerationTurnResult, RecordingChannel]:
    control = MemoryTurnControl()
    channel = FollowingUpChannel()
    channel.control = control
    provider = OpenAICompatProvider(base_url=server.base_url, model="m")
    try:
        with anyio.fail_after(30):  # a hang guard, not a timing assertion
            result = await run_tool_loop(
                turn=TurnSettings(),
                config=LoopConfig(),
                provider=provider,
                registry=registry,
                channel=channel,
                control=control,
            )
    finally:
        await provider.aclose()
    assert control.kill_handles == []
    return result, channel


async def test_a_follow_up_during_the_first_stream_closes_the_http_request(
    server: OpenAIServer,
) -> None:
    """The interrupted stream keeps its first chunk; the server sees the client leave."""
    server.script(text_reply("Let me th", "never shown").stalled_after(2))
    result, channel = await run(server, ToolRegistry())
    assert result.status is TurnStatus.FOLLOW_UP_INTERRUPT
    assert channel.texts == ["Let me th"]
    assert result.stream_results[0].accumulated_text == "Let me th"
    assert await anyio.to_thread.run_sync(server.requests[0].client_left.wait, 10)


async def test_a_follow_up_after_a_tool_ran_lets_the_stream_finish(server: OpenAIServer) -> None:
    """Once a tool ran, the follow-up interrupts nothing: the second reply is read whole."""
    registry = ToolRegistry()

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        return {"sky": "clear"}

    registry.register(get_weather)
    server.script(tool_call_reply("get_weather", {}), text_reply("Clear", " skies", " in Paris."))
    result, channel = await run(server, registry)
    assert result.status is TurnStatus.COMPLETED
    assert channel.texts == ["Clear", " skies", " in Paris."]
