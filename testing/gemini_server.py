"""A loopback Gemini API server: streams what a responder yields, checks signatures as Gemini does.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` is answered with
one `data: {GenerateContentResponse}` event per object the responder yields
for the request body (there is no `[DONE]`: the body ends). The request is
first checked the way Gemini 3 checks it, so a test fails when an adapter
drops or moves a thought signature:

* the API key comes in the `x-goog-api-key` header (when the server has one),
  never as a `key=` query parameter;
* in every model turn, the first `functionCall` part carries a
  `thoughtSignature` ("Function call is missing a thought_signature in
  functionCall parts");
* a signature this server sent comes back on exactly the part it was sent on,
  byte for byte; `skip_thought_signature_validator` is accepted anywhere;
* a model turn with calls is followed by a user turn with as many
  `functionResponse` parts.

A refused request is an HTTP 400 with Google's error body. The server keeps
every request (`requests`) for tests to read.

    with GeminiServer(responder) as server:
        provider = GeminiProvider(base_url=server.base_url, model="m", api_key="")
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from toolloop.effects.providers.gemini_body import SKIP_SIGNATURE
from toolloop.testing.model_server import (
    LoopbackServer,
    end_body,
    send_head,
    send_json,
    write_chunk,
)

ROUTE = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")
MISSING_SIGNATURE = "Function call is missing a thought_signature in functionCall parts."
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)


@attrs.frozen
class GeminiError:
    """A responder's answer that is an HTTP error instead of a stream."""

    code: int
    status: str
    message: str


GeminiResponder = Callable[[dict[str, Any]], "Iterable[Mapping[str, Any] | bytes] | GeminiError"]
"""The chunk objects (or raw SSE bytes) answering one request body, or the error to send."""


@attrs.frozen
class GeminiRequest:
    """One request the server received."""

    model: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]


def sse_event(frame: Mapping[str, Any] | bytes) -> bytes:
    """A chunk as Gemini frames it (`data: {json}` and a CRLF blank line); bytes as they are."""
    if isinstance(frame, bytes):
        return frame
    return b"data: " + json.dumps(frame).encode() + b"\r\n\r\n"


def google_error(code: int, status: str, message: str) -> dict[str, Any]:
    """Google's error body."""
    return {"error": {"code": code, "message": message, "status": status}}


def signature_problem(body: dict[str, Any], issued: Mapping[str, str]) -> str | None:
    """Why Gemini would refuse these contents' signatures and responses; None when it would not.

    `issued` maps each signature the server sent to the part (canonical JSON) it came on.
    """
    contents = body.get("contents") or []
    for number, content in enumerate(contents):
        parts = content.get("parts") or []
        if content.get("role") != "model":
            continue
        for part in parts:
            signature = part.get("thoughtSignature")
            if signature is None or signature == SKIP_SIGNATURE:
                continue
            if issued.get(signature) != canonical(part):
                return f"contents[{number}]: thought signature does not match its part."
        calls = [part for part in parts if "functionCall" in part]
        if not calls:
            continue
        if "thoughtSignature" not in calls[0]:
            return f"contents[{number}].parts: {MISSING_SIGNATURE}"
        answer = contents[number + 1] if number + 1 < len(contents) else {}
        responses = [p for p in answer.get("parts") or () if "functionResponse" in p]
        if len(responses) != len(calls):
            return f"contents[{number + 1}]: {COUNT_MISMATCH}"
    return None


def canonical(part: Mapping[str, Any]) -> str:
    return json.dumps(part, sort_keys=True, ensure_ascii=False)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test and demo output clean."""

    def do_POST(self) -> None:
        owner: GeminiServer = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        url = urlsplit(self.path)
        route = ROUTE.match(url.path)
        if route is None:
            self._error(404, "NOT_FOUND", f"no route {url.path}")
            return
        try:
            body = json.loads(raw)
        except ValueError as error:
            self._error(400, "INVALID_ARGUMENT", f"the request body is not JSON ({error})")
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        owner.requests.append(GeminiRequest(route["model"], url.query, headers, body))
        problem = self._check(owner, url.query, headers, body)
        if problem is not None:
            self._error(*problem)
            return
        answer = owner.responder(body)
        if isinstance(answer, GeminiError):
            self._error(answer.code, answer.status, answer.message)
            return
        try:
            self._stream(owner, answer)
        except ConnectionError:  # the client left mid-stream (a kill, a timeout)
            self.close_connection = True

    def _check(
        self, owner: GeminiServer, query: str, headers: dict[str, str], body: Any
    ) -> tuple[int, str, str] | None:
        if "key" in parse_qs(query):
            return 400, "INVALID_ARGUMENT", "this server takes the key in x-goog-api-key only"
        if owner.api_key is not None and headers.get("x-goog-api-key") != owner.api_key:
            return 403, "PERMISSION_DENIED", "API key not valid. Please pass a valid API key."
        if parse_qs(query).get("alt") != ["sse"]:
            return 400, "INVALID_ARGUMENT", "this server streams only with alt=sse"
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return 400, "INVALID_ARGUMENT", "the body needs a contents list"
        problem = signature_problem(body, owner.issued)
        return None if problem is None else (400, "INVALID_ARGUMENT", problem)

    def _stream(self, owner: GeminiServer, frames: Iterable[Mapping[str, Any] | bytes]) -> None:
        send_head(self, 200, "text/event-stream")
        for frame in frames:
            if not isinstance(frame, bytes):
                owner.remember_signatures(frame)
            write_chunk(self.wfile, sse_event(frame))
            if owner.stopping.wait(owner.delay):
                self.close_connection = True
                return
        end_body(self.wfile)

    def _error(self, code: int, status: str, message: str) -> None:
        send_json(self, code, google_error(code, status, message))


class GeminiServer(LoopbackServer):
    """A Gemini API on loopback: streams `responder`'s chunks, refuses what Gemini would."""

    def __init__(
        self,
        responder: GeminiResponder,
        *,
        api_key: str | None = None,
        delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(_Handler, host=host, port=port)
        self.responder = responder
        self.api_key = api_key
        """The key a request must carry in `x-goog-api-key`; None: any or none."""
        self.delay = delay
        """Seconds between two chunks of a reply."""
        self.requests: list[GeminiRequest] = []
        self.issued: dict[str, str] = {}
        """Each thought signature sent, mapped to the part it came on (canonical JSON)."""

    @property
    def root_url(self) -> str:
        """The server's root, as the `google-genai` client's `base_url` wants it."""
        return super().base_url.removesuffix("/v1")

    @property
    def base_url(self) -> str:
        """The API root `GeminiProvider` is configured with (`http://127.0.0.1:PORT/v1beta`)."""
        return self.root_url + "/v1beta"

    def remember_signatures(self, chunk: Mapping[str, Any]) -> None:
        """Note every signed part of a chunk the server sends."""
        for candidate in chunk.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                signature = part.get("thoughtSignature")
                if isinstance(signature, str):
                    self.issued[signature] = canonical(part)
