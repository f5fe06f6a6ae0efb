"""Fuzzing the SSE decoder (issue 12): valid and hostile bodies, split at random points.

Where a body is split decides which bytes each read gets: a CR here, an LF in
the next read, half a UTF-8 character, a line in a thousand pieces. The
loopback server cannot choose its client's reads, so the split properties run
`stream()` whole over an in-memory transport (`SplitBody`) that hands the
provider exactly the blocks drawn; the hostile property runs again over real
HTTP, whole bodies through the loopback server. Linearity is measured in
`tests/bench/bench_openai_compat.py` (`long_line`), not timed here.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.openai_server import OpenAIServer, chunk, raw_reply
from tests.providers.conftest import RecordingSink, make_provider, make_request
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
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
    }
)
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])
BACKENDS = st.sampled_from(["trio", "asyncio"])


class _Blocks(httpx.AsyncByteStream):
    def __init__(self, blocks: list[bytes]) -> None:
        self._blocks = blocks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for block in self._blocks:
            yield block


class SplitBody(httpx.AsyncBaseTransport):
    """An in-memory transport: a 200 event stream whose body arrives as exactly these blocks."""

    def __init__(self, blocks: list[bytes]) -> None:
        self._blocks = blocks

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Blocks(self._blocks))


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    """`body` cut at the given offsets."""
    points = [0, *sorted({min(cut, len(body)) for cut in cuts}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


async def stream_blocks(
    blocks: list[bytes], verbatim: bool = False
) -> tuple[StreamResult, RecordingSink]:
    """`stream()` over the in-memory transport, with what the sink saw."""
    sink = RecordingSink()
    async with httpx.AsyncClient(transport=SplitBody(blocks)) as client:
        provider = OpenAICompatProvider(base_url="http://split.test/v1", model="m", client=client)
        result = await provider.stream(make_request(verbatim=verbatim), sink)
    return result, sink


# -- valid streams -----------------------------------------------------------------------------

#: One event of a valid stream: ("text", s) | ("reasoning", s) | ("comment", s) | ("empty", "").
events = st.lists(
    st.tuples(st.sampled_from(["text", "reasoning", "comment", "empty"]), st.text(max_size=12)),
    max_size=8,
)


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
            key = "content" if kind == "text" else "reasoning_content"
            encoded = json.dumps(chunk({key: text}), ensure_ascii=ascii_only, indent=indent)
            lines += [*("data: " + line for line in encoded.split("\n")), ""]
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
    data=st.data(),
    backend=BACKENDS,
)
def test_a_valid_stream_decodes_the_same_however_it_is_split(
    drawn: list[tuple[str, str]],
    ends: list[str],
    ascii_only: bool,
    indent: int | None,
    data: st.DataObject,
    backend: str,
) -> None:
    """Invariant: any split of a valid body (any line ends) delivers exactly its text pieces."""
    body = valid_body(drawn, itertools.cycle(ends), ascii_only, indent)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=40), label="cuts")
    result, sink = anyio.run(stream_blocks, split(body, cuts), backend=backend)
    texts = [text for kind, text in drawn if kind == "text" and text]
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
