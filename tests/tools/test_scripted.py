"""The scripted ports, driven by the real interpreter on trio's virtual clock."""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
import pytest
import trio.testing

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.registry import ToolRegistry
from toolloop.engine.config_parsing import parse_config
from toolloop.states import GenerationTurnResult, StreamError, StreamStatus, TurnStatus
from toolloop.tools.scenario import parse_scenario
from toolloop.tools.scripted import (
    ScriptedChannel,
    ScriptedProviderError,
    ScriptedTurnControl,
    repeating_last,
    scripted_ports,
)

SEARCH = {
    "name": "web_search",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}


@attrs.frozen(kw_only=True)
class Run:
    """What a scripted run left behind."""

    result: GenerationTurnResult
    channel: RecordingChannel
    registry: ToolRegistry
    control: MemoryTurnControl


def run(document: dict[str, Any]) -> Run:
    """Run the scenario through the interpreter on a mock clock that jumps when all wait."""
    scenario = parse_scenario(json.dumps(document))
    control = ScriptedTurnControl(stop_context_queued=scenario.turn.stop_context_queued)
    channel = ScriptedChannel()
    provider, registry = scripted_ports(scenario, control, channel)

    async def main() -> GenerationTurnResult:
        return await run_tool_loop(
            turn=scenario.turn,
            config=parse_config(scenario.env).config,
            provider=provider,
            registry=registry,
            channel=channel,
            control=control,
        )

    clock = trio.testing.MockClock(autojump_threshold=0)
    result = anyio.run(main, backend="trio", backend_options={"clock": clock})
    return Run(result=result, channel=channel, registry=registry, control=control)


def statuses(outcome: Run) -> list[StreamStatus]:
    return [stream.status for stream in outcome.result.stream_results]


def test_streams_are_played_in_order_and_text_reaches_the_channel() -> None:
    """A call, then a completed answer: both texts are delivered through the sink."""
    outcome = run(
        {
            "tools": [{**SEARCH, "results": [{"data": {"hits": 3}}]}],
            "streams": [
                {"text": "Let me look. ", "call": {"name": "web_search", "args": {"query": "c"}}},
                {"status": "completed", "text": "Three hits."},
            ],
        }
    )
    assert outcome.result.status is TurnStatus.COMPLETED
    assert outcome.channel.text == "Let me look. Three hits."
    assert [(r.tool, r.success) for r in outcome.registry.recent()] == [("web_search", True)]


def test_last_stream_repeats() -> None:
    """With one calling stream, the model calls until the iteration ceiling."""
    outcome = run(
        {
            "env": {"BOT_MAX_FUNCTION_CALL_ITERATIONS": 3},
            "tools": [SEARCH],
            "streams": [{"call": {"name": "web_search", "args": {"query": "c"}}}],
        }
    )
    assert statuses(outcome) == [StreamStatus.FUNCTION_CALL] * 3
    assert outcome.result.status is TurnStatus.TIMEOUT


def test_stall_times_out_on_the_virtual_clock() -> None:
    """A stalled stream goes silent, so the interpreter's inactivity timeout ends it."""
    outcome = run({"streams": [{"stall": True, "text": "half a sen"}]})
    assert outcome.result.status is TurnStatus.TIMEOUT
    assert outcome.result.stream_results[0].accumulated_text == "half a sen"


def test_stall_with_kill_is_a_genuine_stop() -> None:
    """The kill ends the silent stream at once, as stopped_by_user."""
    outcome = run({"streams": [{"stall": True, "kill": True}]})
    assert statuses(outcome) == [StreamStatus.STOPPED_BY_USER]
    assert outcome.control.killed.is_set()


def test_raise_stream_propagates_out_of_the_loop() -> None:
    """A raising provider call is not caught by the loop."""
    with pytest.raises(ScriptedProviderError, match=r"^connection refused$"):
        run({"streams": [{"raise": "connection refused"}]})


def test_default_model_parts_are_the_text_as_one_part() -> None:
    """Without `model_parts`, a stream reports its text as one text part; none when blank."""
    outcome = run({"streams": [{"text": "Hi."}]})
    assert outcome.result.stream_results[0].model_parts == ({"type": "text", "text": "Hi."},)
    blank = run({"streams": [{"text": "  "}]})
    assert blank.result.stream_results[0].model_parts == ()


def test_given_model_parts_are_reported_as_they_are() -> None:
    """`model_parts` replaces the default, opaque."""
    parts = [{"type": "reasoning", "summary": "x"}]
    outcome = run({"streams": [{"text": "Hi.", "model_parts": parts}]})
    assert outcome.result.stream_results[0].model_parts == ({"type": "reasoning", "summary": "x"},)


def test_follow_up_is_a_real_follow_up_request() -> None:
    """The follow-up goes through the turn control and the loop ends the stream."""
    outcome = run({"streams": [{"text": "Let me th", "follow_up": True}]})
    assert statuses(outcome) == [StreamStatus.FOLLOW_UP_INTERRUPT]
    assert outcome.control.follow_up_count == 1


def test_channel_fails_is_the_channel_raising() -> None:
    """The scripted channel refuses the stream's first text; the stream ends `error`."""
    outcome = run({"streams": [{"text": "Hello", "channel_fails": "403 Missing Permissions"}]})
    (stream,) = outcome.result.stream_results
    assert stream.status is StreamStatus.ERROR
    assert isinstance(stream.data, StreamError)
    assert stream.data.message == (
        "the channel could not deliver text: ChannelRefusedError: 403 Missing Permissions"
    )
    assert outcome.channel.texts == []


def test_stop_before_tool_keeps_the_tool_from_running() -> None:
    """A genuine stop pending when the call arrives aborts before dispatch."""
    call = {"name": "web_search", "args": {"query": "c"}}
    outcome = run({"tools": [SEARCH], "streams": [{"call": call, "stop_before_tool": True}]})
    assert outcome.result.status is TurnStatus.STOPPED_BY_USER
    assert outcome.registry.recent() == ()


def test_refused_call_consumes_no_result() -> None:
    """A schema refusal does not run the code, so the first result is still next."""
    outcome = run(
        {
            "tools": [{**SEARCH, "results": [{"data": {"n": 1}}, {"data": {"n": 2}}]}],
            "streams": [
                {"call": {"name": "web_search", "args": {}}},
                {"call": {"name": "web_search", "args": {"query": "c"}}, "text": "x"},
                {"status": "completed"},
            ],
        }
    )
    ran = [(r.ran, r.success) for r in outcome.registry.recent()]
    assert ran == [(False, False), (True, True)]


def test_hanging_tool_is_ended_by_the_tool_timeout() -> None:
    """A hanging result never returns; the interpreter's timeout cancels it."""
    outcome = run(
        {
            "tools": [{**SEARCH, "results": [{"hang": True}]}],
            "streams": [
                {"call": {"name": "web_search", "args": {"query": "c"}}},
                {"status": "completed", "text": "It timed out."},
            ],
        }
    )
    assert outcome.result.status is TurnStatus.COMPLETED
    assert outcome.registry.recent()[0].error == "cancelled"


def test_hanging_tool_with_kill_aborts_the_turn() -> None:
    """The kill arrives while the tool hangs: a genuine stop."""
    outcome = run(
        {
            "tools": [{**SEARCH, "results": [{"hang": True, "kill": True}]}],
            "streams": [{"call": {"name": "web_search", "args": {"query": "c"}}}],
        }
    )
    assert outcome.result.status is TurnStatus.STOPPED_BY_USER
    assert outcome.control.killed.is_set()


def test_unavailable_tool_is_refused_by_the_real_registry() -> None:
    """`available_for_provider: false` reaches the registry's provider gate."""
    outcome = run(
        {
            "tools": [{**SEARCH, "available_for_provider": False}],
            "streams": [
                {"call": {"name": "web_search", "args": {"query": "c"}}},
                {"status": "completed"},
            ],
        }
    )
    (refused,) = outcome.registry.recent()
    assert refused.error == 'tool "web_search" is not available for provider custom'


def test_repeating_last_repeats_the_last_item() -> None:
    """Items come once each, then the last forever."""
    take = repeating_last(["a", "b"])
    assert [take() for _ in range(4)] == ["a", "b", "b", "b"]
