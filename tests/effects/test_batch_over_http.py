"""A two-call turn against the real adapter and the loopback server (SPEC 6b).

The scripted server answers the first request with two `delta.tool_calls`
indices in one reply (a model choosing to call two tools at once; llama.cpp's
tiny test model cannot be made to, so the reply is scripted here); both tools
run, and the second request carries one assistant turn with both calls and a
`tool` message answering each, by id, in the model's order.
"""

from __future__ import annotations

import anyio
import pytest

from tests.openai_server import OpenAIServer, Reply, stream_reply, text_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import JsonObject, LoopConfig, TurnSettings, TurnStatus

pytestmark = pytest.mark.anyio


def two_calls() -> Reply:
    """One reply with two calls, their fragments interleaved as servers send them."""
    weather = {"index": 0, "id": "call_w", "type": "function", "function": {"name": "get_weather"}}
    time = {"index": 1, "id": "call_t", "type": "function", "function": {"name": "get_time"}}
    return stream_reply(
        {"content": "Checking both."},
        {"tool_calls": [weather]},
        {"tool_calls": [time]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Lima"}'}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": '{"zone": "UTC"}'}}]},
        finish_reason="tool_calls",
    )


async def test_two_calls_in_one_reply_both_run_and_both_are_answered(
    server: OpenAIServer,
) -> None:
    """Both tools run side by side; the next request answers call_w then call_t."""
    registry = ToolRegistry()
    both_running = anyio.Event()
    running = 0

    async def meet() -> None:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        with anyio.fail_after(10):  # each waits for the other: they must overlap
            await both_running.wait()

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        await meet()
        return {"sky": f"clear in {args['city']}"}

    async def get_time(args: JsonObject, call: ToolCall) -> JsonObject:
        await meet()
        return {"time": f"10:00 {args['zone']}"}

    registry.register(get_weather)
    registry.register(get_time)
    server.script(two_calls(), text_reply("Clear, and 10:00."))
    control = MemoryTurnControl()
    provider = OpenAICompatProvider(base_url=server.base_url, model="m")
    try:
        with anyio.fail_after(30):  # a hang guard, not a timing assertion
            result = await run_tool_loop(
                turn=TurnSettings(),
                config=LoopConfig(),
                provider=provider,
                registry=registry,
                channel=RecordingChannel(),
                control=control,
            )
    finally:
        await provider.aclose()
    assert result.status is TurnStatus.COMPLETED
    sent = server.requests[1].body["messages"][-3:]
    assert sent[0]["role"] == "assistant" and sent[0]["content"] == "Checking both."
    assert [(c["id"], c["function"]["name"]) for c in sent[0]["tool_calls"]] == [
        ("call_w", "get_weather"),
        ("call_t", "get_time"),
    ]
    assert [(m["role"], m["tool_call_id"]) for m in sent[1:]] == [
        ("tool", "call_w"),
        ("tool", "call_t"),
    ]
    assert '"clear in Lima"' in sent[1]["content"] and '"10:00 UTC"' in sent[2]["content"]
    assert control.kill_handles == []
