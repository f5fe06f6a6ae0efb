"""The server-sent-events reader both HTTP providers read their streams with.

A provider's body is read here, never with httpx's line iterators: `body`
undoes a gzip or deflate coding in bounded pieces (httpx would decode a whole
network block at once, a megabyte or more from a few kilobytes), `SseReader`
splits lines at CRLF, LF or CR, drops a byte order mark, joins an event's data
lines with newlines as SSE says, and refuses a line or an event larger than the
JSON policy allows any chunk to be; `decode_payload` reads an event's data as
JSON through the C scanner, the policy deciding what the scanner cannot vouch
for. `read_events` drives a provider's fold (a `StreamFold`) event by event,
then drains the body's end so its connection goes back to the pool.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

import anyio
import httpx

from toolloop.effects.ports import StreamSink
from toolloop.effects.providers.credentials import EXCERPT_CHARS, Quoter
from toolloop.states import StreamError
from toolloop.states.errors import ToolloopError
from toolloop.states.json_policy import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    JsonInputError,
    loads,
    refuse_constant,
)

#: How long the body may stay open after the model is done before its connection is dropped.
DRAIN_SECONDS = 1.0
#: An SSE line longer than this is refused rather than buffered without end.
MAX_LINE_CHARS = 16 * 1024 * 1024
#: An event's data (all its `data:` lines) longer than this is refused: a chunk is one JSON
#: document, and the JSON policy allows no longer one.
MAX_EVENT_CHARS = MAX_JSON_CHARS
#: The content codings asked for; the body is decoded here, not by httpx, to bound it.
ACCEPT_ENCODING = "gzip, deflate"
#: The content codings undone, with zlib's window bits for each (0: deflate's are chosen
#: by its first two bytes, since servers send it zlib-wrapped or raw).
CONTENT_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 0}
#: A compressed body may decode to this many times the bytes received, plus
#: EXPANSION_ALLOWANCE. An event stream flushed event by event, as a streaming server
#: sends it, expands 17 to 24-fold; compressed whole, about 65-fold (255-fold when every
#: event is the same, which only a test sends for long). Deflate reaches 1,000-fold: a
#: megabyte of newlines would cost a gigabyte, 25 s of reading; at 100-fold, 2.5 s.
MAX_EXPANSION = 100
EXPANSION_ALLOWANCE = 1024 * 1024
#: The most bytes a compressed body is decoded into at a time.
INFLATE_PIECE = 64 * 1024
#: A JSON escape of a UTF-16 surrogate (`\ud800`): only such an escape can put one in a string.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
#: The C scanner behind `json.loads`, called directly: `loads` adds three Python
#: frames and an encoding check per chunk, a third of the per-chunk cost. It refuses
#: NaN and Infinity, as the JSON policy (states/json_policy.py) does.
DECODER: Any = json.JSONDecoder(parse_constant=refuse_constant)  # Any: no `scan_once` in typeshed
scan_json: Callable[[str, int], tuple[Any, int]] = DECODER.scan_once


class StreamBroken(ToolloopError, RuntimeError):
    """The stream cannot go on; `error` says why (malformed, cut short, provider error).

    The providers' own control flow: `HttpProvider` turns it into the stream's
    `error` result, so no caller sees it raised."""

    def __init__(self, error: StreamError) -> None:
        super().__init__(error.message)
        self.error = error


def malformed(chunk: int, what: str) -> StreamError:
    """The error of a chunk (numbered from 1) that cannot be read."""
    return StreamError(type="malformed_chunk", message=f"malformed chunk {chunk}: {what}")


def decode_payload(payload: str, chunk: int, quote: Quoter) -> Any:
    """An event's data as JSON: the C scanner, or the JSON policy where it cannot vouch.

    What the policy refuses and the scanner lets through is checked on the payload, far
    cheaper than walking every chunk: nesting deeper than allowed needs as many brackets,
    and a lone surrogate an escape of one (`\\ud800`; raw, it is not UTF-8), searched for
    only after a backslash (one character: found at memchr's speed, 150 times faster).
    """
    try:
        value, end = scan_json(payload, 0)
    except (StopIteration, ValueError, RecursionError):
        end = -1
    if (
        end != len(payload)
        or payload.count("{") + payload.count("[") > MAX_JSON_DEPTH
        or ("\\" in payload and SURROGATE_ESCAPE.search(payload))
    ):
        try:
            return loads(payload, where="the data")
        except JsonInputError as error:
            quoted = quote.quote(repr(payload))
            raise StreamBroken(malformed(chunk, f"the data {error.problem}: {quoted}")) from None
    return value


class StreamFold(Protocol):
    """A provider's fold of one stream's events (what `read_events` drives)."""

    async def take(self, payloads: Iterator[str], sink: StreamSink) -> bool:
        """Fold events' data from `payloads` and deliver their text; True once the model is
        done (the rest of `payloads` is then left unread)."""

    def trailer(self, payload: str) -> None:
        """Fold an event after the model was done (only what it may carry there: usage)."""


async def read_events(blocks: AsyncIterator[bytes], fold: StreamFold, sink: StreamSink) -> None:
    """Read the SSE body and fold every event into `fold`, until the model is done.

    Once it is, what may follow (a usage chunk, `[DONE]`, the body's end) is only
    drained, so a server that holds the body open cannot keep the reply waiting.
    """
    reader = SseReader()
    async for block in blocks:
        events = reader.events(block)
        if await fold.take(events, sink):
            await drain(blocks, events, reader, fold)
            return
    await fold.take(reader.end(), sink)


async def drain(
    blocks: AsyncIterator[bytes], events: Iterator[str], reader: SseReader, fold: StreamFold
) -> None:
    """Read the body's end after the model is done, so its connection goes back to the pool.

    Closing a body before its last chunk closes the connection, and every model
    call would pay a new connection (a TLS handshake, for a remote provider).
    The events read meanwhile go to `fold.trailer`. A server that holds the body
    open past DRAIN_SECONDS, or breaks it meanwhile, loses the connection and
    the trailer, never the reply.
    """
    with (
        anyio.move_on_after(DRAIN_SECONDS),
        contextlib.suppress(httpx.TransportError, StreamBroken, UnicodeDecodeError),
    ):
        for payload in events:
            fold.trailer(payload)
        async for block in blocks:
            for payload in reader.events(block):
                fold.trailer(payload)


def drop_connection(response: httpx.Response) -> None:
    """Close the connection under a body the server cut off, so the pool never reuses it.

    A server that breaks a stream off closes the connection a moment later
    (llama-cpp-python does, after logging the error); a request sent on it in
    that moment can even get response headers before the connection dies.
    Shutting it down first makes the pool see it dead, and the next request
    goes out on a fresh connection.
    """
    network_stream = response.extensions.get("network_stream")
    sock = None if network_stream is None else network_stream.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # The server may have closed it already.
            sock.shutdown(socket.SHUT_RDWR)


async def read_excerpt(response: httpx.Response) -> str:
    """The beginning of a response body, enough to quote it in an error.

    A body that cannot be decoded is quoted as far as it went, or by what is wrong with it.
    """
    collected = b""
    try:
        async for block in decoded_body(response):
            collected += block
            if len(collected) >= 4 * EXCERPT_CHARS:
                break
    except StreamBroken as broken:
        if not collected:
            return broken.error.message
    return collected.decode("utf-8", "replace")


def decoded_body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes, a gzip or deflate coding undone within MAX_EXPANSION."""
    coding = response.headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return response.aiter_raw()
    if coding not in CONTENT_CODINGS:
        message = (
            f"the body's Content-Encoding is {coding!r}; only {ACCEPT_ENCODING} "
            "(what the request accepts) is decoded"
        )
        raise StreamBroken(StreamError(type="content_encoding", message=message))
    return inflated(response.aiter_raw(), Inflate(coding))


async def inflated(raw: AsyncIterator[bytes], inflate: Inflate) -> AsyncIterator[bytes]:
    """The decoded pieces of a compressed body; between two pieces of one block, a checkpoint.

    A block that decodes to many pieces is read on without a pause otherwise,
    and cancellation (a kill, the inactivity timeout) only lands at a checkpoint.
    """
    async for block in raw:
        for number, piece in enumerate(inflate.decode(block)):
            if number:
                await anyio.lowlevel.checkpoint()
            yield piece


class Inflate:
    """A gzip or deflate body decoded in pieces of INFLATE_PIECE bytes at most.

    httpx would decode a whole network block at once, a megabyte or more from
    a few kilobytes; here the bytes decoded are counted against those
    received, and a body that expands more than MAX_EXPANSION-fold (beyond
    EXPANSION_ALLOWANCE) is refused before it costs more.
    """

    __slots__ = ("_coding", "_head", "_wbits", "_zlib", "produced", "received")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._wbits = CONTENT_CODINGS[coding]
        self._zlib: Any = None  # Any: zlib's decompressor type is private
        self._head = b""  # deflate's first byte, until a second tells zlib-wrapped from raw
        self.received = self.produced = 0

    def decode(self, block: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw block."""
        self.received += len(block)
        data, self._head = self._head + block, b""
        pending = False  # the last piece filled INFLATE_PIECE: zlib may hold more output
        while data or pending:
            if self._zlib is None or self._zlib.eof:  # the body's start, or what follows an end
                if self._zlib is not None and not self._wbits:
                    return  # Bytes after a deflate stream's end are ignored, as httpx does.
                if self._zlib is None and not self._wbits and len(data) < 2:
                    self._head = data
                    return
                # After a gzip member's end comes the next member (RFC 1952 allows several).
                self._zlib = zlib.decompressobj(self._wbits or deflate_wbits(data))
            piece = self._piece(data)
            pending = len(piece) == INFLATE_PIECE and not self._zlib.eof
            data = self._zlib.unused_data if self._zlib.eof else self._zlib.unconsumed_tail
            if piece:
                yield piece

    def _piece(self, data: bytes) -> bytes:
        """Up to INFLATE_PIECE decoded bytes of `data` (with what zlib still holds)."""
        try:
            piece: bytes = self._zlib.decompress(data, INFLATE_PIECE)
        except zlib.error as error:
            message = (
                f"the {self._coding} body could not be decoded after {self.produced} bytes "
                f"({error})"
            )
            raise StreamBroken(StreamError(type="content_encoding", message=message)) from None
        self.produced += len(piece)
        if self.produced > MAX_EXPANSION * self.received + EXPANSION_ALLOWANCE:
            message = (
                f"the {self._coding} body expands more than {MAX_EXPANSION}-fold "
                f"({self.received} bytes decoded to {self.produced} so far): refused as a "
                "decompression bomb"
            )
            raise StreamBroken(StreamError(type="content_encoding", message=message))
        return piece


def deflate_wbits(head: bytes) -> int:
    """zlib's window bits for a deflate body: zlib-wrapped when its first two bytes say so (RFC
    1950: method 8, a header divisible by 31), else raw, as some servers send it."""
    if head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return zlib.MAX_WBITS
    return -zlib.MAX_WBITS


class SseReader:
    """Splits the body into events and yields each event's data, UTF-8 decoded across blocks.

    A line ends at CRLF, LF or CR, as SSE allows, and a byte order mark at the
    start of the body is dropped, as SSE says (`utf-8-sig`). The start of a
    line that spans blocks is held as a list of pieces and joined once when its
    end arrives, so reading a line is linear in its length however it is split;
    an event's later data lines are joined once at its end, for the same reason.
    Comments (`: keep-alive`), `event:`, `id:` and `retry:` lines are ignored.
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_decode",
        "_held",
        "_held_chars",
        "_more_data",
        "_more_data_chars",
        "yielded",
    )

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8-sig")().decode
        self._held: list[str] = []  # Invariant: the text after the last line end seen.
        self._held_chars = 0
        self._after_cr = False  # The last text ended in CR: an LF next is part of that line end.
        self._data: str | None = None  # The first data line of the event being read.
        self._more_data: list[str] = []  # Its later data lines, joined once at its end.
        self._more_data_chars = 0
        self.yielded = 0
        """How many events with data this reader has yielded."""

    def events_of(self, lines: list[str]) -> Iterator[str]:
        """The data of each event these lines complete, stripped; an event without any is
        skipped. Read to its end, or the reader loses its place."""
        data = self._data
        for line in lines:
            if not line:
                # A blank line ends the event; one without data (`data:`) is skipped.
                if data is None:
                    continue
                if self._more_data:
                    data = self._joined(data)
                payload, data = data.strip(), None
                if payload:
                    self.yielded += 1
                    yield payload
            elif line.startswith("data:"):
                if data is None:
                    data = line[5:]
                else:
                    self._add_data(line[5:], len(data))
        self._data = data

    def events(self, block: bytes) -> Iterator[str]:
        """The data of each event the next block of the body completes."""
        return self.events_of(self._split(block))

    def end(self) -> Iterator[str]:
        """The data of the body's last event: one without its blank line still counts."""
        return self.events_of(["".join((*self._held, self._decode(b"", final=True))), ""])

    def _split(self, block: bytes) -> list[str]:
        """The complete lines that `block` finishes."""
        text = self._decode(block)
        if self._after_cr and text:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
        if not text:
            return []
        self._after_cr = text[-1] == "\r"
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._hold(text)
            return []
        lines = text.split("\n")
        if self._held:
            lines[0] = "".join((*self._held, lines[0]))
            self._held, self._held_chars = [], 0
        rest = lines.pop()
        if rest:
            self._hold(rest)
        return lines

    def _hold(self, text: str) -> None:
        self._held.append(text)
        self._held_chars += len(text)
        if self._held_chars > MAX_LINE_CHARS:
            too_long = f"an SSE line exceeds {MAX_LINE_CHARS} characters"
            raise StreamBroken(malformed(self.yielded + 1, too_long))

    def _add_data(self, line: str, first_chars: int) -> None:
        """Hold one more data line of the event (SSE joins them with newlines), within bounds."""
        self._more_data.append(line)
        self._more_data_chars += len(line) + 1
        if first_chars + self._more_data_chars > MAX_EVENT_CHARS:
            too_long = f"an SSE event's data exceeds {MAX_EVENT_CHARS} characters"
            raise StreamBroken(malformed(self.yielded + 1, too_long))

    def _joined(self, first: str) -> str:
        """The data of an event of several lines, joined once: linear in its size."""
        data = "\n".join((first, *self._more_data))
        self._more_data.clear()
        self._more_data_chars = 0
        return data
