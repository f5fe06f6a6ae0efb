"""What both HTTP providers share: the client's lifecycle, one streamed POST, its refusals.

`HttpProvider` holds the endpoint, the headers (credentials checked and masked,
`credentials.py`), the client (its own, closed by `aclose()` or as an async
context manager, or one the caller shares) and the descriptor. `_stream` runs
one request: the POST (sent once more when a pooled connection turns out
dead), the refusal of a response that is not a stream (an HTTP error with its
retryable flag, a redirect, a page), the body read through the shared SSE
reader (`sse.py`) into the subclass's fold, and every failure the caller can
act on as a `StreamResult` with a `StreamError`, its quotes of server text
masked. Cancellation is not caught: leaving the `async with` closes the
response, and with it the connection. A subclass builds the request body and
the fold, and may add a hint for the statuses a misconfiguration causes.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, Self

import httpx

from toolloop.effects.ports import StreamSink
from toolloop.effects.providers.credentials import (
    Quoter,
    basic_auth,
    checked_headers,
    secrets_of,
    without_credentials,
)
from toolloop.effects.providers.sse import (
    ACCEPT_ENCODING,
    StreamBroken,
    StreamFold,
    decoded_body,
    drop_connection,
    read_events,
    read_excerpt,
)
from toolloop.states import ApiFamily, JsonObject, ProviderDescriptor, StreamError, StreamResult
from toolloop.states.errors import InvalidOption

log = logging.getLogger(__name__)

#: Connect, write and pool limits; no read timeout: the loop's rolling inactivity
#: timer (STREAM_SDK_CALL_TIMEOUT_MS) decides when a silent stream is dead.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=None)
#: HTTP statuses after which another attempt (or provider) may well succeed; 5xx are too.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
#: Failures before any response byte that a dead pooled connection causes: sent once more.
STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
#: A pydantic validation report: llama-cpp-python sends it as HTTP 500, but the same request
#: can only fail again, so it is not retryable.
VALIDATION_ERROR = re.compile(r"\d+ validation errors?\b")
#: Transport failures, most specific first: (class, what happened).
TRANSPORT_ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (httpx.ConnectTimeout, "connecting timed out"),
    (httpx.ConnectError, "could not connect"),
    (httpx.TimeoutException, "timed out"),
    (httpx.RemoteProtocolError, "the connection broke mid-stream"),
    (httpx.ReadError, "reading the stream failed"),
    (httpx.WriteError, "sending the request failed"),
    (httpx.UnsupportedProtocol, "the URL's scheme is not supported"),
)
NOT_RETRYABLE = (httpx.UnsupportedProtocol, httpx.LocalProtocolError)


class StreamState(StreamFold, Protocol):
    """A provider's accumulator of one stream: its fold, then how the stream ended."""

    chunks: int

    @property
    def cut_off(self) -> bool:
        """The body ended before the model said it was done: the server broke it off."""

    async def flush(self, sink: StreamSink) -> None:
        """Deliver what the fold still holds once the body has ended."""

    def failed(self, error: StreamError) -> StreamResult:
        """An `error` result that keeps what was delivered, its message masked."""

    def result(self) -> StreamResult:
        """How the stream ended."""


class HttpProvider:
    """The lifecycle and the streamed POST shared by the HTTP providers (module docstring).

    `endpoint` is the base URL and the route; its user and password, if any, go
    as a Basic `Authorization` header and leave the URL. `key_headers` carry the
    API key (named by each provider), `headers` are the caller's extra ones.
    """

    __slots__ = (
        "_api_key",
        "_client",
        "_descriptor",
        "_extra_body",
        "_headers",
        "_owns_client",
        "_params",
        "_quoter",
        "_root",
        "_timeout",
        "_url",
        "model",
    )

    def __init__(
        self,
        *,
        base_url: str,
        route: str,
        model: str,
        api_key: str | None,
        key_headers: Mapping[str, str],
        name: str,
        api_family: ApiFamily,
        server: str | None,
        accepts_images: bool = False,
        headers: Mapping[str, str] | None,
        extra_body: Mapping[str, Any] | None,
        reserved_body_keys: frozenset[str],
        client: httpx.AsyncClient | None,
        timeout: httpx.Timeout,
        params: Mapping[str, str] | None = None,
    ) -> None:
        self.model = model
        endpoint = httpx.URL(base_url.rstrip("/") + route)
        self._url = str(endpoint.copy_with(userinfo=b""))
        """The endpoint without a user or password (sent as a header, never shown or logged)."""
        self._root = self._url.removesuffix(route)
        self._api_key = api_key
        self._descriptor = ProviderDescriptor(
            name=name,
            api_family=api_family,
            server=server,
            endpoint=without_credentials(self._url),
            accepts_images=accepts_images,
        )
        login = basic_auth(endpoint)
        extra = checked_headers({**login, **(headers or {})})
        self._headers = {"Accept": "text/event-stream", **key_headers, **extra}
        self._quoter = Quoter(secrets=secrets_of(api_key, self._headers, endpoint))
        """Masks every credential wherever a server's words are quoted."""
        self._extra_body = checked_extra_body(extra_body or {}, reserved_body_keys)
        self._params = dict(params or {})
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._timeout = timeout

    @property
    def descriptor(self) -> ProviderDescriptor:
        """Which provider this is; policies read its API family."""
        return self._descriptor

    async def aclose(self) -> None:
        """Close the HTTP client, if this provider made it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _stream(self, body: JsonObject, state: StreamState, sink: StreamSink) -> StreamResult:
        """POST `body`, fold the event stream into `state`, and report how it ended."""
        try:
            async with self._response(body) as response:
                refusal = await self._refusal(response)
                if refusal is not None:
                    return state.failed(refusal)
                await read_events(decoded_body(response), state, sink)
                if state.cut_off:
                    drop_connection(response)
            await state.flush(sink)
        except httpx.TransportError as exc:
            return state.failed(transport_error(exc, self._url, self._root))
        except StreamBroken as exc:
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
            "POST",
            self._url,
            params=self._params,
            json=body,
            headers=self._headers,
            timeout=self._timeout,
        )
        # Only what `decoded_body` decodes, whatever the client's defaults or the extra headers say.
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
        detail = self._quoter.error_detail(await read_excerpt(response))
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
        return ""


def checked_extra_body(extra: Mapping[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    """The extra body parameters, refusing the keys the adapter builds itself."""
    clash = sorted(reserved & extra.keys())
    if clash:
        raise InvalidOption(f"extra_body may not set {', '.join(clash)}: the adapter builds them")
    return dict(extra)


def transport_error(exc: Exception, url: str, root: str) -> StreamError:
    """An httpx transport failure as a StreamError naming what broke and where."""
    what = next((text for cls, text in TRANSPORT_ERRORS if isinstance(exc, cls)), "failed")
    message = f"POST {url}: {what}: {exc or type(exc).__name__}"
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        message += f" (is the server at {root} running?)"
    return StreamError(
        type=type(exc).__name__, message=message, retryable=not isinstance(exc, NOT_RETRYABLE)
    )
