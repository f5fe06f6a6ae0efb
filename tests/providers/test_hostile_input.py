"""What a careless user or a hostile server sends, against the loopback server (issues 12, 20).

Each class is one kind of input that once broke the adapter: a key that leaked
into an error, JSON nested deep enough to raise `RecursionError`, NaN in tool
arguments, a stream held open after its finish reason, SSE framing the spec
allows (CR line ends, empty events, a byte order mark) or an HTTP redirect;
events that carry nothing yet kept a turn alive, an event or a field streamed
in so many pieces that joining them cost the square of their size, a
compressed body that expands a thousandfold, a page that is not a stream,
and lone surrogates in text and in verbatim calls.
"""

from __future__ import annotations

import json
import zlib
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
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.providers.credentials import EXCERPT_CHARS, MIN_KEY_PREFIX
from toolloop.effects.providers.sse import MAX_EVENT_CHARS, MAX_EXPANSION
from toolloop.effects.registry import ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import (
    ContextItem,
    LoopConfig,
    StreamError,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio

KEY = "sk-canary-0123456789abcdef"


async def run(
    server: OpenAIServer, *replies: Reply, verbatim: bool = False, **options: Any
) -> tuple[StreamResult, RecordingSink]:
    """Script the replies, stream once and return the result and what the sink saw."""
    server.script(*replies)
    sink = RecordingSink()
    async with make_provider(server, **options) as provider:
        result = await provider.stream(make_request(verbatim=verbatim), sink)
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


class TestProgress:
    async def test_events_that_carry_nothing_are_not_progress(self, server: OpenAIServer) -> None:
        """Empty choices, an empty delta, empty content or reasoning, the role: no progress."""
        empty = [{"choices": []}, chunk({}), chunk({"content": ""}), chunk({"reasoning": ""})]
        role = chunk({"role": "assistant", "content": ""})
        reply = raw_reply(role, *empty * 3, chunk({"content": "hi"}), chunk({}, "stop"), DONE)
        result, sink = await run(server, reply)
        assert (result.status, sink.progress_calls) == (StreamStatus.COMPLETED, 2)

    async def test_reasoning_a_new_call_and_arguments_are_progress(
        self, server: OpenAIServer
    ) -> None:
        """Reasoning, a call's first fragment and a piece of arguments are; a fragment that only
        repeats the call's id and name (llama-cpp-python) is not."""
        named = {"index": 0, "id": "call_1", "function": {"name": "get_weather"}}
        with_arguments = {**named, "function": {"name": "get_weather", "arguments": "{}"}}
        reply = raw_reply(
            chunk({"reasoning_content": "Hm."}),
            chunk({"tool_calls": [named]}),
            chunk({"tool_calls": [named]}),
            chunk({"tool_calls": [with_arguments]}),
            chunk({}, "tool_calls"),
            DONE,
        )
        result, sink = await run(server, reply)
        assert (result.status, sink.progress_calls) == (StreamStatus.FUNCTION_CALL, 4)

    async def test_a_server_trickling_empty_events_times_out(self, server: OpenAIServer) -> None:
        """`{"choices": []}` every 0.1 s for 4 s cannot keep a turn past its 1 s inactivity
        timeout: the attempt times out and the text after the trickle is never shown."""
        trickle = [{"choices": []}] * 40
        reply = raw_reply(*trickle, chunk({"content": "late"}), chunk({}, "stop"), DONE)
        server.script(reply.with_delay(0.1))
        channel = RecordingChannel()
        config = LoopConfig(stream_sdk_call_timeout_ms=1_000, stream_abandoned_settle_timeout_ms=0)
        async with make_provider(server) as provider:
            result = await run_generation_turn(
                turn=TurnSettings(context=(ContextItem(author="alice", content="Hi?"),)),
                attempts=(Attempt(provider=provider, config=config),),
                registry=ToolRegistry(),
                channel=channel,
                control=MemoryTurnControl(),
            )
        assert result.status is TurnStatus.TIMEOUT
        assert "late" not in channel.texts


def compressed(body: bytes, wbits: int) -> list[bytes]:
    """`body` compressed (gzip: 31, zlib-wrapped deflate: 15, raw: -15), flushed line by line."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    lines = body.splitlines(keepends=True)
    flushed = [compressor.compress(line) + compressor.flush(zlib.Z_SYNC_FLUSH) for line in lines]
    return [*flushed, compressor.flush()]


def sse_body(*frames: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(frame).encode() + b"\n\n" for frame in frames) + DONE


HELLO = sse_body(chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk({}, "stop"))


class TestCompressedBody:
    @pytest.mark.parametrize(
        ("header", "wbits"), [("gzip", 31), ("x-gzip", 31), ("deflate", 15), ("deflate", -15)]
    )
    async def test_a_compressed_stream_is_decoded_as_it_streams(
        self, server: OpenAIServer, header: str, wbits: int
    ) -> None:
        """gzip and deflate (zlib-wrapped or raw) bodies stream their text; the request asks for
        those two codings only, since the adapter decodes them itself."""
        reply = Reply(frames=tuple(compressed(HELLO, wbits)), headers={"Content-Encoding": header})
        result, sink = await run(server, reply.with_delay(0.01))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])
        assert server.requests[0].headers["Accept-Encoding"] == "gzip, deflate"

    async def test_the_codings_asked_for_are_only_those_decoded(self, server: OpenAIServer) -> None:
        """An extra `Accept-Encoding` header (brotli) cannot ask for what is not decoded."""
        await run(server, text_reply("hi"), headers={"Accept-Encoding": "br"})
        assert server.requests[0].headers["Accept-Encoding"] == "gzip, deflate"

    async def test_several_gzip_members_are_one_body(self, server: OpenAIServer) -> None:
        """A gzip body may be several members back to back (RFC 1952): each is decoded."""
        members = [zlib.compress(part, wbits=31) for part in HELLO.split(b"\n\n", 1)]
        members[0] += zlib.compress(b"\n\n", wbits=31)
        reply = Reply(frames=tuple(members), headers={"Content-Encoding": "gzip"})
        result, sink = await run(server, reply)
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])

    async def test_a_body_that_expands_too_far_is_refused(self, server: OpenAIServer) -> None:
        """16 KiB of gzip that would be 16 MiB of newlines: refused once it passes the bound,
        with the text before it kept."""
        newlines = zlib.compress(
            b"data: " + json.dumps(chunk({"content": "hi"})).encode() + b"\n" * (16 << 20),
            level=9,
            wbits=31,
        )
        reply = Reply(frames=(newlines,), headers={"Content-Encoding": "gzip"})
        result, _ = await run(server, reply)
        error = error_of(result)
        assert error.type == "content_encoding"
        assert error.message.startswith(f"the gzip body expands more than {MAX_EXPANSION}-fold (")
        assert error.message.endswith(" so far): refused as a decompression bomb")
        assert result.accumulated_text == "hi"

    async def test_a_coding_not_asked_for_is_refused_by_name(self, server: OpenAIServer) -> None:
        """A body in a coding the request did not accept (brotli) is an error naming it."""
        reply = Reply(frames=(b"\x0b\x02\x80data",), headers={"Content-Encoding": "br"})
        assert error_of((await run(server, reply))[0]) == StreamError(
            type="content_encoding",
            message="the body's Content-Encoding is 'br'; only gzip, deflate (what the request "
            "accepts) is decoded",
        )

    async def test_a_corrupt_gzip_body_is_an_error_after_its_good_part(
        self, server: OpenAIServer
    ) -> None:
        """Bytes that break the gzip stream end it as an error; the text before them is kept."""
        good = compressed(HELLO, 31)
        frames = (*good[:2], b"\xff" * 16)  # the first event, then garbage in a later write
        reply = Reply(frames=frames, headers={"Content-Encoding": "gzip"}).with_delay(0.02)
        result, sink = await run(server, reply)
        error = error_of(result)
        assert error.type == "content_encoding"
        assert error.message.startswith("the gzip body could not be decoded after ")
        assert sink.delivered == ["Hel"]

    async def test_a_compressed_error_body_is_quoted_decoded(self, server: OpenAIServer) -> None:
        """An HTTP error whose body is gzip-encoded is quoted as text."""
        body = zlib.compress(b'{"error": {"message": "overloaded"}}', wbits=31)
        reply = Reply(
            status=503,
            content_type="application/json",
            headers={"Content-Encoding": "gzip"},
            frames=(body,),
        )
        error = error_of((await run(server, reply))[0])
        assert error.message == f"HTTP 503 from {server.base_url}/chat/completions: overloaded"


class TestNotAStream:
    async def test_an_html_page_is_not_a_stream_and_is_quoted(self, server: OpenAIServer) -> None:
        """A 200 HTML page (a proxy, a login wall) says what came back: its type, its start."""
        page = b"<!DOCTYPE html><html><head><title>Sign in</title></head></html>"
        reply = Reply(frames=(page,), content_type="text/html; charset=utf-8")
        assert error_of((await run(server, reply))[0]) == StreamError(
            type="not_a_stream",
            message=f"{server.base_url}/chat/completions answered with text/html; charset=utf-8 "
            f"instead of an event stream: {page.decode()}",
            retryable=False,
        )

    async def test_a_compressed_page_is_quoted_decoded(self, server: OpenAIServer) -> None:
        """The page is quoted as text when it came gzip-encoded, as such pages usually do."""
        page = zlib.compress(b"<html>Bad gateway</html>", wbits=31)
        reply = Reply(
            frames=(page,), content_type="text/html", headers={"Content-Encoding": "gzip"}
        )
        message = error_of((await run(server, reply))[0]).message
        assert message.endswith(
            "answered with text/html instead of an event stream: <html>Bad gateway</html>"
        )

    @pytest.mark.parametrize("content_type", ["", "Text/Event-Stream; charset=utf-8"])
    async def test_an_event_stream_or_an_unnamed_body_is_read(
        self, server: OpenAIServer, content_type: str
    ) -> None:
        """The media type is matched without regard to case; a body of no stated type is read."""
        reply = Reply(frames=text_reply("hi").frames, content_type=content_type)
        result, _ = await run(server, reply)
        assert (result.status, result.accumulated_text) == (StreamStatus.COMPLETED, "hi")


class TestEventSize:
    async def test_an_event_of_100_000_data_lines_is_one_chunk(self, server: OpenAIServer) -> None:
        """SSE joins an event's data lines with newlines, whitespace to JSON: one chunk."""
        head, tail = json.dumps(chunk({"content": "hi"})).split('"choices"')
        event = ("data: " + head + "\ndata:" * 100_000 + ' "choices"' + tail + "\n\n").encode()
        result, sink = await run(server, raw_reply(event, chunk({}, "stop"), DONE))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["hi"])

    async def test_an_event_longer_than_the_bound_is_refused(self, server: OpenAIServer) -> None:
        """Data lines of 1 MiB, one after another in one event: refused past MAX_EVENT_CHARS."""
        line = b"data: " + b" " * (1 << 20) + b"\n"
        event = b"data: {}\n" + line * (MAX_EVENT_CHARS // (1 << 20) + 1)
        result, sink = await run(server, raw_reply(chunk({"content": "ok"}), event))
        assert error_of(result) == StreamError(
            type="malformed_chunk",
            message=f"malformed chunk 2: an SSE event's data exceeds {MAX_EVENT_CHARS} characters",
        )
        assert sink.delivered == ["ok"]


class TestFieldsInPieces:
    async def test_opaque_fields_in_pieces_are_replayed_joined(self, server: OpenAIServer) -> None:
        """An unknown string field streamed in pieces (message and call level) comes back whole."""
        fragment = {"index": 0, "id": "call_1", "function": {"name": "get_weather"}}
        pieces = ["sig-", "na", "ture"]
        reply = raw_reply(
            *(chunk({"x_sig": piece}) for piece in pieces),
            *(chunk({"tool_calls": [{**fragment, "x_sig": piece}]}) for piece in pieces),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}]}),
            chunk({}, "tool_calls"),
            DONE,
        )
        call = (await run(server, reply))[0].data
        assert call is not None and not isinstance(call, StreamError)
        assert call.passthrough == {
            "id": "call_1",
            "tool_call": {"x_sig": "sig-nature"},
            "message": {"x_sig": "sig-nature"},
        }

    async def test_a_tool_name_in_pieces_is_joined(self, server: OpenAIServer) -> None:
        """A name streamed in pieces is joined; a later repeat of the whole name is kept once."""
        names = ["get", "_", "weather", "get_weather"]
        reply = raw_reply(
            *(chunk({"tool_calls": [{"index": 0, "function": {"name": n}}]}) for n in names),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
            DONE,
        )
        result, _ = await run(server, reply)
        assert result.data is not None and not isinstance(result.data, StreamError)
        assert result.data.name == "get_weather"


class TestByteOrderMark:
    async def test_a_byte_order_mark_before_the_first_event_is_dropped(
        self, server: OpenAIServer
    ) -> None:
        """SSE ignores a leading U+FEFF: the first event is read, even when the mark is split."""
        body = b"\xef\xbb\xbf" + HELLO
        reply = raw_reply(body[:2], body[2:]).with_delay(0.01)
        result, sink = await run(server, reply)
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])


class TestLoneSurrogates:
    @pytest.mark.parametrize("key", ["content", "reasoning_content"])
    @pytest.mark.parametrize("escape", ["\\ud800", "\\uDFFF", "\\udbff x"])
    async def test_a_lone_surrogate_is_a_malformed_chunk(
        self, server: OpenAIServer, key: str, escape: str
    ) -> None:
        """An escape of half a UTF-16 pair is not Unicode text: the chunk is refused by the
        JSON policy, never delivered; the text before it is kept."""
        bad = f'data: {{"choices": [{{"delta": {{"{key}": "a{escape}"}}}}]}}\n\n'.encode()
        result, sink = await run(server, raw_reply(chunk({"content": "ok"}), bad, DONE))
        error = error_of(result)
        assert error.message.startswith(
            f"malformed chunk 2: the data $.choices[0].delta.{key} is a string with a lone "
            "surrogate, which is not Unicode text: "
        )
        assert (result.accumulated_text, sink.delivered) == ("ok", ["ok"])

    async def test_a_surrogate_pair_and_an_escaped_backslash_are_text(
        self, server: OpenAIServer
    ) -> None:
        """A whole pair is one character; `\\ud800` (a backslash, then letters) is no escape."""
        pair = b'data: {"choices": [{"delta": {"content": "\\ud83d\\ude00 \\\\ud800"}}]}\n\n'
        _, sink = await run(server, raw_reply(pair, chunk({}, "stop"), DONE))
        assert sink.delivered == ["\U0001f600 \\ud800"]


class TestVerbatimCallPolicy:
    @pytest.mark.parametrize(
        "arguments",
        ['{"city": ' + nested(150) + "}", '{"city": "\\ud800"}', '"\\udc00"'],
        ids=["deep", "lone-surrogate", "lone-surrogate-string"],
    )
    async def test_a_recovered_call_that_breaks_the_json_policy_is_text(
        self, server: OpenAIServer, arguments: str
    ) -> None:
        """Arguments a native call would be refused for (too deep, a lone surrogate) make no
        verbatim call either: the text is shown as the model wrote it."""
        text = f"get_weather({arguments})"
        result, sink = await run(server, text_reply(text), verbatim=True)
        assert (result.status, "".join(sink.delivered)) == (StreamStatus.COMPLETED, text)

    async def test_a_recovered_call_within_the_policy_is_a_call(self, server: OpenAIServer) -> None:
        """Nesting within the bound is a call as before."""
        text = 'get_weather({"city": "Oslo", "days": ' + nested(90) + "})"
        result, _ = await run(server, text_reply(text), verbatim=True)
        assert result.status is StreamStatus.FUNCTION_CALL
