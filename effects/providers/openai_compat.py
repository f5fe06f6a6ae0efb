"""The OpenAI-compatible provider: one streamed chat completion per call, over httpx.

It works against anything that speaks `POST {base_url}/chat/completions` with
`stream: true` and answers with server-sent events (`data: {chunk}` lines,
`data: [DONE]` at the end): OpenAI, OpenRouter, NovelAI's OpenAI-compatible
endpoint, llama.cpp's server, vLLM, Ollama. `docs/providers.md` is the guide.

Theory of operation. `stream` builds the request body from the `StreamRequest`
(`openai_body.build_body`), and the shared HTTP lifecycle (`http_provider.py`)
sends it and reads the event stream (`sse.py`) into the stream's fold
(`openai_stream.Stream`), which delivers the visible text as it arrives and
decides the result once the model is done or the body ends. The API key goes
as a bearer token; the base URL's user and password, if any, as a Basic
header, never in a URL; neither appears in a message (`credentials.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.providers.credentials import resolve_key
from toolloop.effects.providers.http_provider import DEFAULT_TIMEOUT, HttpProvider
from toolloop.effects.providers.openai_body import RESERVED_BODY_KEYS, build_body
from toolloop.effects.providers.openai_stream import Stream
from toolloop.engine.verbatim import VerbatimToolCallParser
from toolloop.states import ApiFamily, StreamResult
from toolloop.states.errors import InvalidOption

#: The chat-completions route, appended to `base_url`.
CHAT_PATH = "/chat/completions"


class OpenAICompatProvider(HttpProvider):
    """A `Provider` for OpenAI-compatible chat-completions endpoints.

    The API key is given as a value (`api_key`) or read once from the
    environment variable named by `api_key_env`; it is sent as a bearer token
    and never appears in a repr, a log line or an error message. Pass `client`
    to share a connection pool; otherwise the provider owns its client and
    closes it in `aclose()` (or as an async context manager). `accepts_images`
    says the model reads images (its descriptor tells the host to send them).
    """

    __slots__ = ()

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
        accepts_images: bool = False,
    ) -> None:
        key = resolve_key(api_key, api_key_env)
        if key and httpx.URL(base_url).userinfo:
            raise InvalidOption("give the API key or a user and password in base_url, not both")
        super().__init__(
            base_url=base_url,
            route=CHAT_PATH,
            model=model,
            api_key=key,
            key_headers={"Authorization": f"Bearer {key}"} if key else {},
            name=name or api_family.value,
            api_family=api_family,
            server=server,
            accepts_images=accepts_images,
            headers=headers,
            extra_body=extra_body,
            reserved_body_keys=RESERVED_BODY_KEYS,
            client=client,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return (
            f"OpenAICompatProvider(name={self._descriptor.name!r}, "
            f"api_family={self._descriptor.api_family.value!r}, url={self._url!r}, "
            f"model={self.model!r}, api_key={key}, headers={sorted(self._headers)!r})"
        )

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Run one streamed chat completion and report how it ended."""
        body = build_body(request, self.model, self._extra_body)
        return await self._stream(body, Stream(self._parser(request), self._quoter), sink)

    def _parser(self, request: StreamRequest) -> VerbatimToolCallParser | None:
        """The verbatim parser for this attempt, or None when it does not qualify (SPEC 10).

        Its cap is the request's, which the interpreter takes from the attempt's config.
        """
        if not (request.verbatim and request.tools):
            return None
        tools = {tool.name: tool.parameters for tool in request.tools}
        cap = request.verbatim_tool_call_max_buffer_chars
        return VerbatimToolCallParser(tools=tools, max_buffer_chars=cap)

    def _hint(self, status: int) -> str:
        """What to check for the statuses a misconfiguration causes; empty for any other."""
        if status == 404:
            root = self._root
            return f" (is the model {self.model!r} served at {root}, and is that the API's root?)"
        return super()._hint(status)
