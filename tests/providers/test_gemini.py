"""GeminiProvider against the loopback Gemini server: part kinds, signatures, ends and errors.

The server checks every request as Gemini 3 does (a model turn's first call
signed, every signature it sent back on exactly its part, one response per
call), so a test here fails when the adapter drops or moves a signature.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.providers import gemini_transcripts as t
from tests.providers.conftest import WEATHER, RecordingSink, make_request
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.gemini import SKIP_SIGNATURE, GeminiProvider
from toolloop.states import (
    ContextItem,
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolHistoryEntry,
    TurnSettings,
    TurnStatus,
)
from toolloop.testing import GeminiError, GeminiServer

pytestmark = pytest.mark.anyio

KEY = "AIza-test-key-0123456789"
BASE = (
    ContextItem(kind="system", content="You are Tomo."),
    ContextItem(author="alice", content="Weather in Paris?"),
)


@pytest.fixture
def server() -> Iterator[GeminiServer]:
    with GeminiServer(t.scripted(), api_key=KEY) as running:
        yield running


def provider(server: GeminiServer, **options: Any) -> GeminiProvider:
    return GeminiProvider(base_url=server.base_url, model="gemini-3-pro", api_key=KEY, **options)


async def stream_once(server: GeminiServer, *replies: Any, **request: Any) -> StreamResult:
    """One stream of the real adapter against `replies`, with a recording sink."""
    server.responder = t.scripted(*replies)
    async with provider(server) as gemini:
        return await gemini.stream(make_request(**request), RecordingSink())


def entry(call: FunctionCall, result: Any = "clear") -> ToolHistoryEntry:
    response = {"name": call.name, "response": {"result": result}}
    return ToolHistoryEntry(function_call=call, function_response=response)


class TestPartKinds:
    async def test_text_is_delivered_and_kept_as_one_joined_text_part(
        self, server: GeminiServer
    ) -> None:
        """Unsigned text chunks reach the sink as they come and join into one model part."""
        server.responder = t.scripted(t.plain_text())
        sink = RecordingSink()
        async with provider(server) as gemini:
            result = await gemini.stream(make_request(), sink)
        assert sink.delivered == ["Sunny ", "in Paris."]
        assert result.status is StreamStatus.COMPLETED
        assert result.accumulated_text == "Sunny in Paris."
        assert result.model_parts == ({"text": "Sunny in Paris."},)
        assert sink.progress_calls == 3

    async def test_thoughts_are_never_delivered_but_kept_as_parts_and_thought_log(
        self, server: GeminiServer
    ) -> None:
        """`thought: true` text is the thought log and a model part, never channel text."""
        server.responder = t.scripted(t.thinking_then_text())
        sink = RecordingSink()
        async with provider(server) as gemini:
            result = await gemini.stream(make_request(), sink)
        assert sink.delivered == ["Sunny."]
        assert result.thought_log == {"text": "The user wants the weather."}
        assert result.model_parts[0] == {"text": "The user wants ", "thought": True}

    async def test_a_signed_part_is_never_merged_with_another(self, server: GeminiServer) -> None:
        """Each signature stays on the part it came on, the empty signed last part included."""
        result = await stream_once(server, t.thinking_then_text())
        sig_a, sig_b = (
            json.loads(json.dumps(c))["candidates"][0]["content"]["parts"][0]
            for c in t.thinking_then_text()[1::2]
        )
        assert result.model_parts == (
            {"text": "The user wants ", "thought": True},
            sig_a,
            {"text": "Sunny."},
            sig_b,
        )
        assert sig_b == {"text": "", "thoughtSignature": sig_b["thoughtSignature"]}

    async def test_a_call_gets_a_made_id_and_carries_its_parts(self, server: GeminiServer) -> None:
        """Gemini gives no id: the adapter makes one; the call carries the turn's parts."""
        result = await stream_once(server, t.one_call())
        (call,) = result.batch
        assert result.status is StreamStatus.FUNCTION_CALL
        assert (call.name, call.args, call.call_id) == (
            "get_weather",
            {"city": "Paris"},
            "gemini-0-0",
        )
        assert call.passthrough["gemini"]["parts"] == list(result.model_parts)
        assert "thoughtSignature" in result.model_parts[-1]

    async def test_parallel_calls_are_one_batch_whose_parts_make_the_whole_turn(
        self, server: GeminiServer
    ) -> None:
        """Several functionCall parts: one batch in order, own ids, the parts split between them."""
        result = await stream_once(server, t.parallel_calls())
        first, second = result.batch
        assert [c.args for c in (first, second)] == [{"city": "Paris"}, {"city": "Rome"}]
        assert [c.call_id for c in (first, second)] == ["gemini-0-0", "gemini-0-1"]
        joined = [*first.passthrough["gemini"]["parts"], *second.passthrough["gemini"]["parts"]]
        assert joined == list(result.model_parts)
        assert "thoughtSignature" in first.passthrough["gemini"]["parts"][-1]
        assert "thoughtSignature" not in second.passthrough["gemini"]["parts"][-1]


class TestEnds:
    async def test_stop_after_a_call_is_a_function_call(self, server: GeminiServer) -> None:
        """A tool-call turn also ends with STOP."""
        result = await stream_once(server, t.one_call())
        assert result.status is StreamStatus.FUNCTION_CALL

    async def test_max_tokens_in_a_call_marks_it_truncated(self, server: GeminiServer) -> None:
        """MAX_TOKENS with a call: the last call's arguments may be cut (SPEC 6 step 4)."""
        reply = t.ended("MAX_TOKENS", t.call("get_weather", {"city": "Pa"}, signature=t.SIG_A))
        (call,) = (await stream_once(server, reply)).batch
        assert call.arguments_truncated

    async def test_max_tokens_in_text_completes(self, server: GeminiServer) -> None:
        """MAX_TOKENS in text: the text so far is the reply, as `length` is for OpenAI."""
        result = await stream_once(server, t.ended("MAX_TOKENS", t.text("Sunny and")))
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "Sunny and")

    @pytest.mark.parametrize(
        "reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"]
    )
    async def test_a_refusal_is_an_error_naming_its_reason(
        self, server: GeminiServer, reason: str
    ) -> None:
        """A reply Gemini stopped for its content is an `error` that names the reason."""
        result = await stream_once(server, t.ended(reason, t.text("Well")))
        assert result.status is StreamStatus.ERROR
        assert isinstance(result.data, StreamError)
        assert f"finishReason {reason}" in result.data.message
        assert result.accumulated_text == "Well"

    @pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
    async def test_a_bad_call_is_a_distinct_retryable_error(
        self, server: GeminiServer, reason: str
    ) -> None:
        """The model fumbled the call: its own error type, retryable (the chain goes on)."""
        result = await stream_once(server, t.ended(reason))
        assert isinstance(result.data, StreamError)
        assert (result.data.type, result.data.retryable) == (reason.lower(), True)

    async def test_a_blocked_prompt_is_an_error_naming_the_block_reason(
        self, server: GeminiServer
    ) -> None:
        """No candidates, `promptFeedback.blockReason`: an error that names it."""
        result = await stream_once(server, [t.blocked("PROHIBITED_CONTENT")])
        assert isinstance(result.data, StreamError)
        assert result.data.type == "prompt_blocked"
        assert "PROHIBITED_CONTENT" in result.data.message

    async def test_a_body_without_a_finish_reason_is_incomplete(self, server: GeminiServer) -> None:
        """The server broke the stream off: an `incomplete_stream` error, retryable."""
        result = await stream_once(server, [t.chunk(t.text("Sun"))])
        assert isinstance(result.data, StreamError)
        assert (result.data.type, result.data.retryable) == ("incomplete_stream", True)


class TestErrors:
    @pytest.mark.parametrize(
        ("code", "status", "retryable"),
        [
            (429, "RESOURCE_EXHAUSTED", True),
            (500, "INTERNAL", True),
            (503, "UNAVAILABLE", True),
            (400, "INVALID_ARGUMENT", False),
            (403, "PERMISSION_DENIED", False),
        ],
    )
    async def test_http_errors_say_whether_to_retry(
        self, server: GeminiServer, code: int, status: str, retryable: bool
    ) -> None:
        """429, 500 and 503 may pass on another try; 400 and 403 will not."""
        result = await stream_once(server, GeminiError(code, status, f"{status} for {KEY}"))
        assert isinstance(result.data, StreamError)
        assert (result.data.type, result.data.retryable) == ("http_status", retryable)
        assert f"HTTP {code}" in result.data.message and status in result.data.message
        assert KEY not in result.data.message

    async def test_the_key_rides_in_the_header_never_the_url_or_body(
        self, server: GeminiServer
    ) -> None:
        """`x-goog-api-key` carries it; the query is `alt=sse` and nothing else."""
        await stream_once(server, t.plain_text())
        (request,) = server.requests
        assert request.headers["x-goog-api-key"] == KEY
        assert request.query == "alt=sse"
        assert KEY not in json.dumps(request.body)
        assert request.model == "gemini-3-pro"

    async def test_a_wrong_key_is_refused_with_a_hint(self, server: GeminiServer) -> None:
        """403 from the server: not retryable, and the message says to check the key."""
        server.responder = t.scripted(t.plain_text())
        gemini = GeminiProvider(base_url=server.base_url, model="m", api_key="wrong-key")
        async with gemini:
            result = await gemini.stream(make_request(), RecordingSink())
        assert isinstance(result.data, StreamError)
        assert "is the API key right" in result.data.message and not result.data.retryable

    async def test_an_unknown_model_is_named_in_the_404(self, server: GeminiServer) -> None:
        """404: not retryable, and the message names the model it asked for."""
        result = await stream_once(server, GeminiError(404, "NOT_FOUND", "models/x is not found"))
        assert isinstance(result.data, StreamError) and not result.data.retryable
        assert "'gemini-3-pro'" in result.data.message

    def test_the_key_comes_from_gemini_api_key_by_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Neither `api_key` nor `api_key_env`: GEMINI_API_KEY, named when it is unset."""
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        with pytest.raises(ValueError, match="GEMINI_API_KEY"):
            GeminiProvider(model="m")
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        assert "api_key=set" in repr(GeminiProvider(model="m")) and KEY not in repr(
            GeminiProvider(model="m")
        )

    def test_extra_body_may_not_set_what_the_adapter_builds(self) -> None:
        """`contents`, `systemInstruction` and `tools` are refused, by name."""
        with pytest.raises(ValueError, match="contents"):
            GeminiProvider(model="m", api_key="", extra_body={"contents": []})

    async def test_a_malformed_chunk_is_an_error_naming_it(self, server: GeminiServer) -> None:
        """A data line that is not JSON ends the stream as `malformed_chunk`."""
        result = await stream_once(server, [b"data: {not json\r\n\r\n"])
        assert isinstance(result.data, StreamError)
        assert result.data.type == "malformed_chunk" and "chunk 1" in result.data.message

    async def test_an_error_inside_the_stream_is_reported(self, server: GeminiServer) -> None:
        """Gemini can send `{"error": ...}` mid-stream: a provider error with its message."""
        error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
        result = await stream_once(server, [t.chunk(t.text("Sun")), error])
        assert isinstance(result.data, StreamError)
        assert "overloaded" in result.data.message and result.data.retryable


class TestRequests:
    async def test_a_native_batch_is_replayed_byte_for_byte_and_answered_in_order(
        self, server: GeminiServer
    ) -> None:
        """The model turn is the parts as they came; then one response per call, in order."""
        first = await stream_once(server, t.parallel_calls())
        history = tuple(entry(c, c.args["city"]) for c in first.batch)
        await stream_once(server, t.plain_text(), history=history)
        contents = server.requests[-1].body["contents"]
        assert contents[-2] == {"role": "model", "parts": list(first.model_parts)}
        assert contents[-1] == {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": "Paris"}}},
                {"functionResponse": {"name": "get_weather", "response": {"result": "Rome"}}},
            ],
        }

    async def test_a_dropped_signature_is_refused_as_gemini_refuses_it(
        self, server: GeminiServer
    ) -> None:
        """The loopback validation: a call replayed without its signature is an HTTP 400."""
        first = await stream_once(server, t.one_call())
        (call,) = first.batch
        parts = [
            {k: v for k, v in part.items() if k != "thoughtSignature"}
            for part in call.passthrough["gemini"]["parts"]
        ]
        stripped = FunctionCall(
            name=call.name,
            args=call.args,
            call_id=call.call_id,
            passthrough={"gemini": {"turn": "0", "parts": parts}},
        )
        result = await stream_once(server, t.plain_text(), history=(entry(stripped),))
        assert isinstance(result.data, StreamError)
        assert "missing a thought_signature" in result.data.message
        assert not result.data.retryable

    async def test_a_call_gemini_did_not_make_carries_the_skip_signature(
        self, server: GeminiServer
    ) -> None:
        """History from another model: the call is rebuilt with the documented skip value."""
        foreign = FunctionCall(name="get_weather", args={"city": "Oslo"}, call_id="call_0")
        text_parts = ({"type": "text", "text": "Let me check."},)
        history = (
            ToolHistoryEntry(
                function_call=foreign,
                function_response={"name": "get_weather", "response": {"result": "rain"}},
                pre_tool_call_text_parts=text_parts,
            ),
        )
        result = await stream_once(server, t.plain_text(), history=history)
        assert result.status is StreamStatus.COMPLETED
        model_turn = server.requests[-1].body["contents"][-2]
        assert model_turn["parts"] == [
            {"text": "Let me check."},
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                "thoughtSignature": SKIP_SIGNATURE,
            },
        ]

    async def test_context_tools_and_directives_map_to_gemini_fields(
        self, server: GeminiServer
    ) -> None:
        """System items and tail directives are the system instruction; tools declared once."""
        await stream_once(server, t.plain_text(), context=BASE, tail_directives=("Be brief.",))
        body = server.requests[-1].body
        assert body["systemInstruction"] == {
            "parts": [{"text": "You are Tomo."}, {"text": "Be brief."}]
        }
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": "alice: Weather in Paris?"}]}
        ]
        (declarations,) = body["tools"]
        assert declarations["functionDeclarations"][0]["parametersJsonSchema"] == WEATHER.parameters


class TestTheLoop:
    async def test_three_iterations_carry_every_signature_on_its_own_part(self) -> None:
        """A call, a parallel batch, then text: each request replays every earlier part as sent."""
        replies = [t.one_call(), t.parallel_calls(), t.thinking_then_text()]
        with GeminiServer(t.scripted(*replies), api_key=KEY) as server:
            result, channel = await run_weather_turn(server)
        assert result.status is TurnStatus.COMPLETED, result.reason
        assert channel.text == "Checking both.Sunny."
        bodies = [request.body for request in server.requests]
        assert len(bodies) == 3
        model_turns = [c for c in bodies[2]["contents"] if c["role"] == "model"]
        sent = [
            [p for c in reply for p in c["candidates"][0]["content"]["parts"]] for reply in replies
        ]
        assert model_turns[0]["parts"] == [{"text": "Look it up.", "thought": True}, sent[0][1]]
        assert model_turns[1]["parts"] == sent[1]
        assert model_turns[:1] == [c for c in bodies[1]["contents"] if c["role"] == "model"]
        signatures = [
            p["thoughtSignature"]
            for m in model_turns
            for p in m["parts"]
            if "thoughtSignature" in p
        ]
        assert len(signatures) == 2
        answers = [c for c in bodies[2]["contents"] if c["role"] == "user"][1:]
        assert [len(a["parts"]) for a in answers] == [1, 2]

    async def test_a_silent_stream_ends_timeout_by_the_rolling_timer(self) -> None:
        """A stream that goes quiet after its first chunk is cancelled: status `timeout`."""
        with GeminiServer(t.scripted()) as server:

            def silent(body: dict[str, Any]) -> Iterator[JsonObject]:
                yield t.chunk(t.text("Sun"))
                server.stopping.wait(10)  # silent until the server stops

            server.responder = silent
            config = LoopConfig(
                stream_sdk_call_timeout_ms=300, stream_abandoned_settle_timeout_ms=0
            )
            result, channel = await run_weather_turn(server, config=config)
        assert result.stream_results[-1].status is StreamStatus.TIMEOUT
        assert channel.text == "Sun"

    async def test_a_kill_mid_stream_stops_the_turn_with_the_text_so_far(self) -> None:
        """`/kill` while Gemini streams cancels the stream at once: stopped, text kept."""
        control, channel = MemoryTurnControl(), RecordingChannel()
        with GeminiServer(t.scripted()) as server:

            def endless(body: dict[str, Any]) -> Iterator[JsonObject]:
                yield t.chunk(t.text("Sun"))
                server.stopping.wait(10)

            async def kill_after_first_text() -> None:
                while not channel.text:
                    await anyio.sleep(0.01)
                control.kill()

            server.responder = endless
            async with anyio.create_task_group() as group:
                group.start_soon(kill_after_first_text)
                result, _ = await run_weather_turn(server, control=control, channel=channel)
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert result.stream_results[-1].accumulated_text == "Sun"


async def run_weather_turn(
    server: GeminiServer,
    config: LoopConfig | None = None,
    control: MemoryTurnControl | None = None,
    channel: RecordingChannel | None = None,
) -> tuple[GenerationTurnResult, RecordingChannel]:
    """One turn of the loop on the Gemini adapter, with a weather tool that always answers."""
    registry = ToolRegistry()

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        return {"city": args["city"], "sky": "clear"}

    registry.register(get_weather, parameters=WEATHER.parameters)
    channel = channel or RecordingChannel()
    key = server.api_key or ""
    async with GeminiProvider(base_url=server.base_url, model="m", api_key=key) as gemini:
        result = await run_tool_loop(
            turn=TurnSettings(context=BASE, provider=gemini.descriptor),
            config=config or LoopConfig(),
            provider=gemini,
            registry=registry,
            channel=channel,
            control=control or MemoryTurnControl(),
        )
    return result, channel
