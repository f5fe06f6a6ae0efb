"""Token usage in telemetry: on each chat span, summed on the turn span, and its histogram.

Usage is what the provider reported (`StreamResult.usage`); a call that reported
none records none (not zero). Checked with scripted streams, across the
fallback chain's attempts, and through the OpenAI-compatible adapter against a
loopback server that sends the usage chunk.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.effects.harness import ScriptProvider, completed
from tests.openai_server import OpenAIServer, text_reply
from tests.providers.test_usage import metered
from tests.telemetry.sdk import Recorded
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import (
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    TokenUsage,
    TurnSettings,
)

pytestmark = pytest.mark.anyio


def reporting(status: StreamStatus, usage: TokenUsage | None, text: str = "") -> Any:
    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        if text:
            sink.progress()
            await sink.deliver(text)
        error = StreamError(type="http_status", message="HTTP 503")
        data = error if status is StreamStatus.ERROR else None
        return StreamResult(status=status, accumulated_text=text, data=data, usage=usage)

    return play


async def run(recorded: Recorded, *attempts: Attempt) -> None:
    turn = TurnSettings()
    with recorded.telemetry.turn(turn, attempts) as trace:
        await run_generation_turn(
            turn=turn,
            attempts=list(attempts),
            registry=ToolRegistry(),
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
            observer=trace.observer,
            on_event=trace.on_event,
        )


def attempt(name: str, *scripts: Any) -> Attempt:
    provider = ScriptProvider(*scripts, descriptor=ProviderDescriptor(name=name))
    return Attempt(provider=provider, config=LoopConfig())


def token_points(recorded: Recorded) -> dict[tuple[str, str], tuple[int, int]]:
    """(model, token type) -> (count, sum) of the usage histogram."""
    return {
        (point.attributes["gen_ai.request.model"], point.attributes["gen_ai.token.type"]): (
            point.count,
            point.sum,
        )
        for point in recorded.points("gen_ai.client.token.usage")
    }


async def test_each_call_s_usage_is_on_its_span_and_the_turn_sums_every_attempt() -> None:
    """A failed primary that still reported usage, then the backup: both count for the turn."""
    recorded = Recorded()
    await run(
        recorded,
        attempt("primary", reporting(StreamStatus.ERROR, TokenUsage(input_tokens=40))),
        attempt(
            "backup",
            reporting(
                StreamStatus.COMPLETED,
                TokenUsage(input_tokens=12, output_tokens=5, reasoning_tokens=2),
                text="Sunny.",
            ),
        ),
    )
    failed, done = (span.attributes or {} for span in recorded.named("chat "))
    assert (failed["gen_ai.usage.input_tokens"], failed["gen_ai.usage.output_tokens"]) == (40, 0)
    assert "toolloop.usage.reasoning_tokens" not in failed
    assert (done["gen_ai.usage.input_tokens"], done["gen_ai.usage.output_tokens"]) == (12, 5)
    assert done["toolloop.usage.reasoning_tokens"] == 2
    turn = recorded.turn_span().attributes or {}
    assert (turn["gen_ai.usage.input_tokens"], turn["gen_ai.usage.output_tokens"]) == (52, 5)
    assert token_points(recorded) == {
        ("primary", "input"): (1, 40),
        ("primary", "output"): (1, 0),
        ("backup", "input"): (1, 12),
        ("backup", "output"): (1, 5),
    }


async def test_a_call_that_reported_no_usage_records_none_not_zero() -> None:
    recorded = Recorded()
    await run(recorded, attempt("quiet", completed("Hi.")))
    (chat,) = recorded.named("chat ")
    assert not any(key.startswith("gen_ai.usage.") for key in chat.attributes or {})
    assert "gen_ai.usage.input_tokens" not in (recorded.turn_span().attributes or {})
    assert token_points(recorded) == {}


async def test_the_openai_adapter_s_usage_chunk_over_loopback_http_reaches_the_spans() -> None:
    recorded = Recorded()
    with OpenAIServer([metered(text_reply("Sunny", " in Paris."), 31, 7, reasoning=3)]) as server:
        async with OpenAICompatProvider(base_url=server.base_url, model="loopback-model") as llm:
            await run(recorded, Attempt(provider=llm, config=LoopConfig()))
    (chat,) = recorded.named("chat ")
    attributes = chat.attributes or {}
    assert chat.name == "chat loopback-model"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        31,
        7,
    )
    assert attributes["toolloop.usage.reasoning_tokens"] == 3
    assert token_points(recorded) == {
        ("loopback-model", "input"): (1, 31),
        ("loopback-model", "output"): (1, 7),
    }
