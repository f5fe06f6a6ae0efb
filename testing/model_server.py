"""A loopback chat-completions server that streams what a responder function yields.

`toolloop demo` serves its embedded model with it, so the whole conversation
crosses real HTTP: `POST /v1/chat/completions` is answered with a chunked
`text/event-stream` body, one `data: {chunk}` event per object the responder
yields for the request body, a short pause between them (so streaming is
visible), then `data: [DONE]`. It is stdlib `ThreadingHTTPServer` in a daemon
thread, so trio and asyncio clients alike can talk to it.

    with ModelServer(demo_model.chunks) as server:
        provider = OpenAICompatProvider(base_url=server.base_url, model="toolloop-demo")

The framing helpers (`sse_event`, `send_head`, `write_chunk`, `end_body`,
`send_json`) are shared with the scripted test server, `tests/openai_server.py`.
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

DONE = b"data: [DONE]\n\n"
ROUTE = "/v1/chat/completions"
#: How often the serving thread looks for `stop()`.
POLL_SECONDS = 0.05

Responder = Callable[[dict[str, Any]], Iterable[Mapping[str, Any]]]
"""The chunk objects answering one request body, in order."""


def sse_event(frame: Mapping[str, Any] | bytes) -> bytes:
    """The SSE bytes of one frame: a chunk object as `data: {json}`, raw bytes as they are."""
    if isinstance(frame, bytes):
        return frame
    return b"data: " + json.dumps(frame).encode() + b"\n\n"


def send_head(
    handler: BaseHTTPRequestHandler,
    status: int,
    content_type: str,
    length: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """The status line and headers: a chunked body unless `length` is given."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if length is None:
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache")
    else:
        handler.send_header("Content-Length", str(length))
    handler.end_headers()


def write_chunk(wfile: io.BufferedIOBase, data: bytes) -> None:
    """One HTTP chunk, flushed; empty data is skipped (an empty chunk would end the body)."""
    if data:
        wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        wfile.flush()


def end_body(wfile: io.BufferedIOBase) -> None:
    """The last chunk of a chunked body."""
    wfile.write(b"0\r\n\r\n")
    wfile.flush()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """A complete JSON response (errors are `{"error": {...}}`, as OpenAI sends them)."""
    data = json.dumps(payload).encode()
    send_head(handler, status, "application/json", length=len(data))
    handler.wfile.write(data)


def error_body(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": status}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """Each chunk leaves at once, not after the client's delayed ACK (up to 40 ms a write)."""
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the demo's terminal clean."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") != ROUTE:
            send_json(self, 404, error_body(404, f"no route {self.path}; POST {ROUTE}"))
            return
        try:
            body = json.loads(raw)
        except ValueError as error:
            send_json(self, 400, error_body(400, f"the request body is not JSON ({error})"))
            return
        if not isinstance(body, dict):
            send_json(self, 400, error_body(400, "the request body is not a JSON object"))
            return
        try:
            self._stream(body)
        except ConnectionError:  # the client left mid-stream (a kill, a timeout)
            self.close_connection = True

    def _stream(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        send_head(self, 200, "text/event-stream")
        for frame in owner.responder(body):
            write_chunk(self.wfile, sse_event(frame))
            if owner.stopping.wait(owner.delay):
                self.close_connection = True
                return
        write_chunk(self.wfile, DONE)
        end_body(self.wfile)


class OwnedServer(ThreadingHTTPServer):
    """A threading HTTP server that knows the LoopbackServer it serves for."""

    daemon_threads = True
    block_on_close = False
    owner: Any
    """The LoopbackServer serving through this socket; handlers read their settings there."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that leaves between requests is normal; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """An HTTP server on loopback in a daemon thread; a context manager that starts and stops it.

    `handler` reaches this object as `self.server.owner`; `stopping` tells a reply
    in progress to end.
    """

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.stopping = threading.Event()
        self._http = OwnedServer((host, port), handler)
        self._http.owner = self
        self._thread = threading.Thread(target=self._http.serve_forever, args=(poll,), daemon=True)

    @property
    def base_url(self) -> str:
        """The URL a client is configured with (`http://127.0.0.1:PORT/v1`)."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; a reply in progress ends at its next chunk."""
        self.stopping.set()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ModelServer(LoopbackServer):
    """The demo's model server: streams what `responder` yields for each request."""

    def __init__(
        self, responder: Responder, *, delay: float = 0.04, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        super().__init__(_Handler, host=host, port=port)
        self.responder = responder
        self.delay = delay
        """Seconds between two chunks of a reply."""
