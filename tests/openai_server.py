"""A loopback HTTP server that speaks the chat-completions streaming protocol.

Tests start it on 127.0.0.1 (a free port) and script it with a list of `Reply`
objects, one consumed per request. It is a real server: stdlib
`ThreadingHTTPServer` in a background thread, HTTP/1.1 with chunked bodies, so
it serves trio and asyncio clients alike, a mid-stream disconnect is a broken
chunked body, and a clean end without `[DONE]` is a clean end.

    with OpenAIServer() as server:
        server.script(text_reply("Hel", "lo"), tool_call_reply("get_weather", {"city": "Paris"}))
        ... point a client at server.base_url ...
        assert server.requests[0].body["model"] == "m"

Every request body is recorded (`server.requests`), with an event set when
the client left before the reply was over (`RecordedRequest.client_left`).
"""

from __future__ import annotations

import collections
import json
import select
import socket
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, NoReturn

import attrs

from toolloop.testing.model_server import (
    DONE,
    LoopbackServer,
    OwnedServer,
    end_body,
    send_head,
    send_json,
    sse_event,
    write_chunk,
)

#: Frames written back to back are joined into HTTP chunks of about this size.
BATCH_BYTES = 64 * 1024
#: How often a stalled reply looks for the client leaving, and the server for its stop.
POLL_SECONDS = 0.02


@attrs.frozen(kw_only=True)
class Stall:
    """A frame that stops sending and keeps the connection open until the client leaves."""


@attrs.frozen(kw_only=True)
class Disconnect:
    """A frame that drops the connection in the middle of the chunked body."""


Frame = dict[str, Any] | bytes | Stall | Disconnect
"""A chunk object (sent as `data: {json}`), raw bytes (sent as is), or a control frame."""


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted answer to one request."""

    frames: tuple[Frame, ...] = ()
    """What the streaming body carries, in order."""
    status: int = 200
    error: dict[str, Any] | None = None
    """For an HTTP error: the JSON body `{"error": ...}` sent instead of a stream."""
    delay: float = 0.0
    """Seconds to wait before each frame (a slow stream)."""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = attrs.field(factory=dict)
    """More response headers (a redirect's `Location`)."""
    hang_up_after: bool = False
    """Keep the connection alive, then drop the next request it carries unanswered."""

    def with_delay(self, seconds: float) -> Reply:
        """The same reply, waiting `seconds` before each frame."""
        return attrs.evolve(self, delay=seconds)

    def stalled_after(self, count: int) -> Reply:
        """The first `count` frames, then silence until the client leaves."""
        return attrs.evolve(self, frames=(*self.frames[:count], Stall()))

    def disconnected_after(self, count: int) -> Reply:
        """The first `count` frames, then the connection drops mid-body."""
        return attrs.evolve(self, frames=(*self.frames[:count], Disconnect()))

    def without_done(self) -> Reply:
        """The same stream ending cleanly but without `data: [DONE]`."""
        return attrs.evolve(self, frames=tuple(f for f in self.frames if f != DONE))

    def without_finish_reason(self) -> Reply:
        """The same stream with every `finish_reason` set to null."""
        return attrs.evolve(self, frames=tuple(_unfinished(f) for f in self.frames))

    def then_hang_up(self) -> Reply:
        """The same reply; then the kept-alive connection dies under the client's next request.

        This is the race of a server closing an idle pooled connection just as
        the client reuses it: the request is sent and no response ever comes.
        """
        return attrs.evolve(self, hang_up_after=True)


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """One `chat.completion.chunk` object as OpenAI sends it."""
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "loopback",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def stream_reply(*deltas: dict[str, Any], finish_reason: str | None = "stop") -> Reply:
    """A stream of the given deltas, a final chunk with `finish_reason`, then `[DONE]`."""
    first = [chunk({"role": "assistant", "content": ""})]
    body = [chunk(delta) for delta in deltas]
    return Reply(frames=(*first, *body, chunk({}, finish_reason), DONE))


def text_reply(*pieces: str, finish_reason: str | None = "stop") -> Reply:
    """A text answer streamed as one content delta per piece."""
    return stream_reply(*({"content": piece} for piece in pieces), finish_reason=finish_reason)


def tool_call_reply(
    name: str,
    arguments: str | dict[str, Any],
    *,
    text: str = "",
    fragments: int = 3,
    call_id: str = "call_loopback_1",
    repeat_id_and_name: bool = False,
    extra: dict[str, Any] | None = None,
    finish_reason: str | None = "tool_calls",
) -> Reply:
    """A native tool call whose arguments arrive in `fragments` pieces.

    `repeat_id_and_name` sends the id and name in every fragment, as
    llama-cpp-python does; `extra` is merged into the first fragment (e.g. a
    thought signature); `text` is streamed as content before the call.
    """
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    deltas: list[dict[str, Any]] = [{"content": text}] if text else []
    for number, piece in enumerate(_split(encoded, fragments)):
        call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
        if number == 0 or repeat_id_and_name:
            call.update(id=call_id, type="function")
            call["function"]["name"] = name
        if number == 0 and extra:
            call.update(extra)
        deltas.append({"tool_calls": [call]})
    return stream_reply(*deltas, finish_reason=finish_reason)


def error_reply(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    """An HTTP error with OpenAI's JSON error body."""
    return Reply(status=status, error={"message": message, "type": kind, "code": status})


def raw_reply(*frames: Frame) -> Reply:
    """A stream of exactly these frames (chunk objects, raw bytes, control frames)."""
    return Reply(frames=frames)


def _split(text: str, parts: int) -> Iterator[str]:
    """`text` in `parts` pieces of near-equal length (at least one piece)."""
    size = max(1, -(-len(text) // max(1, parts)))
    yield from (text[i : i + size] for i in range(0, len(text), size)) if text else ("",)


def _unfinished(frame: Frame) -> Frame:
    """A chunk frame with its finish reasons nulled; other frames unchanged."""
    if not isinstance(frame, dict):
        return frame
    choices = [{**choice, "finish_reason": None} for choice in frame.get("choices", [])]
    return {**frame, "choices": choices}


@attrs.define(kw_only=True)
class RecordedRequest:
    """What the server received, and whether the client left before the reply ended."""

    path: str
    client_port: int
    """The client's side of the connection: two requests on one connection share it."""
    headers: dict[str, str]
    body: Any
    """The parsed JSON body (None when it was not JSON)."""
    client_left: threading.Event = attrs.field(factory=threading.Event)
    finished: threading.Event = attrs.field(factory=threading.Event)
    """Set when the server is done with this request, whichever way it ended."""


class _ClientLeft(Exception):
    """The client closed the connection while the reply was being written."""


class _Stopping(Exception):
    """The server stops; a stalled reply gives up its connection."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    hanging_up = False
    """Set by a `then_hang_up` reply: this connection's next request is recorded, unanswered."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        record = RecordedRequest(
            path=self.path,
            client_port=self.client_address[1],
            headers=dict(self.headers.items()),
            body=body,
        )
        self.server.owner.requests.append(record)
        try:
            if self.hanging_up:
                self.close_connection = True
                return
            reply = self.server.owner.next_reply()
            self._answer(reply)
            self.hanging_up = reply.hang_up_after
        except (_ClientLeft, OSError):
            record.client_left.set()
            self.close_connection = True
        except _Stopping:
            self.close_connection = True
        finally:
            record.finished.set()

    def _answer(self, reply: Reply) -> None:
        if reply.error is not None:
            send_json(self, reply.status, {"error": reply.error})
            return
        send_head(self, reply.status, reply.content_type, headers=reply.headers)
        for batch in self._batches(reply):
            if isinstance(batch, Disconnect):
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            write_chunk(self.wfile, batch)
        end_body(self.wfile)

    def _batches(self, reply: Reply) -> Iterator[bytes | Disconnect]:
        """The body as chunked writes: frames batched, delays and stalls honoured."""
        pending: list[bytes] = []
        size = 0
        for frame in reply.frames:
            if reply.delay or isinstance(frame, Stall | Disconnect):
                yield b"".join(pending)
                pending, size = [], 0
                self._wait(reply.delay)
            if isinstance(frame, Stall):
                self._stall()
            if isinstance(frame, Disconnect):
                yield frame
                return
            data = sse_event(frame)
            pending.append(data)
            size += len(data)
            if size >= BATCH_BYTES:
                yield b"".join(pending)
                pending, size = [], 0
        yield b"".join(pending)

    def _wait(self, seconds: float) -> None:
        """Wait `seconds`; raise `_ClientLeft` as soon as the client leaves."""
        while seconds > 0 and not self.server.owner.stopping.is_set():
            step = min(POLL_SECONDS, seconds)
            readable, _, _ = select.select([self.connection], [], [], step)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                raise _ClientLeft
            seconds -= step

    def _stall(self) -> NoReturn:
        """Send nothing more, keeping the connection open until the client leaves."""
        self._wait(float("inf"))
        raise _Stopping


class OpenAIServer(LoopbackServer):
    """The loopback chat-completions server; a context manager that starts and stops it."""

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        super().__init__(_Handler, poll=POLL_SECONDS)
        self.requests: list[RecordedRequest] = []
        self._replies: collections.deque[Reply] = collections.deque(replies)
        self._lock = threading.Lock()

    def script(self, *replies: Reply) -> None:
        """Queue replies, one per future request."""
        with self._lock:
            self._replies.extend(replies)

    def next_reply(self) -> Reply:
        """The next scripted reply; a 500 naming the problem when none is left."""
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return error_reply(500, "loopback server: no scripted reply left", "server_error")
