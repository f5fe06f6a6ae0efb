"""What a careless user or a hostile server sends, against the loopback server (issue 12).

Each class is one kind of input that once broke the adapter: a key that leaked
into an error, JSON nested deep enough to raise `RecursionError`, NaN in tool
arguments, a stream held open after its finish reason, and SSE framing the
spec allows (CR line ends, empty events) or an HTTP redirect.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.openai_server import (
    DONE,
    OpenAIServer,
    Reply,
    chunk,
    error_reply,
    raw_reply,
    stream_reply,
    text_reply,
    tool_call_reply,
)
from tests.providers.conftest import RecordingSink, make_provider, make_request
from toolloop.effects.providers.openai_compat import EXCERPT_CHARS, MIN_KEY_PREFIX
from toolloop.states import StreamError, StreamResult, StreamStatus

pytestmark = pytest.mark.anyio

KEY = "sk-canary-0123456789abcdef"


async def run(
    server: OpenAIServer, *replies: Reply, **options: Any
) -> tuple[StreamResult, RecordingSink]:
    """Script the replies, stream once and return the result and what the sink saw."""
    server.script(*replies)
    sink = RecordingSink()
    async with make_provider(server, **options) as provider:
        result = await provider.stream(make_request(), sink)
    return result, sink


def error_of(result: StreamResult) -> StreamError:
    assert result.status is StreamStatus.ERROR, result
    assert isinstance(result.data, StreamError)
    return result.data


def nested(depth: int) -> str:
    """A JSON array nested `depth` levels deep."""
    return "[" * depth + "]" * depth


class TestApiKey:
    async def test_a_key_with_surrounding_whitespace_is_sent_stripped(
        self, server: OpenAIServer
    ) -> None:
        """A key read from a file (trailing newline) works: whitespace is never part of a key."""
        result, _ = await run(server, text_reply("hi"), api_key=f" {KEY}\n")
        assert result.status is StreamStatus.COMPLETED
        assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"

    @pytest.mark.parametrize("bad", ["\n", "\x00", "\x7f", "é"])
    async def test_a_key_a_header_cannot_carry_is_refused_without_quoting_it(
        self, server: OpenAIServer, bad: str
    ) -> None:
        """A control or non-ASCII character is refused by its position, the key unquoted."""
        with pytest.raises(
            ValueError, match=r"^the API key has a character .* position 9 "
        ) as caught:
            make_provider(server, api_key=KEY[:9] + bad + KEY[9:])
        assert KEY[:MIN_KEY_PREFIX] not in str(caught.value)
        assert KEY[9:] not in str(caught.value)

    async def test_a_key_from_the_environment_is_checked_the_same_way(
        self, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The refusal names the variable the bad key came from, and not the key."""
        monkeypatch.setenv("LOOPBACK_KEY", KEY + "\x1b[0m")
        with pytest.raises(ValueError, match=r"^the API key in environment variable LOOPBACK_KEY"):
            make_provider(server, api_key_env="LOOPBACK_KEY")

    async def test_a_header_value_a_header_cannot_carry_is_refused_by_name(
        self, server: OpenAIServer
    ) -> None:
        """An extra header (Azure's `api-key`) is checked too, named and never quoted."""
        with pytest.raises(ValueError, match=r"^header 'api-key' has a character") as caught:
            make_provider(server, headers={"api-key": KEY + "\r\nX-Injected: 1"})
        assert KEY[:MIN_KEY_PREFIX] not in str(caught.value)


def echoing(path: str, text: str) -> Reply:
    """A reply that echoes `text` where `path` says a server might."""
    if path == "http_error":
        return error_reply(401, text)
    if path == "plain_error_body":
        return Reply(status=502, content_type="text/plain", frames=(text.encode(),))
    if path == "error_chunk":
        return raw_reply(chunk({"content": "ok"}), {"error": {"message": text}})
    return raw_reply(chunk({"content": "ok"}), {"choices": [{"delta": {"content": [text]}}]})


ECHO_PATHS = ["http_error", "plain_error_body", "error_chunk", "malformed_chunk"]


class TestEchoedKey:
    @pytest.mark.parametrize("path", ECHO_PATHS)
    @pytest.mark.parametrize("cut", range(0, len(KEY) + 2, 3))
    async def test_a_key_cut_by_the_excerpt_leaves_no_prefix_of_it(
        self, server: OpenAIServer, path: str, cut: int
    ) -> None:
        """Wherever the excerpt's cut falls in an echoed key, no 4-character prefix survives."""
        text = "x" * (EXCERPT_CHARS - cut) + KEY + " rest of the message"
        result, _ = await run(server, echoing(path, text), api_key=KEY)
        message = error_of(result).message
        assert not [n for n in range(MIN_KEY_PREFIX, len(KEY) + 1) if KEY[:n] in message], message

    @pytest.mark.parametrize("path", ECHO_PATHS)
    async def test_a_whole_echoed_key_is_masked(self, server: OpenAIServer, path: str) -> None:
        """A key echoed whole inside the excerpt is replaced by the mask."""
        result, _ = await run(server, echoing(path, f"bad key {KEY}."), api_key=KEY)
        message = error_of(result).message
        assert KEY not in message and "bad key ***." in message


class TestDeepJson:
    @pytest.mark.parametrize("depth", [101, 5_000])
    async def test_a_deep_chunk_is_a_malformed_chunk(
        self, server: OpenAIServer, depth: int
    ) -> None:
        """A chunk nested deeper than the JSON policy allows is refused; earlier text is kept."""
        deep = b'data: {"choices": [], "x": ' + nested(depth).encode() + b"}\n\n"
        result, sink = await run(server, raw_reply(chunk({"content": "ok"}), deep, DONE))
        error = error_of(result)
        assert error.type == "malformed_chunk"
        assert error.message.startswith("malformed chunk 2: the data nests deeper than 100 levels")
        assert (result.accumulated_text, sink.delivered) == ("ok", ["ok"])

    async def test_a_chunk_just_within_the_depth_bound_is_read(self, server: OpenAIServer) -> None:
        """100 levels (the chunk itself is one) are allowed, and so are brackets in text."""
        fine = {"choices": [], "x": json.loads(nested(99))}
        result, _ = await run(
            server, raw_reply(fine, chunk({"content": "[" * 500}), chunk({}, "stop"), DONE)
        )
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "[" * 500)

    @pytest.mark.parametrize("depth", [100, 5_000])
    async def test_deep_tool_arguments_are_a_malformed_call(
        self, server: OpenAIServer, depth: int
    ) -> None:
        """Arguments nested past the bound are refused by name, never handed to a tool."""
        arguments = '{"city": ' + nested(depth) + "}"
        result, _ = await run(server, tool_call_reply("get_weather", arguments))
        assert error_of(result) == StreamError(
            type="malformed_tool_call",
            message="tool call 'get_weather' arguments: nests deeper than 100 levels",
        )

    async def test_deep_arguments_cut_short_are_a_malformed_call(
        self, server: OpenAIServer
    ) -> None:
        """A truncated call with a too-deep value is refused like a whole one, not recovered."""
        arguments = '{"city": "Paris", "deep": ' + nested(5_000)[:5_010]
        result, _ = await run(
            server, tool_call_reply("get_weather", arguments, finish_reason="length")
        )
        assert error_of(result).message.endswith("arguments: nests deeper than 100 levels")

    async def test_a_deep_error_body_is_quoted_not_parsed(self, server: OpenAIServer) -> None:
        """An HTTP error whose JSON body nests thousands deep is an HTTP error with an excerpt."""
        body = ('{"error": ' + nested(5_000) + "}").encode()
        reply = Reply(status=500, content_type="application/json", frames=(body,))
        error = error_of((await run(server, reply))[0])
        assert (error.type, error.retryable) == ("http_status", True)
        assert error.message.endswith(": " + '{"error": ' + "[" * (EXCERPT_CHARS - 10) + "...")


class TestNonFiniteNumbers:
    @pytest.mark.parametrize(
        ("value", "named"),
        [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "$.days")],
    )
    async def test_non_finite_arguments_are_a_malformed_call(
        self, server: OpenAIServer, value: str, named: str
    ) -> None:
        """NaN, Infinity and overflowing numbers are refused by name (the value or its path)."""
        arguments = '{"city": "Paris", "days": ' + value + "}"
        result, _ = await run(server, tool_call_reply("get_weather", arguments))
        error = error_of(result)
        assert error.type == "malformed_tool_call"
        assert error.message.startswith("tool call 'get_weather' arguments: ")
        assert f" {named} " in error.message

    async def test_nan_in_arguments_cut_short_is_a_malformed_call(
        self, server: OpenAIServer
    ) -> None:
        """A truncated call with NaN in it is refused like a whole one, not recovered."""
        arguments = '{"city": "Paris", "days": NaN, "unit": "C'
        result, _ = await run(
            server, tool_call_reply("get_weather", arguments, finish_reason="length")
        )
        message = error_of(result).message
        assert message.startswith("tool call 'get_weather' arguments: ") and " NaN " in message

    async def test_nan_in_a_chunk_is_a_malformed_chunk(self, server: OpenAIServer) -> None:
        """A chunk carrying NaN anywhere is not JSON: refused, naming why."""
        reply = raw_reply(
            chunk({"content": "ok"}), b'data: {"choices": [], "usage": NaN}\n\n', DONE
        )
        message = error_of((await run(server, reply))[0]).message
        assert message.startswith(
            "malformed chunk 2: the data is not valid JSON: NaN (not a JSON number)"
        )


class TestEndOfStream:
    async def test_a_stream_held_open_after_its_finish_reason_completes(
        self, server: OpenAIServer
    ) -> None:
        """A server that sends `finish_reason` and then nothing (no [DONE], no end) still completes.

        The connection is dropped (the server sees the client leave), since its body never ended.
        """
        reply = text_reply("All ", "done.").stalled_after(4)  # role, two deltas, finish
        result, _ = await run(server, reply)
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "All done.")
        assert await anyio.to_thread.run_sync(server.requests[0].client_left.wait, 10)

    async def test_a_call_held_open_after_its_finish_reason_is_the_call(
        self, server: OpenAIServer
    ) -> None:
        """The same for a tool call: `finish_reason: tool_calls` ends it."""
        reply = tool_call_reply("get_weather", {"city": "Paris"}).stalled_after(5)
        result, _ = await run(server, reply)
        assert result.status is StreamStatus.FUNCTION_CALL

    @pytest.mark.parametrize("frames", [4, 5], ids=["after-finish", "after-done"])
    async def test_a_connection_broken_after_the_reply_keeps_the_reply(
        self, server: OpenAIServer, frames: int
    ) -> None:
        """A body broken off after the finish reason or `[DONE]` loses its connection only."""
        reply = text_reply("All ", "done.").disconnected_after(frames)
        result, _ = await run(server, reply)
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "All done.")

    async def test_events_after_the_finish_reason_are_not_delivered(
        self, server: OpenAIServer
    ) -> None:
        """The finish reason ends the choice: a delta after it is drained, never delivered."""
        reply = raw_reply(chunk({"content": "hi"}, "stop"), chunk({"content": " again"}), DONE)
        result, sink = await run(server, reply)
        assert (result.accumulated_text, sink.delivered) == ("hi", ["hi"])


class TestSseFraming:
    @pytest.mark.parametrize("end", [b"\r", b"\n", b"\r\n"], ids=["CR", "LF", "CRLF"])
    async def test_every_line_end_sse_allows_is_understood(
        self, server: OpenAIServer, end: bytes
    ) -> None:
        """CR, LF and CRLF line ends decode alike, with comments and multi-line data."""
        lines = json.dumps(chunk({"content": "hi"}), indent=1).splitlines()
        event = b"".join(b"data: " + line.encode() + end for line in lines) + end
        stop = b"data: " + json.dumps(chunk({}, "stop")).encode() + end + end
        body = b": keep-alive" + end + end + event + stop + b"data: [DONE]" + end + end
        result, sink = await run(server, raw_reply(body))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["hi"])

    async def test_cr_and_lf_in_separate_writes_are_one_line_end(
        self, server: OpenAIServer
    ) -> None:
        """A CRLF whose CR ends one network write and LF starts the next is not a blank line."""
        data = b"data: " + json.dumps(chunk({"content": "hi"})).encode()
        reply = raw_reply(data + b"\r", b"\ndata: " + b'{"more": 1}' + b"\r\n\r\n", DONE)
        result, _ = await run(server, reply.with_delay(0.05))
        # One event of two data lines: not JSON as a whole. Had the CR/LF counted twice, the
        # first line would have been an event of its own, and "hi" delivered.
        assert error_of(result).message.startswith("malformed chunk 1: the data is not valid JSON")

    async def test_empty_data_events_are_skipped(self, server: OpenAIServer) -> None:
        """`data:` and `data: ` with nothing after them are not chunks (SSE dispatches nothing)."""
        reply = stream_reply({"content": "hi"})
        reply = raw_reply(b"data:\n\n", b"data: \n\n", *reply.frames)
        result, sink = await run(server, reply)
        assert (result.status, sink.delivered, sink.progress_calls) == (
            StreamStatus.COMPLETED,
            ["hi"],
            2,  # the text and the finish
        )

    async def test_a_redirect_is_an_http_error_naming_where_it_points(
        self, server: OpenAIServer
    ) -> None:
        """A 3xx is not a stream cut short: it is a non-retryable error with its Location."""
        reply = Reply(status=307, headers={"Location": "https://api.example.com/v1/chat"})
        error = error_of((await run(server, reply))[0])
        assert error == StreamError(
            type="http_status",
            message=(
                f"HTTP 307 from {server.base_url}/chat/completions: redirected to "
                "https://api.example.com/v1/chat (redirects are not followed: set base_url to "
                "where the endpoint is)"
            ),
            retryable=False,
        )
