"""GeminiProvider over the HTTP lifecycle and SSE reader it shares with the other adapter.

Sharing `http_provider.py` and `sse.py` changed what the Gemini adapter does
where it used to differ; each change is pinned here: 409 and 425 are
retryable, a redirect is refused with its own message, a user and password in
the base URL go as a Basic header (and are masked), a body that is not an
event stream is refused, and the reader's guarantees hold (multi-line events,
a byte order mark, the event-size cap, bounded decompression, a lone surrogate
refused). The scripted loopback server answers any path, so it plays Gemini
here with raw frames; the split property runs over an in-memory transport,
as the OpenAI-compatible reader's does (`test_sse_fuzz.py`).
"""

from __future__ import annotations

import base64
import itertools
import json
import zlib
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.openai_server import OpenAIServer, Reply, error_reply, raw_reply
from tests.providers import gemini_transcripts as t
from tests.providers.conftest import RecordingSink, make_request
from tests.providers.test_sse_fuzz import BACKENDS, CODINGS, LINE_ENDS, SplitBody, encoded, split
from toolloop.effects.providers.sse import MAX_EVENT_CHARS, MAX_EXPANSION
from toolloop.gemini import GeminiProvider
from toolloop.states import StreamError, StreamResult, StreamStatus

pytestmark = pytest.mark.anyio

PASSWORD = "hunter2-secret-pass"


def event(frame: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(frame).encode() + b"\r\n\r\n"


HELLO = (t.chunk(t.text("Hel")), t.chunk(t.text("lo"), finish="STOP"))


async def run(server: OpenAIServer, reply: Reply, **options: Any) -> tuple[StreamResult, Any]:
    """One Gemini stream against the scripted server; the result and what the sink saw."""
    server.script(reply)
    options.setdefault("base_url", server.base_url)
    options.setdefault("api_key", "")
    sink = RecordingSink()
    async with GeminiProvider(model="gemini-3-pro", **options) as gemini:
        result = await gemini.stream(make_request(), sink)
    return result, sink


def error_of(result: StreamResult) -> StreamError:
    assert result.status is StreamStatus.ERROR, result
    assert isinstance(result.data, StreamError)
    return result.data


class TestSharedRefusals:
    @pytest.mark.parametrize("status", [409, 425])
    async def test_409_and_425_are_retryable_now(self, server: OpenAIServer, status: int) -> None:
        """Shared statuses: a conflict or a too-early answer may pass on another try (before the
        sharing, Gemini retried only 408, 429 and 5xx)."""
        result, _ = await run(server, error_reply(status, "try again"))
        error = error_of(result)
        assert (error.type, error.retryable) == ("http_status", True)
        assert f"HTTP {status}" in error.message and "try again" in error.message

    async def test_a_redirect_is_refused_naming_where_it_points(self, server: OpenAIServer) -> None:
        """A 3xx is not followed: the message names the Location and says to fix base_url."""
        moved = Reply(status=307, headers={"Location": "https://elsewhere.test/v1beta"})
        error = error_of((await run(server, moved))[0])
        assert (error.type, error.retryable) == ("http_status", False)
        assert "redirected to https://elsewhere.test/v1beta" in error.message
        assert "set base_url" in error.message

    async def test_a_json_body_instead_of_a_stream_is_refused(self, server: OpenAIServer) -> None:
        """A 200 that is not an event stream is quoted, never read as events."""
        reply = Reply(frames=(json.dumps(HELLO[0]).encode(),), content_type="application/json")
        error = error_of((await run(server, reply))[0])
        assert (error.type, error.retryable) == ("not_a_stream", False)
        assert "answered with a JSON body instead of an event stream" in error.message

    async def test_userinfo_in_base_url_goes_as_basic_auth_and_is_masked(
        self, server: OpenAIServer
    ) -> None:
        """`http://user:pass@host`: a Basic header, not in the URL; a server echoing it is
        masked. The key still rides in `x-goog-api-key` beside it."""
        base = server.base_url.replace("http://", f"http://tomo:{PASSWORD}@")
        reply = error_reply(400, f"bad login {PASSWORD}")
        result, _ = await run(server, reply, base_url=base, api_key="AIza-key-0123456789")
        (request,) = server.requests
        token = base64.b64encode(f"tomo:{PASSWORD}".encode()).decode()
        assert request.headers["Authorization"] == f"Basic {token}"
        assert request.headers["x-goog-api-key"] == "AIza-key-0123456789"
        assert PASSWORD not in request.path
        assert PASSWORD not in error_of(result).message and "***" in error_of(result).message


class TestSharedReader:
    async def test_an_event_of_several_data_lines_is_one_chunk(self, server: OpenAIServer) -> None:
        """SSE joins an event's data lines with newlines (whitespace to JSON): one chunk."""
        spread = json.dumps(HELLO[0], indent=1).replace("\n", "\ndata: ")
        frames = (b"data: " + spread.encode() + b"\n\n", event(HELLO[1]))
        result, sink = await run(server, raw_reply(*frames))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])

    async def test_a_byte_order_mark_at_the_start_is_dropped(self, server: OpenAIServer) -> None:
        """SSE allows a BOM before the first line; it is not part of the first field."""
        frames = (b"\xef\xbb\xbf" + event(HELLO[0]), event(HELLO[1]))
        result, sink = await run(server, raw_reply(*frames))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])

    async def test_an_event_longer_than_the_bound_is_refused(self, server: OpenAIServer) -> None:
        """Data lines of 1 MiB in one event: refused past MAX_EVENT_CHARS, the text so far kept."""
        line = b"data: " + b" " * (1 << 20) + b"\n"
        oversized = b"data: {}\n" + line * (MAX_EVENT_CHARS // (1 << 20) + 1)
        result, sink = await run(server, raw_reply(event(HELLO[0]), oversized))
        assert error_of(result).message == (
            f"malformed chunk 2: an SSE event's data exceeds {MAX_EVENT_CHARS} characters"
        )
        assert sink.delivered == ["Hel"] and result.accumulated_text == "Hel"

    async def test_a_gzip_body_is_decoded(self, server: OpenAIServer) -> None:
        """The adapter asks for gzip and deflate and undoes them itself."""
        body, headers = encoded(event(HELLO[0]) + event(HELLO[1]), "gzip")
        result, sink = await run(server, Reply(frames=(body,), headers=headers))
        assert (result.status, sink.delivered) == (StreamStatus.COMPLETED, ["Hel", "lo"])
        assert server.requests[0].headers["Accept-Encoding"] == "gzip, deflate"

    async def test_a_decompression_bomb_is_refused(self, server: OpenAIServer) -> None:
        """A gzip body that expands beyond MAX_EXPANSION-fold is refused before it costs more."""
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        bomb = compressor.compress(b"\n" * (64 << 20)) + compressor.flush()
        reply = Reply(frames=(bomb,), headers={"Content-Encoding": "gzip"})
        error = error_of((await run(server, reply))[0])
        assert error.type == "content_encoding"
        assert error.message.startswith(f"the gzip body expands more than {MAX_EXPANSION}-fold (")

    async def test_a_lone_surrogate_escape_is_refused(self, server: OpenAIServer) -> None:
        """The shared decoder checks what the C scanner lets through: a lone `\\ud800`."""
        frame = b'data: {"candidates": [{"content": {"parts": [{"text": "\\ud800"}]}}]}\n\n'
        error = error_of((await run(server, raw_reply(frame)))[0])
        assert error.type == "malformed_chunk"
        assert error.message.startswith("malformed chunk 1: the data $.candidates[0]")
        assert "lone surrogate" in error.message


async def stream_blocks(blocks: list[bytes], headers: dict[str, str]) -> tuple[StreamResult, Any]:
    sink = RecordingSink()
    async with httpx.AsyncClient(transport=SplitBody(blocks, headers)) as client:
        gemini = GeminiProvider(
            base_url="http://split.test/v1beta", model="m", api_key="", client=client
        )
        result = await gemini.stream(make_request(), sink)
    return result, sink


@settings(max_examples=100, deadline=None)
@given(
    pieces=st.lists(st.text(min_size=1, max_size=10), max_size=6),
    ends=st.lists(LINE_ENDS, min_size=1),
    bom=st.booleans(),
    coding=CODINGS,
    data=st.data(),
    backend=BACKENDS,
)
def test_a_gemini_stream_decodes_the_same_however_it_is_split(
    pieces: list[str],
    ends: list[str],
    bom: bool,
    coding: str | None,
    data: st.DataObject,
    backend: str,
) -> None:
    """Invariant: any split of a valid Gemini body (any line ends, a byte order mark or not,
    plain or gzip/deflate-encoded) delivers exactly its text pieces and completes."""
    frames = [*(t.chunk(t.text(piece)) for piece in pieces), t.chunk(t.text("."), finish="STOP")]
    cycle = itertools.cycle(ends)
    body = b"\xef\xbb\xbf" * bom + b"".join(
        ("data: " + json.dumps(frame) + next(cycle) * 2).encode() for frame in frames
    )
    body, headers = encoded(body, coding)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    result, sink = anyio.run(stream_blocks, split(body, cuts), headers, backend=backend)
    assert result.status is StreamStatus.COMPLETED, result
    assert sink.delivered == [*pieces, "."]
