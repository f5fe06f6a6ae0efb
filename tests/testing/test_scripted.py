"""`ScriptedProvider`: a bot's tests script the model's replies and run the real loop."""

from __future__ import annotations

from typing import Any

import pytest

from toolloop import (
    LoopConfig,
    MemoryTurnControl,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolRegistry,
    TurnSettings,
    TurnStatus,
    run_tool_loop,
)
from toolloop.ports import FunctionCall
from toolloop.testing import RecordingChannel, ScriptedProvider, ScriptExhausted

pytestmark = pytest.mark.anyio
registry = ToolRegistry()


@registry.tool(parameters={"type": "object", "properties": {"city": {"type": "string"}}})
async def weather(args: dict[str, Any], call: Any) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": args["city"], "sky": "clear"}


async def run(provider: ScriptedProvider, channel: RecordingChannel | None = None) -> Any:
    return await run_tool_loop(
        turn=TurnSettings(),
        config=LoopConfig(),
        provider=provider,
        registry=registry,
        channel=channel or RecordingChannel(),
        control=MemoryTurnControl(),
    )


async def test_a_call_then_text_runs_the_tool_and_streams_the_answer() -> None:
    """The call is dispatched to the real registry; the next call sees its result."""
    provider = ScriptedProvider([FunctionCall(name="weather", args={"city": "Kyoto"}), "Clear."])
    channel = RecordingChannel()
    result = await run(provider, channel)
    assert (result.status, result.ended_by, channel.text) == (
        TurnStatus.COMPLETED,
        "completed",
        "Clear.",
    )
    [entry] = provider.requests[1].once.function_history
    assert entry.response == {"city": "Kyoto", "sky": "clear"}


async def test_a_stream_result_is_played_as_given() -> None:
    """A scripted failure ends the turn as the real one would, its error in the result."""
    failed = StreamResult(status=StreamStatus.ERROR, data=StreamError(type="x", message="down"))
    result = await run(ScriptedProvider([failed]))
    assert (result.status, result.ended_by, result.error) == (
        TurnStatus.ERROR,
        "stream_failed",
        StreamError(type="x", message="down"),
    )


async def test_a_call_past_the_script_names_the_call_and_the_scripts_length() -> None:
    """More calls than replies is the test's mistake: an error saying so reaches the caller."""
    with pytest.raises(
        ScriptExhausted, match=r"^call 2 to the scripted provider, but the script has 1 replies$"
    ):
        await run(ScriptedProvider([FunctionCall(name="weather", args={"city": "Oslo"})]))
