"""The OpenAI-compatible provider against the loopback server: every path of a stream."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import anyio
import pytest

from tests.openai_server import (
    DONE,
    OpenAIServer,
    Reply,
    Stall,
    chunk,
    error_reply,
    raw_reply,
    stream_reply,
    text_reply,
    tool_call_reply,
)
from tests.providers.conftest import RecordingSink, make_provider, make_request
from toolloop.effects.ports import StreamRequest
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states import FunctionCall, StreamError, StreamResult, StreamStatus
from toolloop.states.errors import InvalidOption

pytestmark = pytest.mark.anyio


async def run(
    server: OpenAIServer, *replies: Reply, request: StreamRequest | None = None, **options: Any
) -> tuple[StreamResult, RecordingSink]:
    """Script the replies, stream once and return the result and what the sink saw."""
    server.script(*replies)
    sink = RecordingSink()
    async with make_provider(server, **options) as provider:
        result = await provider.stream(request or make_request(), sink)
    return result, sink


def error_of(result: StreamResult) -> StreamError:
    assert result.status is StreamStatus.ERROR, result
    assert isinstance(result.data, StreamError)
    return result.data


def call_of(result: StreamResult) -> FunctionCall:
    assert result.status is StreamStatus.FUNCTION_CALL, result
    assert isinstance(result.data, FunctionCall)
    return result.data


class TestText:
    async def test_text_deltas_are_delivered_in_order_and_accumulated(
        self, server: OpenAIServer
    ) -> None:
        """Each content delta is delivered as it arrives and the result holds their sum."""
        result, sink = await run(server, text_reply("Hel", "lo, ", "world"))
        assert sink.delivered == ["Hel", "lo, ", "world"]
        assert result == StreamResult(
            status=StreamStatus.COMPLETED,
            accumulated_text="Hello, world",
            model_parts=({"type": "text", "text": "Hello, world"},),
        )

    async def test_progress_is_reported_on_each_delta_and_the_finish(
        self, server: OpenAIServer
    ) -> None:
        """Each delta and the finish restart the inactivity timer; the role chunk (no text) not."""
        _, sink = await run(server, text_reply("a", "b", "c"))
        assert sink.progress_calls == 4

    async def test_stop_with_nothing_at_all_is_empty_response(self, server: OpenAIServer) -> None:
        """A stream that finishes `stop` without text or call is `empty_response`."""
        result, _ = await run(server, text_reply())
        assert result == StreamResult(status=StreamStatus.EMPTY_RESPONSE)

    async def test_length_with_text_is_completed(self, server: OpenAIServer) -> None:
        """`finish_reason: length` after text keeps the text as a completed reply."""
        result, _ = await run(server, text_reply("cut sh", finish_reason="length"))
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "cut sh")

    async def test_unknown_finish_reason_with_text_is_completed(self, server: OpenAIServer) -> None:
        """A finish reason this adapter does not know (`eos`) ends the reply like `stop`."""
        result, _ = await run(server, text_reply("hi", finish_reason="eos"))
        assert result.status is StreamStatus.COMPLETED

    async def test_done_without_finish_reason_is_completed(self, server: OpenAIServer) -> None:
        """`[DONE]` alone ends a stream whose server never sends a finish reason."""
        result, _ = await run(server, text_reply("hi").without_finish_reason())
        assert result.status is StreamStatus.COMPLETED

    async def test_reasoning_deltas_become_the_thought_log(self, server: OpenAIServer) -> None:
        """`reasoning_content` and `reasoning` deltas are the thought log, never delivered."""
        reply = stream_reply(
            {"reasoning_content": "Think"}, {"reasoning": "ing."}, {"content": "Done."}
        )
        result, sink = await run(server, reply)
        assert sink.delivered == ["Done."]
        assert result.thought_log == {"text": "Thinking."}

    async def test_sse_comments_and_crlf_lines_are_understood(self, server: OpenAIServer) -> None:
        """Keep-alive comments are skipped and CRLF line ends decode like LF ones."""
        data = b"data: " + json.dumps(chunk({"content": "hi"})).encode()
        stop = b"data: " + json.dumps(chunk({}, "stop")).encode()
        reply = raw_reply(b": PROCESSING\r\n\r\n", data + b"\r\n\r\n", stop + b"\r\n\r\n", DONE)
        result, sink = await run(server, reply)
        assert (result.status, sink.delivered, sink.progress_calls) == (
            StreamStatus.COMPLETED,
            ["hi"],
            2,
        )

    async def test_an_event_split_over_data_lines_is_joined(self, server: OpenAIServer) -> None:
        """An SSE event whose JSON spans several `data:` lines is one chunk."""
        lines = json.dumps(chunk({"content": "joined"}), indent=1).splitlines()
        event = "".join(f"data: {line}\n" for line in lines).encode() + b"\n"
        result, _ = await run(server, raw_reply(event, chunk({}, "stop"), DONE))
        assert result.accumulated_text == "joined"


class TestToolCalls:
    async def test_fragments_are_assembled_by_index(self, server: OpenAIServer) -> None:
        """Arguments split over fragments come out as one call with its id and text."""
        reply = tool_call_reply("get_weather", {"city": "Paris", "days": 2}, text="Looking.")
        result, sink = await run(server, reply)
        assert sink.delivered == ["Looking."]
        assert result == StreamResult(
            status=StreamStatus.FUNCTION_CALL,
            accumulated_text="Looking.",
            model_parts=({"type": "text", "text": "Looking."},),
            data=FunctionCall(
                name="get_weather",
                args={"city": "Paris", "days": 2},
                passthrough={"id": "call_loopback_1"},
                call_id="call_loopback_1",
            ),
        )

    async def test_id_and_name_repeated_in_every_fragment_are_kept_once(
        self, server: OpenAIServer
    ) -> None:
        """llama-cpp-python's repeated id and name do not make `get_weatherget_weather`."""
        reply = tool_call_reply("get_weather", {"city": "Oslo"}, repeat_id_and_name=True)
        call = call_of((await run(server, reply))[0])
        assert (call.name, call.args, call.passthrough) == (
            "get_weather",
            {"city": "Oslo"},
            {"id": "call_loopback_1"},
        )

    async def test_passthrough_fields_are_kept_opaque(self, server: OpenAIServer) -> None:
        """Fragment extras and message extras (reasoning details) are kept for replay."""
        signature = {"extra_content": {"google": {"thought_signature": "c2ln"}}}
        reply = tool_call_reply("get_weather", {"city": "Rome"}, extra=signature)
        details = [{"type": "reasoning.encrypted", "data": "x"}]
        reply = Reply(
            frames=(reply.frames[0], chunk({"reasoning_details": details}), *reply.frames[1:])
        )
        call = call_of((await run(server, reply))[0])
        assert call.passthrough == {
            "id": "call_loopback_1",
            "tool_call": signature,
            "message": {"reasoning_details": details},
        }

    async def test_call_without_arguments_has_none(self, server: OpenAIServer) -> None:
        """A call whose arguments are empty has `args` None (the model sent none)."""
        call = call_of((await run(server, tool_call_reply("get_weather", "")))[0])
        assert (call.args, call.arguments_truncated) == (None, False)

    async def test_call_with_finish_reason_stop_is_still_a_call(self, server: OpenAIServer) -> None:
        """Servers that finish a tool call with `stop` (Ollama) still yield `function_call`."""
        reply = tool_call_reply("get_weather", {"city": "Lima"}, finish_reason="stop")
        assert call_of((await run(server, reply))[0]).args == {"city": "Lima"}

    async def test_every_parallel_call_is_assembled_in_index_order(
        self, server: OpenAIServer
    ) -> None:
        """Interleaved fragments of two indices give both calls, ids and arguments per index."""
        reply = stream_reply(
            {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "get_time"}}]},
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather"}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
            {"tool_calls": [{"index": 1, "function": {"arguments": '{"zone": "UTC"}'}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": '"Lima"}'}}]},
            finish_reason="tool_calls",
        )
        result = (await run(server, reply))[0]
        assert [(c.name, c.call_id, c.args) for c in result.calls] == [
            ("get_weather", "a", {"city": "Lima"}),
            ("get_time", "b", {"zone": "UTC"}),
        ]
        assert result.data == result.calls[0]

    async def test_a_length_finish_truncates_only_the_last_call(self, server: OpenAIServer) -> None:
        """Cut short on `length`: the call that arrived whole is whole, the last is truncated."""
        reply = stream_reply(
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]},
            {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g"}}]},
            {"tool_calls": [{"index": 1, "function": {"arguments": '{"x": 1, "y": "lo'}}]},
            finish_reason="length",
        )
        first, last = (await run(server, reply))[0].calls
        assert (first.args, first.arguments_truncated) == ({}, False)
        assert (last.args, last.arguments_truncated) == ({"x": 1}, True)

    async def test_a_call_without_an_id_gets_one_unique_to_it(self, server: OpenAIServer) -> None:
        """A server that sends no ids (llama.cpp may not) still gets one distinct id per call."""
        reply = stream_reply(
            {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]},
            {"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": "{}"}}]},
            finish_reason="tool_calls",
        )
        ids = [c.call_id for c in (await run(server, reply))[0].calls]
        assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2

    async def test_tool_calls_finish_without_a_call_is_an_error(self, server: OpenAIServer) -> None:
        """`finish_reason: tool_calls` with no call fragment is an error saying so."""
        error = error_of((await run(server, text_reply("hm", finish_reason="tool_calls")))[0])
        assert error.type == "missing_tool_call"
        assert "no tool call arrived" in error.message

    async def test_arguments_that_are_not_an_object_are_an_error(
        self, server: OpenAIServer
    ) -> None:
        """Arguments that are JSON but not an object are a retryable `malformed_tool_call`."""
        error = error_of((await run(server, tool_call_reply("get_weather", '["Paris"]')))[0])
        assert (error.type, error.retryable) == ("malformed_tool_call", True)


class TestTruncatedArguments:
    async def test_length_mid_arguments_keeps_the_whole_keys(self, server: OpenAIServer) -> None:
        """`finish_reason: length` mid-arguments is truncated, with the keys that arrived whole."""
        reply = tool_call_reply(
            "get_weather", '{"city": "Paris", "days": 1', finish_reason="length"
        )
        call = call_of((await run(server, reply))[0])
        assert (call.args, call.arguments_truncated) == ({"city": "Paris"}, True)

    async def test_incomplete_json_with_tool_calls_finish_is_truncated(
        self, server: OpenAIServer
    ) -> None:
        """Arguments that are not complete JSON are truncated even when the call 'finished'."""
        reply = tool_call_reply("get_weather", '{"city": "Pa')
        call = call_of((await run(server, reply))[0])
        assert (call.args, call.arguments_truncated) == ({}, True)

    async def test_length_before_any_argument_is_truncated(self, server: OpenAIServer) -> None:
        """A call cut by `length` before its arguments began is truncated with no keys."""
        reply = tool_call_reply("get_weather", "", finish_reason="length")
        call = call_of((await run(server, reply))[0])
        assert (call.args, call.arguments_truncated) == ({}, True)


class TestFinishReasons:
    async def test_content_filter_is_an_error_keeping_the_text(self, server: OpenAIServer) -> None:
        """`content_filter` is an error; the text delivered before it stays in the result."""
        result, _ = await run(server, text_reply("Once upon", finish_reason="content_filter"))
        assert (error_of(result).type, result.accumulated_text) == ("content_filter", "Once upon")


class TestHttpErrors:
    async def test_429_is_retryable_and_quotes_the_error_message(
        self, server: OpenAIServer
    ) -> None:
        """A rate limit is a retryable `http_status` error naming the status and the message."""
        error = error_of((await run(server, error_reply(429, "Rate limit reached")))[0])
        assert error.type == "http_status"
        assert error.retryable
        assert (
            error.message == f"HTTP 429 from {server.base_url}/chat/completions: Rate limit reached"
        )

    async def test_500_is_retryable(self, server: OpenAIServer) -> None:
        """A server error may pass on the next attempt."""
        assert error_of((await run(server, error_reply(503, "overloaded")))[0]).retryable

    async def test_400_is_not_retryable(self, server: OpenAIServer) -> None:
        """A client error (bad request, bad key) would fail again: not retryable."""
        error = error_of((await run(server, error_reply(400, "bad tools")))[0])
        assert (error.retryable, error.message.endswith("bad tools")) == (False, True)

    async def test_a_json_body_instead_of_a_stream_is_an_error(self, server: OpenAIServer) -> None:
        """A 200 with a JSON body (the server ignored `stream`) is an error saying so."""
        reply = Reply(frames=(b'{"choices": []}',), content_type="application/json")
        error = error_of((await run(server, reply))[0])
        assert error.type == "not_a_stream"
        assert "instead of an event stream" in error.message


class TestTransportErrors:
    async def test_connection_refused_is_a_retryable_connect_error(self) -> None:
        """Nobody listening on the port is a retryable ConnectError naming the URL."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with OpenAICompatProvider(
            base_url=f"http://127.0.0.1:{port}/v1", model="m"
        ) as provider:
            result = await provider.stream(make_request(), RecordingSink())
        error = error_of(result)
        assert (error.type, error.retryable) == ("ConnectError", True)
        assert f"127.0.0.1:{port}/v1/chat/completions: could not connect" in error.message

    async def test_mid_stream_disconnect_is_an_error_keeping_the_text(
        self, server: OpenAIServer
    ) -> None:
        """A connection dropped mid-body is a retryable broken-connection error."""
        result, _ = await run(server, text_reply("par", "tial", "!").disconnected_after(3))
        error = error_of(result)
        assert (error.type, error.retryable) == ("RemoteProtocolError", True)
        assert "the connection broke mid-stream" in error.message
        assert result.accumulated_text == "partial"

    async def test_closed_without_done_or_finish_reason_is_an_error(
        self, server: OpenAIServer
    ) -> None:
        """A clean end with neither `[DONE]` nor a finish reason is an error that says so."""
        reply = text_reply("half").without_finish_reason().without_done()
        error = error_of((await run(server, reply))[0])
        assert error == StreamError(
            type="incomplete_stream",
            message="the stream closed after 3 chunks without [DONE] or a finish reason",
        )

    async def test_closed_without_done_after_a_finish_reason_is_fine(
        self, server: OpenAIServer
    ) -> None:
        """A finish reason is enough: a server that omits `[DONE]` still completes."""
        result, _ = await run(server, text_reply("ok").without_done())
        assert result.status is StreamStatus.COMPLETED

    async def test_an_error_chunk_is_a_provider_error(self, server: OpenAIServer) -> None:
        """An `error` object inside the stream (OpenRouter) is an error quoting it."""
        failure = {"error": {"code": 502, "message": "upstream died"}}
        error = error_of((await run(server, raw_reply(chunk({"content": "a"}), failure)))[0])
        assert error == StreamError(
            type="provider_error",
            message="chunk 2: the provider reported an error: upstream died",
        )


async def run_many(server: OpenAIServer, *replies: Reply) -> list[StreamResult]:
    """Script the replies and stream once per reply on one provider, so on one pool."""
    server.script(*replies)
    async with make_provider(server) as provider:
        return [await provider.stream(make_request(), RecordingSink()) for _ in replies]


class TestConnections:
    async def test_a_clean_stream_leaves_its_connection_for_the_next_request(
        self, server: OpenAIServer
    ) -> None:
        """Two clean streams in a row share one kept-alive connection."""
        results = await run_many(server, text_reply("one"), text_reply("two"))
        assert [r.accumulated_text for r in results] == ["one", "two"]
        assert server.requests[0].client_port == server.requests[1].client_port

    async def test_a_stream_the_server_cut_off_never_lends_its_connection(
        self, server: OpenAIServer
    ) -> None:
        """After a body with neither `[DONE]` nor a finish reason, the next request connects anew.

        llama-cpp-python closes such a connection a moment after the body ends;
        a request sent on it in that moment is lost (see tests/servers).
        """
        cut = text_reply("half").without_finish_reason().without_done()
        results = await run_many(server, cut, text_reply("whole"))
        assert [r.status for r in results] == [StreamStatus.ERROR, StreamStatus.COMPLETED]
        assert server.requests[0].client_port != server.requests[1].client_port

    async def test_a_body_held_open_after_done_still_completes(self, server: OpenAIServer) -> None:
        """`[DONE]` ends the reply even when the server never ends the body; its connection goes."""
        held = raw_reply(chunk({"content": "ok"}), chunk({}, "stop"), DONE, Stall())
        results = await run_many(server, held, text_reply("next"))
        assert [r.accumulated_text for r in results] == ["ok", "next"]
        assert await anyio.to_thread.run_sync(server.requests[0].client_left.wait, 10)
        assert server.requests[0].client_port != server.requests[1].client_port

    async def test_a_request_lost_on_a_dead_pooled_connection_is_sent_once_more(
        self, server: OpenAIServer
    ) -> None:
        """A pooled connection that dies under the request, before any answer: resent, fresh."""
        results = await run_many(server, text_reply("one").then_hang_up(), text_reply("two"))
        assert [r.accumulated_text for r in results] == ["one", "two"]
        ports = [request.client_port for request in server.requests]
        assert ports[0] == ports[1] != ports[2]
        assert server.requests[1].body == server.requests[2].body


MALFORMED = [
    (
        b"data: {not json\n\n",
        "malformed chunk 2: the data is not valid JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1): '{not json'",
    ),
    (b"data: [1, 2]\n\n", "malformed chunk 2: `chunk` must be an object, got list [1, 2]"),
    (b'data: {"id": "x"}\n\n', "malformed chunk 2: `choices` must be a list, got NoneType None"),
    (
        b'data: {"choices": [{"delta": {"content": 7}}]}\n\n',
        "malformed chunk 2: `choices[0].delta.content` must be a string, got int 7",
    ),
    (
        b'data: {"choices": [{"delta": {"tool_calls": {"index": 0}}}]}\n\n',
        "malformed chunk 2: `choices[0].delta.tool_calls` must be a list, got dict {'index': 0}",
    ),
    (
        b'data: {"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}\n\n',
        "malformed chunk 2: `choices[0].delta.tool_calls[0].index` must be an integer, got str '0'",
    ),
    (
        b'data: {"choices": [{"delta": {}, "finish_reason": 1}]}\n\n',
        "malformed chunk 2: `choices[0].finish_reason` must be a string, got int 1",
    ),
]


class TestMalformed:
    @pytest.mark.parametrize(("line", "message"), MALFORMED)
    async def test_a_malformed_chunk_is_an_error_naming_it_and_its_number(
        self, server: OpenAIServer, line: bytes, message: str
    ) -> None:
        """Bad JSON or a wrong shape is a `malformed_chunk` error, never an exception."""
        reply = raw_reply(chunk({"content": "ok"}), line, DONE)
        result, _ = await run(server, reply)
        assert error_of(result) == StreamError(type="malformed_chunk", message=message)
        assert result.accumulated_text == "ok"

    async def test_a_body_that_is_not_utf8_is_an_error(self, server: OpenAIServer) -> None:
        """Bytes that do not decode as UTF-8 are a malformed stream, not an exception."""
        result, _ = await run(server, raw_reply(chunk({"content": "ok"}), b"data: \xff\n\n"))
        assert (
            error_of(result).message == "the body is not UTF-8 after chunk 0 (invalid start byte)"
        )


class TestCancellation:
    async def test_cancelling_a_stalled_stream_closes_the_connection(
        self, server: OpenAIServer
    ) -> None:
        """Cancelling the call mid-stream closes the HTTP connection: the server sees it."""
        server.script(text_reply("first", "never").stalled_after(2))
        sink = RecordingSink()
        async with make_provider(server) as provider, anyio.create_task_group() as tasks:
            tasks.start_soon(provider.stream, make_request(), sink)
            await sink.first_text.wait()
            tasks.cancel_scope.cancel()
        assert await anyio.to_thread.run_sync(server.requests[0].client_left.wait, 10)
        assert sink.delivered == ["first"]

    async def test_cancelling_a_slow_stream_closes_the_connection(
        self, server: OpenAIServer
    ) -> None:
        """A stream still sending slowly is cut off by cancellation, not read to its end."""
        server.script(text_reply(*"abcdefghij").with_delay(0.05))
        sink = RecordingSink()
        async with make_provider(server) as provider, anyio.create_task_group() as tasks:
            tasks.start_soon(provider.stream, make_request(), sink)
            await sink.first_text.wait()
            tasks.cancel_scope.cancel()
        assert await anyio.to_thread.run_sync(server.requests[0].client_left.wait, 10)


class TestVerbatim:
    async def test_a_call_in_text_ends_the_stream_as_a_function_call(
        self, server: OpenAIServer
    ) -> None:
        """With verbatim on, a call written as text is the call; only the prose is delivered."""
        reply = text_reply("Let me check. ", '`get_weather({"city": ', '"Paris"})`', " Done.")
        result, sink = await run(server, reply, request=make_request(verbatim=True))
        assert "".join(sink.delivered) == "Let me check.  Done."
        call = call_of(result)
        assert (call.name, call.args, call.call_id.startswith("call_")) == (
            "get_weather",
            {"city": "Paris"},
            True,
        )
        assert (result.status, result.accumulated_text) == (
            StreamStatus.FUNCTION_CALL,
            "Let me check.  Done.",
        )

    async def test_every_verbatim_call_of_a_stream_is_handed_over_in_order(
        self, server: OpenAIServer
    ) -> None:
        """Two calls written in one reply are one batch, in the order written (SPEC 6b)."""
        reply = text_reply('get_weather({"city": "Oslo"}) and ', 'get_weather("Rome")')
        result = (await run(server, reply, request=make_request(verbatim=True)))[0]
        assert [(c.name, c.args) for c in result.calls] == [
            ("get_weather", {"city": "Oslo"}),
            ("get_weather", {"city": "Rome"}),
        ]
        assert len({c.call_id for c in result.calls}) == 2

    async def test_a_call_completed_at_the_end_is_found_on_flush(
        self, server: OpenAIServer
    ) -> None:
        """A call that ends the stream comes out of the parser's flush."""
        reply = text_reply('get_weather("Rome")')
        call = call_of((await run(server, reply, request=make_request(verbatim=True)))[0])
        assert (call.name, call.args) == ("get_weather", {"city": "Rome"})

    async def test_verbatim_off_delivers_call_text_as_prose(self, server: OpenAIServer) -> None:
        """Without verbatim, call-shaped text is just text."""
        text = '`get_weather({"city": "Paris"})`'
        result, sink = await run(server, text_reply(text))
        assert (result.status, "".join(sink.delivered)) == (StreamStatus.COMPLETED, text)

    async def test_the_request_caps_the_text_the_parser_holds(self, server: OpenAIServer) -> None:
        """A call longer than the request's cap is delivered as text; one that fits is a call."""
        text = 'get_weather({"city": "Paris"})'
        over = make_request(verbatim=True, verbatim_cap=len(text) - 1)
        result, sink = await run(server, text_reply(text), request=over)
        assert (result.status, "".join(sink.delivered)) == (StreamStatus.COMPLETED, text)
        fits = make_request(verbatim=True, verbatim_cap=len(text))
        call = call_of((await run(server, text_reply(text), request=fits))[0])
        assert (call.name, call.args) == ("get_weather", {"city": "Paris"})

    async def test_a_request_cap_below_one_is_refused_before_anything_is_sent(
        self, server: OpenAIServer
    ) -> None:
        """A verbatim request whose cap is 0 is an `InvalidOption` naming it; no request leaves."""
        request = make_request(verbatim=True, verbatim_cap=0)
        with pytest.raises(InvalidOption, match=r"^max_buffer_chars must be >= 1 \(got 0\)$"):
            await run(server, text_reply("never sent"), request=request)
        assert server.requests == []

    def test_the_provider_takes_no_cap_of_its_own(self, server: OpenAIServer) -> None:
        """The old constructor argument is refused, never kept beside the request's cap."""
        with pytest.raises(TypeError, match="verbatim_tool_call_max_buffer_chars"):
            make_provider(server, verbatim_tool_call_max_buffer_chars=64)

    async def test_rejected_call_text_is_delivered(self, server: OpenAIServer) -> None:
        """Call-shaped text the parser refuses (unknown tool) reaches the channel whole."""
        text = 'get_time({"zone": "UTC"}) is not a tool'
        result, sink = await run(server, text_reply(text), request=make_request(verbatim=True))
        assert (result.accumulated_text, "".join(sink.delivered)) == (text, text)


class TestSecrets:
    async def test_the_api_key_is_sent_as_a_bearer_token(self, server: OpenAIServer) -> None:
        """The key reaches the server in the Authorization header, with the extra headers."""
        await run(server, text_reply("hi"), api_key="sk-secret", headers={"X-Title": "bot"})
        headers = server.requests[0].headers
        assert (headers["Authorization"], headers["X-Title"]) == ("Bearer sk-secret", "bot")

    async def test_the_api_key_is_not_in_the_repr(self, server: OpenAIServer) -> None:
        """The repr says whether a key is set, never what it is."""
        async with make_provider(server, api_key="sk-secret") as provider:
            assert "sk-secret" not in repr(provider)
            assert "api_key=set" in repr(provider)

    async def test_the_api_key_is_not_logged(
        self, server: OpenAIServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Nothing logged while streaming (httpx and httpcore at DEBUG included) shows the key."""
        caplog.set_level(logging.DEBUG)
        await run(server, text_reply("hi"), error_reply(401, "bad"), api_key="sk-secret")
        await run(server, error_reply(401, "bad"), api_key="sk-secret")
        assert caplog.records
        assert "sk-secret" not in caplog.text

    async def test_an_echoed_api_key_is_masked_in_errors(self, server: OpenAIServer) -> None:
        """A server that echoes the key in its error does not leak it into the result."""
        error = error_of(
            (
                await run(
                    server, error_reply(401, "Incorrect API key sk-secret"), api_key="sk-secret"
                )
            )[0]
        )
        assert error.message.endswith(
            "Incorrect API key *** (is the API key right, and allowed to use this model?)"
        )

    async def test_the_api_key_is_read_from_the_named_variable(
        self, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`api_key_env` names the environment variable the key is read from."""
        monkeypatch.setenv("LOOPBACK_KEY", "sk-from-env")
        await run(server, text_reply("hi"), api_key_env="LOOPBACK_KEY")
        assert server.requests[0].headers["Authorization"] == "Bearer sk-from-env"

    async def test_a_missing_key_variable_is_refused_by_name(
        self, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An unset key variable is a ValueError naming the variable."""
        monkeypatch.delenv("LOOPBACK_KEY", raising=False)
        with pytest.raises(
            ValueError, match=r"^environment variable LOOPBACK_KEY \(the API key\) is not set$"
        ):
            make_provider(server, api_key_env="LOOPBACK_KEY")
