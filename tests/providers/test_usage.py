"""Token usage end to end: what each adapter reads, and what a turn and its host events report.

The OpenAI-compatible adapter asks for usage (`stream_options`) and reads the
chunk servers send after the finish reason, with empty `choices`; Gemini
repeats `usageMetadata` on every chunk, so only the last counts, its thoughts
counted as output and as reasoning. A turn sums its streams' usage, and each
`StreamFinished` host event carries its stream's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types

from tests.openai_server import (
    DONE,
    OpenAIServer,
    Reply,
    chunk,
    raw_reply,
    stream_reply,
    text_reply,
    tool_call_reply,
)
from tests.providers import gemini_transcripts as t
from tests.providers.conftest import WEATHER, RecordingSink, make_provider, make_request
from toolloop import Attempt, TokenUsage, run_generation_turn
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.observe import HostEvent, StreamFinished
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.gemini import GeminiProvider
from toolloop.states import (
    ContextItem,
    GenerationTurnResult,
    JsonObject,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)
from toolloop.testing import GeminiServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    with GeminiServer(t.scripted()) as running:
        yield running


def usage_chunk(prompt: int, completion: int, reasoning: int | None = None) -> dict[str, Any]:
    """The chunk an OpenAI-compatible server sends last when asked: usage, no choices."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": usage,
    }


def metered(reply: Reply, prompt: int, completion: int, reasoning: int | None = None) -> Reply:
    """`reply` with the usage chunk between its finish reason and `[DONE]`."""
    frames = [frame for frame in reply.frames if frame != DONE]
    return Reply(frames=(*frames, usage_chunk(prompt, completion, reasoning), DONE))


async def stream(server: OpenAIServer, reply: Reply, **options: Any) -> StreamResult:
    server.script(reply)
    async with make_provider(server, **options) as provider:
        return await provider.stream(make_request(), RecordingSink())


class TestOpenAICompatible:
    async def test_the_request_asks_for_usage(self, server: OpenAIServer) -> None:
        """`stream_options.include_usage` is on by default."""
        await stream(server, text_reply("hi"))
        assert server.requests[0].body["stream_options"] == {"include_usage": True}

    async def test_extra_body_turns_usage_off_or_drops_the_field(
        self, server: OpenAIServer
    ) -> None:
        """`include_usage: false` is sent as given; `stream_options: None` sends no field."""
        off = {"stream_options": {"include_usage": False}}
        await stream(server, text_reply("hi"), extra_body=off)
        await stream(server, text_reply("hi"), extra_body={"stream_options": None})
        assert server.requests[0].body["stream_options"] == {"include_usage": False}
        assert "stream_options" not in server.requests[1].body

    async def test_the_usage_chunk_after_the_finish_reason_is_read(
        self, server: OpenAIServer
    ) -> None:
        """The chunk with empty `choices` after the finish: input, output, reasoning."""
        result = await stream(server, metered(text_reply("Sunny."), 12, 5, reasoning=2))
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "Sunny.")
        assert result.usage == TokenUsage(input_tokens=12, output_tokens=5, reasoning_tokens=2)

    async def test_usage_sent_a_moment_after_the_finish_is_still_read(
        self, server: OpenAIServer
    ) -> None:
        """The usage chunk in a later write than the finish: read while the body drains."""
        frames = metered(text_reply("Sunny."), 7, 3).frames
        server.script(Reply(frames=frames).with_delay(0.05))
        async with make_provider(server) as provider:
            result = await provider.stream(make_request(), RecordingSink())
        assert result.usage == TokenUsage(input_tokens=7, output_tokens=3)

    async def test_usage_on_the_finishing_chunk_itself_is_read(self, server: OpenAIServer) -> None:
        """Some servers put `usage` on the chunk with the finish reason."""
        last = {**chunk({}, "stop"), "usage": usage_chunk(4, 1)["usage"]}
        result = await stream(server, raw_reply(chunk({"content": "ok"}), last, DONE))
        assert result.usage == TokenUsage(input_tokens=4, output_tokens=1)

    async def test_a_call_and_a_failed_stream_keep_their_usage(self, server: OpenAIServer) -> None:
        """Usage is reported whatever the stream ended as."""
        called = await stream(server, metered(tool_call_reply("get_weather", {"city": "P"}), 9, 6))
        filtered = await stream(
            server, metered(stream_reply({"content": "x"}, finish_reason="content_filter"), 3, 1)
        )
        assert called.status is StreamStatus.FUNCTION_CALL
        assert called.usage == TokenUsage(input_tokens=9, output_tokens=6)
        assert filtered.status is StreamStatus.ERROR
        assert filtered.usage == TokenUsage(input_tokens=3, output_tokens=1)

    async def test_no_usage_sent_is_none(self, server: OpenAIServer) -> None:
        """A server that ignores `stream_options`: no usage, not zero usage."""
        assert (await stream(server, text_reply("hi"))).usage is None

    async def test_a_usage_of_the_wrong_shape_is_logged_and_not_reported(
        self, server: OpenAIServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A count that is not one costs the usage, named in a warning, never the reply."""
        bad = usage_chunk(4, 1)
        bad["usage"]["completion_tokens"] = "many"
        reply = raw_reply(chunk({"content": "ok"}), chunk({}, "stop"), bad, DONE)
        with caplog.at_level(logging.WARNING, logger="toolloop.effects.providers.usage"):
            result = await stream(server, reply)
        assert (result.status, result.accumulated_text, result.usage) == (
            StreamStatus.COMPLETED,
            "ok",
            None,
        )
        assert "`completion_tokens` is not a count: 'many'" in caplog.text

    async def test_an_unreadable_event_after_the_finish_costs_nothing(
        self, server: OpenAIServer
    ) -> None:
        """After the finish the reply is complete: a broken trailer is skipped."""
        reply = raw_reply(chunk({"content": "ok"}), chunk({}, "stop"), b"data: {oops\n\n", DONE)
        result = await stream(server, reply)
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "ok")


def gemini_usage(prompt: int, candidates: int, thoughts: int | None = None) -> Any:
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        thoughts_token_count=thoughts,
        total_token_count=prompt + candidates + (thoughts or 0),
    )


class TestGemini:
    async def gemini_stream(self, server: GeminiServer, frames: list[Any]) -> StreamResult:
        server.responder = t.scripted(frames)
        async with GeminiProvider(base_url=server.base_url, model="m", api_key="") as gemini:
            return await gemini.stream(make_request(), RecordingSink())

    async def test_only_the_last_chunks_usage_counts_thoughts_as_output_and_reasoning(
        self, gemini_server: GeminiServer
    ) -> None:
        """Every chunk repeats the counts so far: the last is the stream's; thoughts are output."""
        frames = [
            t.chunk(t.thought("Hm."), usage=gemini_usage(20, 0, 4)),
            t.chunk(t.text("Sunny "), usage=gemini_usage(20, 2, 4)),
            t.chunk(t.text("today."), finish="STOP", usage=gemini_usage(20, 5, 4)),
        ]
        result = await self.gemini_stream(gemini_server, frames)
        assert result.status is StreamStatus.COMPLETED
        assert result.usage == TokenUsage(input_tokens=20, output_tokens=9, reasoning_tokens=4)

    async def test_no_usage_metadata_is_none(self, gemini_server: GeminiServer) -> None:
        assert (await self.gemini_stream(gemini_server, t.plain_text())).usage is None

    async def test_a_refusal_keeps_its_usage(self, gemini_server: GeminiServer) -> None:
        """A SAFETY end is an error result, with the tokens it cost."""
        frames = [t.chunk(t.text("Well"), finish="SAFETY", usage=gemini_usage(8, 1))]
        result = await self.gemini_stream(gemini_server, frames)
        assert result.status is StreamStatus.ERROR
        assert result.usage == TokenUsage(input_tokens=8, output_tokens=1)


class TestTheTurn:
    async def test_a_turn_sums_its_streams_and_each_stream_event_carries_its_own(
        self, server: OpenAIServer
    ) -> None:
        """A tool turn of two streams: `StreamFinished.usage` each, the result's usage the sum."""
        server.script(
            metered(tool_call_reply("get_weather", {"city": "Paris"}), 10, 4, reasoning=1),
            metered(text_reply("Clear in Paris."), 30, 6),
        )
        registry = ToolRegistry()

        async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
            return {"sky": "clear"}

        registry.register(get_weather, parameters=WEATHER.parameters)
        events: list[HostEvent] = []
        async with make_provider(server) as provider:
            result: GenerationTurnResult = await run_generation_turn(
                turn=TurnSettings(context=(ContextItem(author="alice", content="Paris?"),)),
                attempts=[Attempt(provider=provider)],
                registry=registry,
                channel=RecordingChannel(),
                control=MemoryTurnControl(),
                on_event=events.append,
            )
        assert result.status is TurnStatus.COMPLETED
        finished = [event.usage for event in events if isinstance(event, StreamFinished)]
        assert finished == [
            TokenUsage(input_tokens=10, output_tokens=4, reasoning_tokens=1),
            TokenUsage(input_tokens=30, output_tokens=6),
        ]
        assert result.usage == TokenUsage(input_tokens=40, output_tokens=10, reasoning_tokens=1)

    def test_a_turn_whose_streams_reported_none_has_none(self) -> None:
        """No stream reported usage: None, not zero (a provider that does not count)."""
        unmetered = StreamResult(status=StreamStatus.COMPLETED, accumulated_text="hi")
        result = GenerationTurnResult(status=TurnStatus.COMPLETED, stream_results=(unmetered,))
        assert result.usage is None
        assert GenerationTurnResult(status=TurnStatus.COMPLETED).usage is None
