"""Fuzzing the SSE decoder (issues 12 and 20): valid and hostile bodies, split at random points.

Where a body is split decides which bytes each read gets: a CR here, an LF in
the next read, half a UTF-8 character, a line in a thousand pieces, a byte of
a gzip stream. The loopback server cannot choose its client's reads, so the
split properties run `stream()` whole over an in-memory transport
(`SplitBody`) that hands the provider exactly the blocks drawn; the hostile
property runs again over real HTTP, whole bodies through the loopback server.
Bodies come plain or gzip/deflate-encoded (`encoded`), flushed event by event
as a streaming server sends them.

Cost is checked without a clock: `MeteredBody` sums, read by read, how much
memory the reader allocated beyond what it already held (tracemalloc's peak),
which grows with the square of the body when each piece of a field copies the
pieces before it. Reading time is measured in `tests/bench/bench_openai_compat.py`.
"""

from __future__ import annotations

import functools
import itertools
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.openai_server import OpenAIServer, chunk, raw_reply
from tests.providers.conftest import RecordingSink, make_provider, make_request
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.providers.sse import EXPANSION_ALLOWANCE, MAX_EXPANSION
from toolloop.states import StreamError, StreamResult, StreamStatus

#: Every `StreamError.type` a body alone can cause (no transport is failing here).
BODY_ERRORS = frozenset(
    {
        "malformed_chunk",
        "incomplete_stream",
        "provider_error",
        "content_filter",
        "missing_tool_call",
        "malformed_tool_call",
        "content_encoding",
    }
)
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])
BACKENDS = st.sampled_from(["trio", "asyncio"])
#: How a body is sent: plain, gzip, zlib-wrapped deflate, raw deflate.
CODINGS = st.sampled_from([None, "gzip", "deflate", "raw-deflate"])
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}


def encoded(body: bytes, coding: str | None) -> tuple[bytes, dict[str, str]]:
    """`body` in `coding` and its Content-Encoding header, flushed after each line end."""
    if coding is None:
        return body, {}
    compressor = zlib.compressobj(6, zlib.DEFLATED, _WBITS[coding])
    pieces = [
        compressor.compress(line) + compressor.flush(zlib.Z_SYNC_FLUSH)
        for line in body.splitlines(keepends=True)
    ]
    header = "deflate" if coding == "raw-deflate" else coding
    return b"".join(pieces) + compressor.flush(), {"content-encoding": header}


class _Blocks(httpx.AsyncByteStream):
    def __init__(self, blocks: list[bytes]) -> None:
        self._blocks = blocks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for block in self._blocks:
            yield block


class MeteredBody(httpx.AsyncByteStream):
    """Blocks handed out one by one, metering the memory the reader allocates for each.

    `allocated` sums, over the reads, the peak of traced memory above what was
    held when the block was handed out (a read the reader never returns from,
    as at a refusal, is not counted).
    """

    def __init__(self, blocks: list[bytes]) -> None:
        self._blocks = blocks
        self.allocated = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for block in self._blocks:
            held, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            yield block
            self.allocated += tracemalloc.get_traced_memory()[1] - held


class SplitBody(httpx.AsyncBaseTransport):
    """An in-memory transport: a 200 event stream whose body arrives as exactly these blocks."""

    def __init__(
        self, blocks: list[bytes] | httpx.AsyncByteStream, headers: dict[str, str] | None = None
    ) -> None:
        self._body = blocks if isinstance(blocks, httpx.AsyncByteStream) else _Blocks(blocks)
        self._headers = headers or {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", **self._headers}
        return httpx.Response(200, headers=headers, stream=self._body)


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    """`body` cut at the given offsets."""
    points = [0, *sorted({min(cut, len(body)) for cut in cuts}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


async def stream_blocks(
    blocks: list[bytes] | httpx.AsyncByteStream,
    verbatim: bool = False,
    headers: dict[str, str] | None = None,
) -> tuple[StreamResult, RecordingSink]:
    """`stream()` over the in-memory transport, with what the sink saw."""
    sink = RecordingSink()
    async with httpx.AsyncClient(transport=SplitBody(blocks, headers)) as client:
        provider = OpenAICompatProvider(base_url="http://split.test/v1", model="m", client=client)
        result = await provider.stream(make_request(verbatim=verbatim), sink)
    return result, sink


# -- valid streams -----------------------------------------------------------------------------

#: One event of a valid stream: ("text", s) | ("reasoning", s) | ("comment", s) | ("empty", "")
#: | ("opaque", s): a field the adapter does not know | ("spread", s): text whose event has a
#: data line per JSON token (SSE joins them with newlines).
events = st.lists(
    st.tuples(
        st.sampled_from(["text", "reasoning", "comment", "empty", "opaque", "spread"]),
        st.text(max_size=12),
    ),
    max_size=8,
)
TEXT_KINDS = ("text", "spread")


def valid_body(
    drawn: list[tuple[str, str]], ends: Iterator[str], ascii_only: bool, indent: int | None
) -> bytes:
    """The SSE body of `drawn` events, a stop chunk and `[DONE]`, with the given line ends."""
    lines: list[str] = []
    for kind, text in drawn:
        if kind == "comment":
            lines += [": " + text.replace("\r", "").replace("\n", ""), ""]
        elif kind == "empty":
            lines += ["data:", ""]
        else:
            key = {"opaque": "x_signature", "reasoning": "reasoning_content"}.get(kind, "content")
            spread = 0 if kind == "spread" else indent
            data = json.dumps(chunk({key: text}), ensure_ascii=ascii_only, indent=spread)
            lines += [*("data: " + line for line in data.split("\n")), ""]
    lines += ["data: " + json.dumps(chunk({}, "stop")), "", "data: [DONE]", ""]
    out: list[str] = []
    previous = ""
    for line in lines:
        end = next(ends)
        if previous == "\r" and not line and end == "\n":
            end = "\r\n"  # CR then LF is one line end: a blank line after a CR needs its own.
        out.append(line + end)
        previous = end
    return "".join(out).encode()


@settings(max_examples=200, deadline=None)
@given(
    drawn=events,
    ends=st.lists(LINE_ENDS, min_size=1),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1]),
    bom=st.booleans(),
    coding=CODINGS,
    data=st.data(),
    backend=BACKENDS,
)
def test_a_valid_stream_decodes_the_same_however_it_is_split(
    drawn: list[tuple[str, str]],
    ends: list[str],
    ascii_only: bool,
    indent: int | None,
    bom: bool,
    coding: str | None,
    data: st.DataObject,
    backend: str,
) -> None:
    """Invariant: any split of a valid body (any line ends, a byte order mark or not, plain or
    gzip/deflate-encoded) delivers exactly its text pieces."""
    body = b"\xef\xbb\xbf" * bom + valid_body(drawn, itertools.cycle(ends), ascii_only, indent)
    body, headers = encoded(body, coding)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=40), label="cuts")
    result, sink = anyio.run(stream_blocks, split(body, cuts), False, headers, backend=backend)
    texts = [text for kind, text in drawn if kind in TEXT_KINDS and text]
    reasoning = "".join(text for kind, text in drawn if kind == "reasoning")
    assert sink.delivered == texts
    assert result.accumulated_text == "".join(texts)
    assert result.status is (StreamStatus.COMPLETED if texts else StreamStatus.EMPTY_RESPONSE)
    assert result.thought_log == ({"text": reasoning} if reasoning else None)


# -- hostile streams ---------------------------------------------------------------------------


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    """Bytes a broken or hostile server might send: garbage, or a valid body mangled."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    drawn = draw(events)
    ends = itertools.repeat(draw(LINE_ENDS))
    body = bytearray(valid_body(drawn, ends, draw(st.booleans()), None))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        action = draw(st.sampled_from(["insert", "delete", "truncate"]))
        if action == "insert":
            fragment = draw(
                st.sampled_from([b"\r", b"\n", b"data:", b"{", b"[", b"NaN", b"\xff", b"\xe2\x80"])
                | st.binary(max_size=6)
            )
            body[at:at] = fragment
        elif action == "delete":
            del body[at : at + draw(st.integers(1, 10))]
        else:
            del body[at:]
    return bytes(body)


def check_invariants(result: StreamResult, sink: RecordingSink) -> None:
    """Nothing delivered is lost, and an error says what was wrong."""
    assert isinstance(result, StreamResult)
    assert result.accumulated_text == "".join(sink.delivered)
    if result.status is StreamStatus.ERROR:
        assert isinstance(result.data, StreamError)
        assert result.data.type in BODY_ERRORS and result.data.message


@settings(max_examples=300, deadline=None)
@given(body=hostile_bodies(), data=st.data(), verbatim=st.booleans(), backend=BACKENDS)
def test_a_hostile_stream_never_raises_and_keeps_what_it_delivered(
    body: bytes, data: st.DataObject, verbatim: bool, backend: str
) -> None:
    """Invariant: any split of any body gives a StreamResult holding every delivered text.

    When the body is UTF-8 the result is also the same as the unsplit body's (with
    bytes that are not UTF-8, how far decoding got before the bad byte depends on
    the split).
    """
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=30), label="cuts")
    result, sink = anyio.run(stream_blocks, split(body, cuts), verbatim, backend=backend)
    check_invariants(result, sink)
    try:
        body.decode()
    except UnicodeDecodeError:
        return
    whole, _ = anyio.run(stream_blocks, [body], verbatim, backend=backend)
    assert result == whole


@settings(max_examples=150, deadline=None)
@given(
    body=hostile_bodies(),
    coding=CODINGS.filter(bool),
    damage=st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=4)), max_size=3),
    end=st.none() | st.integers(0, 10_000),
    data=st.data(),
    backend=BACKENDS,
)
def test_a_hostile_compressed_stream_never_raises_and_keeps_what_it_delivered(
    body: bytes,
    coding: str,
    damage: list[tuple[int, bytes]],
    end: int | None,
    data: st.DataObject,
    backend: str,
) -> None:
    """Invariant: any body, compressed then damaged (bytes overwritten, the stream cut) and
    split anywhere, gives a StreamResult holding every delivered text."""
    compressed, headers = encoded(body, coding)
    mangled = bytearray(compressed)
    for at, patch in damage:
        at %= len(mangled) + 1
        mangled[at : at + len(patch)] = patch
    if end is not None:
        del mangled[end % (len(mangled) + 1) :]
    cuts = data.draw(st.lists(st.integers(0, len(mangled)), max_size=30), label="cuts")
    blocks = split(bytes(mangled), cuts)
    check_invariants(*anyio.run(stream_blocks, blocks, False, headers, backend=backend))


@pytest.fixture(scope="module")
def shared_server() -> Iterator[OpenAIServer]:
    """One loopback server for every example of a property."""
    with OpenAIServer() as running:
        yield running


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=hostile_bodies(), verbatim=st.booleans(), backend=BACKENDS)
def test_a_hostile_body_over_http_never_raises_and_keeps_what_it_delivered(
    shared_server: OpenAIServer, body: bytes, verbatim: bool, backend: str
) -> None:
    """Invariant: the same over real HTTP, the body as the loopback server sends it."""

    async def once() -> tuple[StreamResult, RecordingSink]:
        shared_server.script(raw_reply(body))
        sink = RecordingSink()
        async with make_provider(shared_server) as provider:
            result = await provider.stream(make_request(verbatim=verbatim), sink)
        return result, sink

    check_invariants(*anyio.run(once, backend=backend))


# -- cost: memory allocated, linear in the body --------------------------------------------


def _sse(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return b"data: " + json.dumps(chunk(delta, finish)).encode() + b"\n\n"


def one_event_of_many_lines(pieces: int, size: int) -> list[bytes]:
    """One event whose JSON is spread over `pieces` data lines of `size` spaces."""
    lines = [b"data: " + b" " * size + b"\n" for _ in range(pieces)]
    return [b'data: {"choices": [], "x": 1\n', *lines, b"data: }\n\n", _sse({}, "stop")]


def an_opaque_field_in_pieces(pieces: int, size: int) -> list[bytes]:
    """A delta field the adapter does not know (a signature), streamed in `pieces` strings."""
    return [_sse({"x_signature": "ab"[n % 2] * size}) for n in range(pieces)] + [
        _sse({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}, "tool_calls")
    ]


def a_tool_name_in_pieces(pieces: int, size: int) -> list[bytes]:
    """A tool call whose name streams in `pieces` pieces (no two alike in a row)."""
    fragments = [
        {"index": 0, "function": {"name": "ab"[n % 2] * (size + 1)}} for n in range(pieces)
    ]
    return [_sse({"tool_calls": [fragment]}) for fragment in fragments] + [_sse({}, "tool_calls")]


SHAPES: dict[str, Callable[[int, int], list[bytes]]] = {
    "one event of many lines": one_event_of_many_lines,
    "an opaque field in pieces": an_opaque_field_in_pieces,
    "a tool name in pieces": a_tool_name_in_pieces,
}


async def metered(blocks: list[bytes], headers: dict[str, str]) -> MeteredBody:
    """The body, read whole by `stream()` under tracemalloc."""
    body = MeteredBody(blocks)
    tracemalloc.start()
    try:
        result, _ = await stream_blocks(body, headers=headers)
    finally:
        tracemalloc.stop()
    assert result.status is not StreamStatus.ERROR, result
    return body


@settings(max_examples=12, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    size=st.integers(0, 120),
    coding=CODINGS,
    backend=BACKENDS,
)
def test_memory_allocated_reading_a_field_in_pieces_grows_linearly(
    shape: str, size: int, coding: str | None, backend: str
) -> None:
    """Invariant: four times the pieces (of an event's data lines, an opaque field, a tool name)
    cost at most six times the memory allocated: linear (4), not quadratic (16), the cost
    when each piece copies the pieces before it."""
    costs = []
    for pieces in (400, 1600):
        blocks = SHAPES[shape](pieces, size)
        headers: dict[str, str] = {}
        if coding:  # the compressed body in blocks of 512 bytes
            body, headers = encoded(b"".join(blocks), coding)
            blocks = split(body, list(range(0, len(body), 512)))
        costs.append(anyio.run(metered, blocks, headers, backend=backend).allocated)
    assert costs[1] <= 6 * costs[0], costs


@functools.cache
def bomb(coding: str, megabytes: int) -> tuple[list[bytes], dict[str, str]]:
    """A text chunk, then `megabytes` MiB of newlines, compressed 1,000-fold, in 4 KiB blocks."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, _WBITS[coding])
    newlines = b"\n" * (1 << 20)
    body = compressor.compress(_sse({"content": "hi"}))
    body += b"".join(compressor.compress(newlines) for _ in range(megabytes)) + compressor.flush()
    header = "deflate" if coding == "raw-deflate" else coding
    return split(body, list(range(0, len(body), 4096))), {"content-encoding": header}


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_decompression_bomb_is_refused_in_bounded_memory(coding: str, backend: str) -> None:
    """64 KiB that decode to 64 MiB: refused in its first block, once that decodes to more
    than MAX_EXPANSION times its size, and never held whole: reading it holds at most 1 MiB
    more at once (a block decoded at once, as httpx decodes it, is 4 MiB)."""
    blocks, headers = bomb(coding, 64)

    async def read() -> tuple[StreamResult, int]:
        tracemalloc.start()
        try:
            held, _ = tracemalloc.get_traced_memory()
            result, _ = await stream_blocks(blocks, headers=headers)
            return result, tracemalloc.get_traced_memory()[1] - held
        finally:
            tracemalloc.stop()

    result, peak = anyio.run(read, backend=backend)
    assert result.status is StreamStatus.ERROR and isinstance(result.data, StreamError)
    assert (result.data.type, result.accumulated_text) == ("content_encoding", "hi")
    assert result.data.message.startswith(
        f"the {headers['content-encoding']} body expands more than {MAX_EXPANSION}-fold "
        "(4096 bytes decoded to "
    )
    decoded = int(result.data.message.split(" decoded to ")[1].split()[0])
    assert MAX_EXPANSION * 4096 + EXPANSION_ALLOWANCE < decoded < 4096 * 1000
    assert peak < 1 << 20, peak
