"""The OpenAI-compatible provider: one streamed chat completion per call, over httpx.

It works against anything that speaks `POST {base_url}/chat/completions` with
`stream: true` and answers with server-sent events (`data: {chunk}` lines,
`data: [DONE]` at the end): OpenAI, OpenRouter, NovelAI's OpenAI-compatible
endpoint, llama.cpp's server, vLLM, Ollama. `docs/providers.md` is the guide.

Theory of operation. `stream` builds the request body from the `StreamRequest`
(`build_body`), opens the stream, and runs the hot loop (`_Stream.take`): SSE
lines are split from the body by hand (`_Lines`; `_body` undoes a gzip or
deflate coding in bounded pieces, where httpx would decode without a bound),
each data payload goes through JSON's C scanner once (what `json.loads` runs)
and is folded into the `_Stream` accumulator, which returns the chunk's
visible text for delivery. Nothing is built per chunk but what the chunk
itself carries; a chunk the scanner refuses, or one that may break the JSON
policy where the scanner does not look (more brackets than its depth allows,
the escape of a surrogate), is decided by the policy
(`toolloop.states.json_policy`). When the
model is done (the event with the finish reason, `[DONE]`, a verbatim call)
or the body ends, the accumulator decides the result (`_Stream.result`).
Every failure the caller can act on (HTTP status, transport errors, malformed
chunks, a stream cut short) becomes a `StreamResult` with a `StreamError`,
its quotes of server text masked for the API key, credential headers and the
base URL's user and password (`_Quoter`), which go as a header, never in a URL; cancellation
is not caught: leaving the `async with` closes the response, and with it the
connection.

The request body (see `build_body`):

* a context item of kind `message` is a `user` message, or an `assistant`
  message when its author is the turn's persona; a user message is prefixed
  `"{author}: "`, and the reference lines of revealed metadata come first;
  a user message with images is in the content-part form (its text, then an
  `image_url` part per image); a host adds images only when the provider
  `accepts_images`;
* an item of kind `system` is a `system` message as is; any other kind
  (enrichment) is a `system` message headed `[{kind}]`;
* each tail directive is a `system` message after the context;
* each history entry is an assistant message with `tool_calls` whose content is
  the entry's pre-tool text ("" when none, never null), then the `tool`
  message with the JSON result;
* the text of the accumulated model parts is a final assistant message (prefill);
* the tools are `tools: [{"type": "function", "function": {...}}]`.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import json
import logging
import os
import re
import secrets
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import anyio
import attrs
import httpx

from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.engine.verbatim import VerbatimCall, VerbatimToolCallParser
from toolloop.states import (
    ApiFamily,
    ContextItem,
    FunctionCall,
    JsonObject,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolHistoryEntry,
    ToolSpec,
)
from toolloop.states.errors import InvalidOption
from toolloop.states.json_policy import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    JsonInputError,
    check_json,
    loads,
    refuse_constant,
)

log = logging.getLogger(__name__)

#: The chat-completions route, appended to `base_url`.
CHAT_PATH = "/chat/completions"
#: Connect, write and pool limits; no read timeout: the loop's rolling inactivity
#: timer (STREAM_SDK_CALL_TIMEOUT_MS) decides when a silent stream is dead.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=None)
#: Body keys the adapter owns; `extra_body` may not set them.
RESERVED_BODY_KEYS = frozenset({"messages", "stream", "tools"})
#: Body keys that servers reject when no tools are sent.
TOOL_ONLY_BODY_KEYS = ("tool_choice", "parallel_tool_calls")
#: How long the body may stay open after `[DONE]` before its connection is dropped.
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
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


#: The C scanner behind `json.loads`, called directly: `loads` adds three Python
#: frames and an encoding check per chunk, a third of the per-chunk cost. It refuses
#: NaN and Infinity, as the JSON policy (states/json_policy.py) does.
_DECODER: Any = json.JSONDecoder(parse_constant=refuse_constant)  # Any: no `scan_once` in typeshed
_scan_json: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once
#: How much of an offending payload or error body a message quotes.
EXCERPT_CHARS = 300
#: What stands in an error message where the API key was.
KEY_MASK = "***"
#: A message cut inside an echoed key ends in a prefix of it: one this long or longer is masked.
MIN_KEY_PREFIX = 4
#: HTTP statuses after which another attempt (or provider) may well succeed.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
#: Failures before any response byte that a dead pooled connection causes: sent once more.
STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
#: A pydantic validation report: llama-cpp-python sends it as HTTP 500, but the same request
#: can only fail again, so it is not retryable.
VALIDATION_ERROR = re.compile(r"\d+ validation errors?\b")
#: Delta keys folded explicitly; the others are opaque passthrough.
KNOWN_DELTA_KEYS = frozenset({"role", "content", "tool_calls", "reasoning", "reasoning_content"})
#: Fragment keys of a tool call folded explicitly; the others are opaque passthrough.
KNOWN_FRAGMENT_KEYS = frozenset({"index", "id", "type", "function"})


class OpenAICompatProvider:
    """A `Provider` for OpenAI-compatible chat-completions endpoints.

    The API key is given as a value (`api_key`) or read once from the
    environment variable named by `api_key_env`; it is sent as a bearer token
    and never appears in a repr, a log line or an error message. Pass `client`
    to share a connection pool; otherwise the provider owns its client and
    closes it in `aclose()` (or as an async context manager). `accepts_images`
    says the model reads images (its descriptor tells the host to send them).
    """

    __slots__ = (
        "_api_key",
        "_client",
        "_descriptor",
        "_extra_body",
        "_headers",
        "_max_buffer_chars",
        "_owns_client",
        "_secrets",
        "_timeout",
        "_url",
        "model",
    )

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        api_family: ApiFamily = ApiFamily.CUSTOM,
        name: str | None = None,
        server: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        verbatim_tool_call_max_buffer_chars: int = 8_192,
        accepts_images: bool = False,
    ) -> None:
        self.model = model
        endpoint = httpx.URL(base_url.rstrip("/") + CHAT_PATH)
        self._url = str(endpoint.copy_with(userinfo=b""))
        """The endpoint without a user or password (sent as a header, never shown or logged)."""
        self._api_key = _resolve_key(api_key, api_key_env)
        self._descriptor = ProviderDescriptor(
            name=name or api_family.value,
            api_family=api_family,
            server=server,
            endpoint=_without_credentials(self._url),
            accepts_images=accepts_images,
        )
        login = _basic_auth(endpoint, self._api_key)
        self._headers = _headers(self._api_key, {**login, **(headers or {})})
        self._secrets = _secrets(self._api_key, self._headers, endpoint)
        self._extra_body = _checked_extra_body(extra_body or {})
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._timeout = timeout
        self._max_buffer_chars = verbatim_tool_call_max_buffer_chars

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return (
            f"OpenAICompatProvider(name={self._descriptor.name!r}, "
            f"api_family={self._descriptor.api_family.value!r}, url={self._url!r}, "
            f"model={self.model!r}, api_key={key}, headers={sorted(self._headers)!r})"
        )

    @property
    def descriptor(self) -> ProviderDescriptor:
        """Which provider this is; policies read its API family."""
        return self._descriptor

    async def aclose(self) -> None:
        """Close the HTTP client, if this provider made it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAICompatProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Run one streamed chat completion and report how it ended."""
        body = build_body(request, self.model, self._extra_body)
        state = _Stream(self._parser(request), self._quoter)
        try:
            async with self._response(body) as response:
                refusal = await self._refusal(response)
                if refusal is not None:
                    return state.failed(refusal)
                await _consume(_body(response), state, sink)
                if state.cut_off:
                    _drop_connection(response)
            await state.flush(sink)
        except httpx.TransportError as exc:
            return state.failed(_transport_error(exc, self._url))
        except _StreamBroken as exc:
            return state.failed(exc.error)
        except UnicodeDecodeError as exc:
            message = f"the body is not UTF-8 after chunk {state.chunks} ({exc.reason})"
            return state.failed(StreamError(type="malformed_chunk", message=message))
        return state.result()

    @contextlib.asynccontextmanager
    async def _response(self, body: JsonObject) -> AsyncIterator[httpx.Response]:
        """The streamed response, sent once more when a pooled connection turns out dead.

        A server may close a kept-alive connection while it sits in the pool
        (llama-cpp-python does after a stream it broke off); the request then
        fails before any response byte, and a fresh connection is the remedy.
        """
        request = self._client.build_request(
            "POST", self._url, json=body, headers=self._headers, timeout=self._timeout
        )
        # Only what `_body` decodes, whatever the client's defaults or the extra headers say.
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        try:
            response = await self._client.send(request, stream=True)
        except STALE_CONNECTION_ERRORS as exc:
            shown = self._quoter.mask(str(exc))
            log.info("POST %s failed before a response (%s); sending it again", self._url, shown)
            response = await self._client.send(request, stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    def _parser(self, request: StreamRequest) -> VerbatimToolCallParser | None:
        """The verbatim parser for this attempt, or None when it does not qualify (SPEC 10)."""
        if not (request.verbatim and request.tools):
            return None
        tools = {tool.name: tool.parameters for tool in request.tools}
        return VerbatimToolCallParser(tools=tools, max_buffer_chars=self._max_buffer_chars)

    async def _refusal(self, response: httpx.Response) -> StreamError | None:
        """The error for a response that is not a stream: an HTTP error, a redirect, a page.

        A 2xx is a stream when it says so (`text/event-stream`) or says nothing;
        any other content type (JSON: the server ignored `stream`; an HTML page
        from a proxy or a login wall) is quoted, never read as events.
        """
        status = response.status_code
        content_type = response.headers.get("content-type", "")
        media_type = content_type.partition(";")[0].strip().lower()
        if 300 <= status < 400:
            location = self._quoter.quote(response.headers.get("location", "nowhere (no Location)"))
            message = (
                f"HTTP {status} from {self._url}: redirected to {location} "
                "(redirects are not followed: set base_url to where the endpoint is)"
            )
            return StreamError(type="http_status", message=message, retryable=False)
        if status < 400 and media_type in ("text/event-stream", ""):
            return None
        detail = self._quoter.error_detail(await _read_excerpt(response))
        if status >= 400:
            retryable = status in RETRYABLE_STATUSES or (
                status >= 500 and not VALIDATION_ERROR.match(detail)
            )
            message = f"HTTP {status} from {self._url}: {detail}{self._hint(status)}"
            return StreamError(type="http_status", message=message, retryable=retryable)
        what = (
            "a JSON body" if media_type == "application/json" else self._quoter.quote(content_type)
        )
        message = f"{self._url} answered with {what} instead of an event stream: {detail}"
        return StreamError(type="not_a_stream", message=message, retryable=False)

    def _hint(self, status: int) -> str:
        """What to check for the statuses a misconfiguration causes; empty for any other."""
        if status in (401, 403):
            return " (is the API key right, and allowed to use this model?)"
        if status == 404:
            root = self._url.removesuffix(CHAT_PATH)
            return f" (is the model {self.model!r} served at {root}, and is that the API's root?)"
        return ""

    @property
    def _quoter(self) -> _Quoter:
        return _Quoter(secrets=self._secrets)


def _resolve_key(api_key: str | None, api_key_env: str | None) -> str | None:
    """The API key from its value or its environment variable (never both), fit for a header."""
    if api_key is not None and api_key_env is not None:
        raise InvalidOption("give api_key or api_key_env, not both")
    if api_key_env is None:
        return None if api_key is None else _header_value(api_key, "the API key")
    value = os.environ.get(api_key_env, "").strip()
    if not value:
        raise InvalidOption(f"environment variable {api_key_env} (the API key) is not set")
    return _header_value(value, f"the API key in environment variable {api_key_env}")


def _header_value(value: str, what: str) -> str:
    """`value` without surrounding whitespace, refused when an HTTP header cannot carry the rest.

    Whitespace around a key is never part of it (a key read from a file ends in a
    newline). Anything else outside printable ASCII would fail later, in httpx or
    h11, with an error that quotes the whole header, key and all; the refusal
    here names the position and never the value.
    """
    value = value.strip()
    for position, char in enumerate(value):
        if not " " <= char <= "~":
            raise InvalidOption(
                f"{what} has a character an HTTP header cannot carry at position {position} "
                f"(U+{ord(char):04X}; only printable ASCII is allowed); the value is not shown"
            )
    return value


def _headers(api_key: str | None, extra: Mapping[str, str]) -> dict[str, str]:
    """The request headers: event-stream accept, bearer token, then the extra headers."""
    headers = {"Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    checked = {name: _header_value(value, f"header {name!r}") for name, value in extra.items()}
    return {**headers, **checked}


def _basic_auth(url: httpx.URL, api_key: str | None) -> dict[str, str]:
    """The base URL's user and password as a Basic `Authorization` header (as httpx would
    send them, but with a URL that httpx's own log line then shows without them)."""
    if not url.userinfo:
        return {}
    if api_key:
        raise InvalidOption("give the API key or a user and password in base_url, not both")
    token = base64.b64encode(f"{url.username}:{url.password or ''}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}


#: Header names whose values are credentials: masked wherever server text is quoted.
SECRET_HEADER = re.compile(r"auth|key|token|secret|password|cookie|session|signature", re.I)


def _secrets(api_key: str | None, headers: Mapping[str, str], url: httpx.URL) -> tuple[str, ...]:
    """What `_Quoter` masks, longest first (a secret containing another is masked whole).

    The key; each credential header's value (`api-key`), and what follows its
    scheme (`Authorization: Basic ...`); the base URL's password, or its user
    when it has no password (a token given as the user), as written and decoded.
    One shorter than MIN_KEY_PREFIX characters would mask ordinary words: it is left.
    """
    found = {api_key or ""}
    for name, value in headers.items():
        if SECRET_HEADER.search(name):
            found |= {value, value.partition(" ")[2]}
    user, _, password = url.userinfo.decode("ascii").partition(":")
    found |= {password, url.password or ""} if url.password else {user, url.username}
    return tuple(sorted((one for one in found if len(one) >= MIN_KEY_PREFIX), key=len)[::-1])


def _checked_extra_body(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The extra body parameters, refusing the keys the adapter builds itself."""
    clash = sorted(RESERVED_BODY_KEYS & extra.keys())
    if clash:
        raise InvalidOption(f"extra_body may not set {', '.join(clash)}: the adapter builds them")
    return dict(extra)


# -- the request body ------------------------------------------------------------------------


def build_body(request: StreamRequest, model: str, extra_body: Mapping[str, Any]) -> JsonObject:
    """The chat-completions request body of one stream (mapping in the module docstring)."""
    once = request.once
    messages = [
        *(context_message(item, request.turn.persona.name) for item in once.context),
        *({"role": "system", "content": text} for text in once.tail_directives),
        *history_messages(once.function_history),
        *prefill_messages(once.accumulated_model_parts),
    ]
    body: JsonObject = {"model": model, "messages": messages, "stream": True, **extra_body}
    if request.tools:
        body["tools"] = [tool_schema(tool) for tool in request.tools]
    else:
        for key in TOOL_ONLY_BODY_KEYS:
            body.pop(key, None)
    return body


def context_message(item: ContextItem, persona_name: str) -> JsonObject:
    """One context item as a chat message."""
    text = _as_text(item.content)
    if item.kind == "system":
        return {"role": "system", "content": text}
    if item.kind != "message":
        return {"role": "system", "content": f"[{item.kind}]\n{text}"}
    if item.author == persona_name:
        return {"role": "assistant", "content": _with_references(item, text)}
    spoken = _with_references(item, f"{item.author}: {text}" if item.author else text)
    if not item.images:
        return {"role": "user", "content": spoken}
    images = [{"type": "image_url", "image_url": {"url": url}} for url in item.images]
    return {"role": "user", "content": [{"type": "text", "text": spoken}, *images]}


def _with_references(item: ContextItem, text: str) -> str:
    """The text under the reference lines of revealed metadata (SPEC 6a), if any."""
    metadata = item.metadata or {}
    lines = [str(line) for line in metadata.get("references", ())]
    if metadata.get("reply_to") is not None:
        lines.append(f"(in reply to {metadata['reply_to']})")
    return "\n".join([*lines, text])


def _as_text(content: Any) -> str:
    """Content as message text: strings as they are, anything else as JSON."""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def history_messages(history: tuple[ToolHistoryEntry, ...]) -> Iterator[JsonObject]:
    """Each reply's calls as one assistant turn, then one tool message per call.

    The assistant turn carries every call the model made in that reply (the
    entries of a batch, `same_turn`) with the pre-tool text; the `tool`
    messages follow in the same order, each matched to its call by id.
    """
    turn: JsonObject | None = None
    replies: list[JsonObject] = []
    for number, entry in enumerate(history):
        call = entry.function_call
        call_id = call_id_of(call, number)
        tool_call = {
            **call.passthrough.get("tool_call", {}),
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args or {})},
        }
        if turn is None or not entry.same_turn:
            if turn is not None:
                yield turn
                yield from replies
            turn = {
                **call.passthrough.get("message", {}),
                "role": "assistant",
                "content": _parts_text(entry.pre_tool_call_text_parts or ()),
                "tool_calls": [],
            }
            replies = []
        turn["tool_calls"].append(tool_call)
        result = json.dumps(entry.response, ensure_ascii=False)
        replies.append({"role": "tool", "tool_call_id": call_id, "content": result})
    if turn is not None:
        yield turn
        yield from replies


def call_id_of(call: FunctionCall, number: int) -> str:
    """The call's id (the provider's, or the one the adapter made), or `call_{number}`
    (its place in the history) for a call that came without one."""
    if call.call_id:
        return call.call_id
    passed = call.passthrough.get("id")
    return passed if isinstance(passed, str) and passed else f"call_{number}"


def prefill_messages(parts: tuple[JsonObject, ...]) -> Iterator[JsonObject]:
    """The accumulated model parts as the model's own last turn (SPEC 3), when not blank.

    They are what the model said earlier in this attempt that no history entry
    owns (the text of a stream that ended in a context restart): ending the
    messages with it as an `assistant` turn tells the model it already said
    it, and a server that continues a trailing assistant turn (llama.cpp) picks
    up right after it.
    """
    text = _parts_text(parts)
    if text.strip():
        yield {"role": "assistant", "content": text}


def model_parts(text: str) -> tuple[JsonObject, ...]:
    """A stream's visible text as its model parts: one text part, none when blank (SPEC 3)."""
    return ({"type": "text", "text": text},) if text.strip() else ()


def _parts_text(parts: tuple[JsonObject, ...]) -> str:
    """The joined text of the `{"type": "text", "text": ...}` parts; other parts are skipped."""
    return "".join(
        part["text"]
        for part in parts
        if part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def tool_schema(tool: ToolSpec) -> JsonObject:
    """A tool as the `tools` array wants it."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


# -- the stream ------------------------------------------------------------------------------


class _StreamBroken(Exception):
    """The stream cannot go on; `error` says why (malformed, cut short, provider error)."""

    def __init__(self, error: StreamError) -> None:
        super().__init__(error.message)
        self.error = error


def _drop_connection(response: httpx.Response) -> None:
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


async def _consume(blocks: AsyncIterator[bytes], state: _Stream, sink: StreamSink) -> None:
    """Decode the SSE body and fold every event into `state`, until the model is done.

    The model is done at `[DONE]` or at the event that carries the choice's
    finish reason: that event ends the choice's data, so what may follow (a
    usage chunk, `[DONE]`, the body's end) is only drained, and a server that
    holds the body open after it cannot keep the reply waiting. A verbatim call
    does not end the stream: a later one may follow (SPEC 6b).
    """
    lines = _Lines(state)
    async for block in blocks:
        if await state.take(lines.split(block), sink):
            await _drain(blocks)
            return
    await state.take(lines.end(), sink)


async def _drain(blocks: AsyncIterator[bytes]) -> None:
    """Read the body's end after the model is done, so its connection goes back to the pool.

    Closing a body before its last chunk closes the connection, and every model
    call would pay a new connection (a TLS handshake, for a remote provider).
    Anything after the end is ignored; a server that holds the body open past
    DRAIN_SECONDS, or breaks the connection meanwhile, loses the connection,
    never the reply.
    """
    with anyio.move_on_after(DRAIN_SECONDS), contextlib.suppress(httpx.TransportError):
        async for _ in blocks:
            pass


def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes, a gzip or deflate coding undone within MAX_EXPANSION."""
    coding = response.headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return response.aiter_raw()
    if coding not in CONTENT_CODINGS:
        message = (
            f"the body's Content-Encoding is {coding!r}; only {ACCEPT_ENCODING} "
            "(what the request accepts) is decoded"
        )
        raise _StreamBroken(StreamError(type="content_encoding", message=message))
    return _inflated(response.aiter_raw(), _Inflate(coding))


async def _inflated(raw: AsyncIterator[bytes], inflate: _Inflate) -> AsyncIterator[bytes]:
    """The decoded pieces of a compressed body; between two pieces of one block, a checkpoint.

    A block that decodes to many pieces is read on without a pause otherwise,
    and cancellation (a kill, the inactivity timeout) only lands at a checkpoint.
    """
    async for block in raw:
        for number, piece in enumerate(inflate.decode(block)):
            if number:
                await anyio.lowlevel.checkpoint()
            yield piece


class _Inflate:
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
                self._zlib = zlib.decompressobj(self._wbits or _deflate_wbits(data))
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
            raise _StreamBroken(StreamError(type="content_encoding", message=message)) from None
        self.produced += len(piece)
        if self.produced > MAX_EXPANSION * self.received + EXPANSION_ALLOWANCE:
            message = (
                f"the {self._coding} body expands more than {MAX_EXPANSION}-fold "
                f"({self.received} bytes decoded to {self.produced} so far): refused as a "
                "decompression bomb"
            )
            raise _StreamBroken(StreamError(type="content_encoding", message=message))
        return piece


def _deflate_wbits(head: bytes) -> int:
    """zlib's window bits for a deflate body: zlib-wrapped when its first two bytes say so (RFC
    1950: method 8, a header divisible by 31), else raw, as some servers send it."""
    if head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return zlib.MAX_WBITS
    return -zlib.MAX_WBITS


class _Lines:
    """Splits the body into text lines, UTF-8 decoded across block boundaries.

    A line ends at CRLF, LF or CR, as SSE allows, and a byte order mark at the
    start of the body is dropped, as SSE says (`utf-8-sig`). The start of a
    line that spans blocks is held as a list of pieces and joined once when its
    end arrives, so reading a line is linear in its length however it is split.
    """

    __slots__ = ("_after_cr", "_decode", "_held", "_held_chars", "_state")

    def __init__(self, state: _Stream) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8-sig")().decode
        self._held: list[str] = []  # Invariant: the text after the last line end seen.
        self._held_chars = 0
        self._after_cr = False  # The last text ended in CR: an LF next is part of that line end.
        self._state = state

    def split(self, block: bytes) -> list[str]:
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
            raise _StreamBroken(self._state.malformed(too_long))

    def end(self) -> list[str]:
        """The last line, then a blank one: an event without its blank line still counts."""
        return ["".join((*self._held, self._decode(b"", final=True))), ""]


@attrs.define(kw_only=True)
class _CallParts:
    """One native tool call being assembled from its `delta.tool_calls` fragments."""

    id: str = ""
    names: list[str] = attrs.field(factory=list)
    """The name's pieces, as a name that streams in pieces came (`name` joins them)."""
    name_chars: int = 0
    arguments: list[str] = attrs.field(factory=list)
    extras: JsonObject = attrs.field(factory=dict)
    """Opaque fragment fields (e.g. a thought signature), replayed with the call."""

    @property
    def name(self) -> str:
        """The name so far; its pieces are joined once and kept joined."""
        if len(self.names) > 1:
            self.names[:] = ["".join(self.names)]
        return self.names[0] if self.names else ""

    def add(self, fragment: JsonObject, where: _Where) -> None:
        """Fold one fragment; an id or name repeated in every fragment is kept once."""
        call_id = fragment.get("id")
        if call_id is not None and not self.id:
            self.id = where.string(call_id, "id")
        function = fragment.get("function")
        if function is not None:
            self._add_function(where.object(function, "function"), where)
        if not fragment.keys() <= KNOWN_FRAGMENT_KEYS:
            _fold_extras(self.extras, fragment, KNOWN_FRAGMENT_KEYS)

    def _add_function(self, function: JsonObject, where: _Where) -> None:
        name = function.get("name")
        if name:
            name = where.string(name, "function.name")
            # llama-cpp-python repeats the whole name; only a piece as long as the name so far
            # can be it, so comparing (and joining the pieces) stays linear in what arrived.
            if len(name) != self.name_chars or name != self.name:
                self.names.append(name)
                self.name_chars += len(name)
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if arguments:
            self.arguments.append(where.string(arguments, "function.arguments"))

    def call(
        self, message_extras: JsonObject, cut_short: bool, quote: _Quoter
    ) -> FunctionCall | StreamError:
        """The finished call; `cut_short` when the stream ended on `length` inside it.

        Its arguments and passthrough fields are checked against the JSON policy
        (states/json_policy.py): they go to a tool and back to the model.
        """
        passthrough: JsonObject = {"id": self.id} if self.id else {}
        if self.extras:
            passthrough["tool_call"] = _joined(self.extras)
        if message_extras:
            passthrough["message"] = _joined(message_extras)
        text = "".join(self.arguments)
        where = f"tool call {self.name!r} arguments"
        args: Any = {} if cut_short else None
        truncated = cut_short and not text.strip()
        try:
            if text.strip():
                args = _DECODER.decode(text)
        except json.JSONDecodeError:  # Cut short: the pairs that arrived whole.
            args, truncated = complete_pairs(text), True
        except (ValueError, RecursionError):  # NaN, Infinity or too deep: the policy says which.
            try:
                args = loads(text, where=where)
            except JsonInputError as error:
                return _malformed_call(str(error))
        if args is not None and not isinstance(args, dict):
            kind = type(args).__name__
            return _malformed_call(
                f"tool call {self.name!r}: the arguments must be a JSON object, got {kind} "
                f"{quote.quote(text, 80)}"
            )
        try:
            check_json(args, where=where)
            check_json(passthrough, where=f"tool call {self.name!r} fields")
        except JsonInputError as error:
            return _malformed_call(str(error))
        return FunctionCall(
            name=self.name,
            args=args,
            passthrough=passthrough,
            arguments_truncated=truncated,
            call_id=self.id or f"call_{secrets.token_hex(12)}",  # unique within the turn
        )


def _carries_arguments(fragment: JsonObject) -> bool:
    """Whether a (checked) tool-call fragment carries a piece of its call's arguments."""
    function = fragment.get("function") or {}
    return bool(function.get("arguments"))


def _malformed_call(message: str) -> StreamError:
    return StreamError(type="malformed_tool_call", message=message, retryable=True)


@attrs.define
class _Pieces:
    """An opaque string field as it streams in: its pieces, joined once by `_joined`.

    Concatenating each piece onto the rest would copy the field again for every
    piece, a cost quadratic in its length.
    """

    pieces: list[str]


def _fold_extras(into: JsonObject, source: JsonObject, known: frozenset[str]) -> None:
    """Accumulate opaque fields: lists extend, strings concatenate, other values replace."""
    for key, value in source.items():
        if value is None or key in known:
            continue
        held = into.get(key)
        if isinstance(value, str):
            if isinstance(held, _Pieces):
                held.pieces.append(value)
            else:
                into[key] = _Pieces([value])
        elif isinstance(value, list) and isinstance(held, list):
            held.extend(value)
        else:
            into[key] = list(value) if isinstance(value, list) else value


def _joined(extras: JsonObject) -> JsonObject:
    """Accumulated opaque fields as they are replayed: each string's pieces joined."""
    return {
        key: "".join(value.pieces) if isinstance(value, _Pieces) else value
        for key, value in extras.items()
    }


@attrs.define
class _Where:
    """Type checks that name the chunk and the field a malformed value came in."""

    chunk: int
    prefix: str
    quote: _Quoter

    def string(self, value: Any, field: str) -> str:
        if type(value) is not str:
            raise self.broken(field, "a string", value)
        return value

    def object(self, value: Any, field: str) -> JsonObject:
        if type(value) is not dict:
            raise self.broken(field, "an object", value)
        return value

    def broken(self, field: str, expected: str, value: Any) -> _StreamBroken:
        message = (
            f"malformed chunk {self.chunk}: `{self.prefix}{field}` must be {expected}, "
            f"got {type(value).__name__} {self.quote.quote(repr(value))}"
        )
        return _StreamBroken(StreamError(type="malformed_chunk", message=message, retryable=True))


class _Stream:
    """What one stream has delivered so far; folds chunks, then decides the result."""

    __slots__ = (
        "calls",
        "chunks",
        "data",
        "done",
        "extras",
        "finish_reason",
        "more_data",
        "more_data_chars",
        "moved",
        "parser",
        "quote",
        "reasoning",
        "text",
        "verbatim_calls",
    )

    def __init__(self, parser: VerbatimToolCallParser | None, quote: _Quoter) -> None:
        self.parser = parser
        self.quote = quote
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _CallParts] = {}
        self.extras: JsonObject = {}  # Opaque message fields, e.g. OpenRouter's reasoning_details.
        self.finish_reason: str | None = None
        self.chunks = 0
        self.done = False  # `data: [DONE]` arrived.
        self.data: str | None = None  # The first data line of the event being read.
        self.more_data: list[str] = []  # Its later data lines, joined once at its end.
        self.more_data_chars = 0
        self.moved = False  # The chunk just folded made progress without text (`_fold_rest`).
        self.verbatim_calls: list[FunctionCall] = []
        """The calls the verbatim parser recovered from the text, in the order written."""

    async def take(self, lines: list[str], sink: StreamSink) -> bool:
        """Fold the events these lines complete and deliver their text; True once done.

        Done is `[DONE]`, a verbatim call, or the event with the finish reason.
        Progress (the inactivity timer's restart) is what the model made: text,
        reasoning, a piece of a call, the finish; a chunk that carries nothing
        (`{"choices": []}`, an empty delta) is not, or a server could keep a
        turn alive forever without answering.
        The hot loop: every chunk passes here, so names are bound to locals.
        """
        data, more_data, fold, progress = self.data, self.more_data, self.fold, sink.progress
        # Without a verbatim parser, text goes straight to the sink (one coroutine less a chunk).
        deliver, keep = sink.deliver if self.parser is None else None, self.text.append
        for line in lines:
            if not line:
                # A blank line ends the event; one without data (`data:`) is skipped.
                if data is None:
                    continue
                if more_data:
                    data = self.joined(data)
                payload, data = data.strip(), None
                if not payload:
                    continue
                if payload == "[DONE]":
                    self.done = True
                    return True
                text = fold(payload)
                if text:
                    progress()
                    if deliver is not None:
                        keep(text)
                        await deliver(text)
                    elif await self.show(text, sink):
                        return True
                elif self.moved:
                    self.moved = False
                    progress()
                if self.finish_reason is not None:
                    progress()
                    return True
            elif line.startswith("data:"):
                if data is None:
                    data = line[5:]
                else:
                    self.add_data(line[5:], len(data))
            # Comments (`: keep-alive`), `event:`, `id:` and `retry:` lines are ignored.
        self.data = data
        return False

    def add_data(self, line: str, first_chars: int) -> None:
        """Hold one more data line of the event (SSE joins them with newlines), within bounds."""
        self.more_data.append(line)
        self.more_data_chars += len(line) + 1
        if first_chars + self.more_data_chars > MAX_EVENT_CHARS:
            too_long = f"an SSE event's data exceeds {MAX_EVENT_CHARS} characters"
            raise _StreamBroken(self.malformed(too_long))

    def joined(self, first: str) -> str:
        """The data of an event of several lines, joined once: linear in its size."""
        data = "\n".join((first, *self.more_data))
        self.more_data.clear()
        self.more_data_chars = 0
        return data

    def fold(self, payload: str) -> str | None:
        """Fold one chunk; return its content text (hot path: plain content deltas)."""
        self.chunks += 1
        try:
            chunk, end = _scan_json(payload, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        # What the policy refuses and the scanner lets through is checked on the payload, far
        # cheaper than walking every chunk: nesting deeper than allowed needs as many brackets,
        # and a lone surrogate an escape of one (`\ud800`; raw, it is not UTF-8), searched for
        # only after a backslash (one character: found at memchr's speed, 150 times faster).
        if (
            end != len(payload)
            or payload.count("{") + payload.count("[") > MAX_JSON_DEPTH
            or ("\\" in payload and _SURROGATE_ESCAPE.search(payload))
        ):
            chunk = self._decoded(payload)
        if type(chunk) is not dict:
            raise self.where("").broken("chunk", "an object", chunk)
        if "error" in chunk:
            raise _StreamBroken(self._provider_error(chunk["error"]))
        choices = chunk.get("choices")
        if type(choices) is not list:
            raise self.where("").broken("choices", "a list", choices)
        if not choices:
            return None  # A usage chunk.
        choice = choices[0]
        if type(choice) is not dict:
            raise self.where("").broken("choices[0]", "an object", choice)
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finish_reason = self.where("choices[0].").string(finish, "finish_reason")
        delta = choice.get("delta")
        if delta is None:
            return None
        if type(delta) is not dict:
            raise self.where("choices[0].").broken("delta", "an object", delta)
        content = delta.get("content")
        if len(delta) > 1 or content is None:
            # Progress without text to deliver: `take` reports it (text is reported there).
            self.moved = self._fold_rest(delta) and not content
        if content is None or type(content) is str:
            return content
        raise self.where("choices[0].delta.").broken("content", "a string", content)

    def _decoded(self, payload: str) -> Any:
        """A payload the fast path refused or could not vouch for, decoded under the JSON policy."""
        try:
            return loads(payload, where="the data")
        except JsonInputError as error:
            quoted = self.quote.quote(repr(payload))
            raise _StreamBroken(self.malformed(f"the data {error.problem}: {quoted}")) from None

    def where(self, prefix: str) -> _Where:
        """Type checks for the fields under `prefix` of the current chunk."""
        return _Where(self.chunks, prefix, self.quote)

    def _fold_rest(self, delta: JsonObject) -> bool:
        """The rarer parts of a delta: tool-call fragments, reasoning, opaque fields.

        True when the model made progress: reasoning, a new call or a piece of a call's
        arguments (not a fragment that only repeats a call's id and name).
        """
        where = self.where("choices[0].delta.")
        moved = False
        fragments = delta.get("tool_calls")
        if fragments is not None:
            if type(fragments) is not list:
                raise where.broken("tool_calls", "a list", fragments)
            calls = len(self.calls)
            for position, fragment in enumerate(fragments):
                self._fold_fragment(fragment, position)
            moved = len(self.calls) > calls or any(map(_carries_arguments, fragments))
        for key in ("reasoning_content", "reasoning"):
            if delta.get(key) is not None:
                self.reasoning.append(where.string(delta[key], key))
                moved = moved or bool(delta[key])
        _fold_extras(self.extras, delta, KNOWN_DELTA_KEYS)
        return moved

    def _fold_fragment(self, fragment: Any, position: int) -> None:
        self.where("choices[0].delta.").object(fragment, f"tool_calls[{position}]")
        where = self.where(f"choices[0].delta.tool_calls[{position}].")
        index = fragment.get("index", position)
        if type(index) is not int:
            raise where.broken("index", "an integer", index)
        self.calls.setdefault(index, _CallParts()).add(fragment, where)

    async def show(self, text: str, sink: StreamSink) -> bool:
        """Deliver visible text through the verbatim parser, keeping each call it recovers.

        Always False: a call does not end the stream, since the model may write
        another (SPEC 6b). The parser hands out text or a call per feed, so it is
        fed `""` until it is dry.
        """
        assert self.parser is not None  # Without a parser, `take` delivers text itself.
        fed = self.parser.feed(text)
        while fed.function_call is not None or fed.visible_text:
            if fed.function_call is not None:
                self.verbatim_calls.append(_recovered(fed.function_call))
            else:
                await self._deliver(fed.visible_text, sink)
            fed = self.parser.feed("")
        return False

    async def flush(self, sink: StreamSink) -> None:
        """Release the text the verbatim parser still holds, and the calls it completes."""
        if self.parser is None:
            return
        flushed = self.parser.flush()
        while flushed.function_call is not None or flushed.pending_text:
            if flushed.function_call is not None:
                self.verbatim_calls.append(_recovered(flushed.function_call))
            else:
                await self._deliver(flushed.pending_text, sink)
            flushed = self.parser.flush()

    async def _deliver(self, text: str, sink: StreamSink) -> None:
        if text:
            self.text.append(text)
            await sink.deliver(text)

    @property
    def cut_off(self) -> bool:
        """The body ended with neither `[DONE]` nor a finish reason: the server broke it off."""
        return not self.done and self.finish_reason is None

    def result(self) -> StreamResult:
        """How the stream ended, from what it delivered and its finish reason."""
        finish = self.finish_reason
        if self.cut_off:
            return self.failed(self.cut_short())
        if self.verbatim_calls:
            calls = tuple(self.verbatim_calls)
            return self._ended(StreamStatus.FUNCTION_CALL, calls[0], calls)
        if finish == "content_filter":
            message = "the content filter stopped the reply (finish_reason content_filter)"
            return self.failed(StreamError(type="content_filter", message=message))
        if self.calls:
            return self._called(cut_short=finish == "length")
        if finish in ("tool_calls", "function_call"):
            message = f"finish_reason {finish} after {self.chunks} chunks, but no tool call arrived"
            return self.failed(StreamError(type="missing_tool_call", message=message))
        if self.text:
            return self._ended(StreamStatus.COMPLETED, None)
        return self._ended(StreamStatus.EMPTY_RESPONSE, None)

    def _called(self, cut_short: bool) -> StreamResult:
        """Every native call, in index order (SPEC 6b): one batch.

        A `length` finish cut the last call short; the ones before it arrived whole.
        """
        indices = sorted(self.calls)
        calls: list[FunctionCall] = []
        for index in indices:
            call = self.calls[index].call(
                self.extras, cut_short and index == indices[-1], self.quote
            )
            if isinstance(call, StreamError):
                return self.failed(call)
            calls.append(call)
        return self._ended(StreamStatus.FUNCTION_CALL, calls[0], tuple(calls))

    def _ended(
        self,
        status: StreamStatus,
        call: FunctionCall | None,
        calls: tuple[FunctionCall, ...] = (),
    ) -> StreamResult:
        text, reasoning = "".join(self.text), "".join(self.reasoning)
        return StreamResult(
            status=status,
            accumulated_text=text,
            data=call,
            thought_log={"text": reasoning} if reasoning else None,
            model_parts=model_parts(text),
            calls=calls if len(calls) > 1 else (),
        )

    def failed(self, error: StreamError) -> StreamResult:
        """An `error` result that keeps the text already delivered; the API key is masked."""
        text = "".join(self.text)
        return StreamResult(
            status=StreamStatus.ERROR,
            accumulated_text=text,
            data=attrs.evolve(error, message=self.quote.mask(error.message)),
            model_parts=model_parts(text),
        )

    def cut_short(self) -> StreamError:
        message = f"the stream closed after {self.chunks} chunks without [DONE] or a finish reason"
        return StreamError(type="incomplete_stream", message=message, retryable=True)

    def malformed(self, what: str) -> StreamError:
        message = f"malformed chunk {self.chunks}: {what}"
        return StreamError(type="malformed_chunk", message=message, retryable=True)

    def _provider_error(self, error: Any) -> StreamError:
        """An error the provider reported inside the stream (OpenRouter, vLLM do)."""
        detail = error.get("message", error) if isinstance(error, dict) else error
        code = error.get("code") if isinstance(error, dict) else None
        retryable = not (isinstance(code, int) and 400 <= code < 500 and code != 429)
        quoted = self.quote.quote(str(detail))
        message = f"chunk {self.chunks}: the provider reported an error: {quoted}"
        return StreamError(type="provider_error", message=message, retryable=retryable)


def _recovered(call: VerbatimCall) -> FunctionCall:
    """A call the verbatim parser recovered from text, as the loop's FunctionCall."""
    return FunctionCall(name=call.name, args=call.args, call_id=f"call_{secrets.token_hex(12)}")


# -- errors ----------------------------------------------------------------------------------

#: Transport failures, most specific first: (class, what happened).
_TRANSPORT_ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (httpx.ConnectTimeout, "connecting timed out"),
    (httpx.ConnectError, "could not connect"),
    (httpx.TimeoutException, "timed out"),
    (httpx.RemoteProtocolError, "the connection broke mid-stream"),
    (httpx.ReadError, "reading the stream failed"),
    (httpx.WriteError, "sending the request failed"),
    (httpx.UnsupportedProtocol, "the URL's scheme is not supported"),
)
_NOT_RETRYABLE = (httpx.UnsupportedProtocol, httpx.LocalProtocolError)


def _transport_error(exc: Exception, url: str) -> StreamError:
    """An httpx transport failure as a StreamError naming what broke and where."""
    what = next((text for cls, text in _TRANSPORT_ERRORS if isinstance(exc, cls)), "failed")
    message = f"POST {url}: {what}: {exc or type(exc).__name__}"
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        message += f" (is the server at {url.removesuffix(CHAT_PATH)} running?)"
    return StreamError(
        type=type(exc).__name__, message=message, retryable=not isinstance(exc, _NOT_RETRYABLE)
    )


def _without_credentials(url: str) -> str:
    """`url` as logs may show it: no user, password or query (where keys may ride)."""
    return str(httpx.URL(url).copy_with(username=None, password=None, query=None))


async def _read_excerpt(response: httpx.Response) -> str:
    """The beginning of a response body, enough to quote it in an error.

    A body that cannot be decoded is quoted as far as it went, or by what is wrong with it.
    """
    collected = b""
    try:
        async for block in _body(response):
            collected += block
            if len(collected) >= 4 * EXCERPT_CHARS:
                break
    except _StreamBroken as broken:
        if not collected:
            return broken.error.message
    return collected.decode("utf-8", "replace")


@attrs.frozen
class _Quoter:
    """Quotes server text in error messages with the secrets masked, even where a cut fell.

    The secrets are the API key, credential headers and the base URL's
    userinfo (`_secrets`). Each is masked whole before the text is cut to its
    excerpt, and a prefix of one left at the end of a message (a cut fell
    inside an echoed secret) is masked too, when MIN_KEY_PREFIX characters or longer.
    """

    secrets: tuple[str, ...]

    def mask(self, text: str) -> str:
        """`text` with every occurrence of a secret, and a prefix of one at the end, masked."""
        for secret in self.secrets:
            text = text.replace(secret, KEY_MASK)
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(text)), MIN_KEY_PREFIX - 1, -1):
                if text.endswith(secret[:size]):
                    return text[:-size] + KEY_MASK
        return text

    def quote(self, text: str, limit: int = EXCERPT_CHARS) -> str:
        """`text` masked, then cut to `limit` characters (and masked again at the cut)."""
        text = self.mask(text)
        return text if len(text) <= limit else self.mask(text[:limit]) + "..."

    def error_detail(self, body: str) -> str:
        """The `error.message` of an OpenAI-style error body, else an excerpt of the body."""
        try:
            error = loads(body, where="the error body").get("error")
        except (JsonInputError, AttributeError):
            return self.quote(body) or "(empty body)"
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return self.quote(error["message"])
        return self.quote(body)


# -- truncated arguments ---------------------------------------------------------------------

_WHITESPACE = " \t\n\r"


def complete_pairs(prefix: str) -> JsonObject:
    """The top-level key/value pairs that arrived whole in a prefix of a JSON object.

    A value is whole once a comma or the closing brace follows it, or, for a
    string, object, array or literal, once it is closed; a number needs
    something after it (`12` may be the start of `123`). Anything that is
    not an object prefix yields `{}`. Linear in the prefix: each value is
    decoded once.
    """
    found: JsonObject = {}
    pos = _skip(prefix, 0)
    if not prefix.startswith("{", pos):
        return found
    pos += 1
    while True:
        try:
            key, pos = _DECODER.raw_decode(prefix, _skip(prefix, pos))
            pos = _skip(prefix, pos)
            if not isinstance(key, str) or not prefix.startswith(":", pos):
                return found
            value, end = _DECODER.raw_decode(prefix, _skip(prefix, pos + 1))
        except (ValueError, RecursionError):  # RecursionError: nested too deep for the policy
            return found
        pos = _skip(prefix, end)
        if pos < len(prefix) and prefix[pos] not in ",}":
            return found  # Not a value after all: `1e` is the start of `1e16`.
        if end == len(prefix) and isinstance(value, int | float) and not isinstance(value, bool):
            return found
        found[key] = value
        if not prefix.startswith(",", pos):
            return found
        pos += 1


def _skip(text: str, pos: int) -> int:
    """The first position at or after `pos` that is not JSON whitespace."""
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos
