"""The Gemini provider: native `streamGenerateContent?alt=sse` over httpx.

Why native and not Gemini's OpenAI-compatible endpoint: Gemini 3 refuses a
function-call turn whose call comes back without the thought signature it was
sent with, and a compatibility layer loses them. This adapter keeps every part
the model sent as it arrived (`model_parts`, and on each call's passthrough)
and `gemini_body.build_body` replays them byte for byte. `docs/providers.md`
is the guide.

Theory of operation. Each SSE event is one `GenerateContentResponse` JSON
object: `candidates[0].content.parts` (text, `thought: true` reasoning,
`functionCall`, each possibly with a `thoughtSignature`), then a
`finishReason` on the last chunk; `promptFeedback.blockReason` when the
prompt itself was refused. Parts are folded into a list: unsigned text runs of
the same kind are joined; a signed part stays exactly as it came, alone.
Visible text goes to the sink as it arrives; reasoning never does (it becomes
the thought log). The `functionCall` parts of one stream are one batch:
Gemini gives them no ids, so the adapter makes `gemini-{iteration}-{n}`.
Every chunk repeats `usageMetadata`; the last one is the stream's usage.
The POST, its refusals (HTTP errors, redirects, a body that is not a stream)
and the reading of the body (bounded decompression, SSE framing) are the
ones the OpenAI-compatible adapter uses (`http_provider.py`, `sse.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import httpx

from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.providers.credentials import Quoter, header_value, resolve_key
from toolloop.effects.providers.gemini_body import PASSTHROUGH_KEY, RESERVED_BODY_KEYS, build_body
from toolloop.effects.providers.http_provider import DEFAULT_TIMEOUT, HttpProvider
from toolloop.effects.providers.sse import StreamBroken, decode_payload, malformed
from toolloop.effects.providers.usage import gemini_usage, reported
from toolloop.states import (
    ApiFamily,
    FunctionCall,
    JsonObject,
    StreamError,
    StreamResult,
    StreamStatus,
)
from toolloop.states.json_policy import JsonInputError, check_json

#: Google's Generative Language API root.
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
#: Where the key is read from when neither `api_key` nor `api_key_env` is given.
DEFAULT_KEY_ENV = "GEMINI_API_KEY"
#: Finish reasons of a reply that ended as the model meant it to.
NORMAL_ENDS = frozenset({"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"})
#: Finish reasons of a call the model got wrong: the next attempt may well succeed.
BAD_CALL_ENDS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})


class GeminiProvider(HttpProvider):
    """A `Provider` for Google's Gemini API, streaming natively with thought signatures kept.

    Constructed like `OpenAICompatProvider`, sharing its HTTP lifecycle
    (`http_provider.py`): the key is a value (`api_key`) or read once from the
    environment variable `api_key_env` (`GEMINI_API_KEY` when neither is given;
    no key at all is allowed only with `api_key=""`, for a loopback server). It
    is sent in the `x-goog-api-key` header, never in the URL, and never appears
    in a repr, a log line or an error message.
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        api_key_env: str | None = None,
        name: str | None = None,
        server: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        if api_key is None and api_key_env is None:
            api_key_env = DEFAULT_KEY_ENV
        key = resolve_key(api_key, api_key_env)
        super().__init__(
            base_url=base_url,
            route=f"/models/{model}:streamGenerateContent",
            params={"alt": "sse"},
            model=model,
            api_key=key,
            key_headers={"x-goog-api-key": header_value(key, "the API key")} if key else {},
            name=name or ApiFamily.GOOGLE.value,
            api_family=ApiFamily.GOOGLE,
            server=server,
            headers=headers,
            extra_body=extra_body,
            reserved_body_keys=RESERVED_BODY_KEYS,
            client=client,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"GeminiProvider(url={self._url!r}, model={self.model!r}, api_key={key})"

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Run one streamed generation and report how it ended."""
        body = build_body(request, self._extra_body)
        return await self._stream(body, _Stream(request.once.iteration, self._quoter), sink)

    def _hint(self, status: int) -> str:
        """What to check for the statuses a misconfiguration causes; empty for any other."""
        if status == 404:
            return f" (is there a model {self.model!r} at this API root?)"
        return super()._hint(status)


def _call_id(function: JsonObject, made: str) -> str:
    """The id Gemini gave the call (Vertex AI may), else the one the adapter made."""
    given = function.get("id")
    return given if isinstance(given, str) and given else made


class _Stream:
    """What one stream has delivered so far: the parts as they came, the finish reason."""

    __slots__ = ("blocked", "chunks", "finish", "iteration", "parts", "quote", "text", "usage")

    def __init__(self, iteration: int, quote: Quoter) -> None:
        self.iteration = iteration
        self.quote = quote
        self.parts: list[JsonObject] = []
        self.text: list[str] = []
        self.finish: str | None = None
        self.blocked: str | None = None
        self.chunks = 0
        self.usage: Any = None
        """The last chunk's `usageMetadata`, as it came: every chunk repeats the counts so far."""

    @property
    def done(self) -> bool:
        """The model is done: a finish reason, or the prompt was blocked."""
        return self.finish is not None or self.blocked is not None

    @property
    def cut_off(self) -> bool:
        """The body ended before the model was done: the server broke it off."""
        return not self.done

    async def take(self, payloads: Iterator[str], sink: StreamSink) -> bool:
        """Fold these events' chunks and deliver their visible text; True once done."""
        progress, deliver = sink.progress, sink.deliver
        for payload in payloads:
            progress()
            text = self.fold(payload)
            if text:
                await deliver(text)
            if self.done:
                return True
        return False

    def trailer(self, payload: str) -> None:
        """An event after the finish reason: only its usage is kept.

        The reply is complete: an event that cannot be read is skipped, not an error.
        """
        try:
            chunk = decode_payload(payload, self.chunks + 1, self.quote)
        except StreamBroken:
            return
        if isinstance(chunk, dict) and chunk.get("usageMetadata") is not None:
            self.usage = chunk["usageMetadata"]

    async def flush(self, sink: StreamSink) -> None:
        """Nothing is held back: text is delivered as it arrives."""

    def fold(self, payload: str) -> str:
        """Fold one event's chunk; return its visible text ("" when none)."""
        self.chunks += 1
        chunk = decode_payload(payload, self.chunks, self.quote)
        if not isinstance(chunk, dict):
            raise StreamBroken(self.malformed("the data must be a JSON object"))
        if "error" in chunk:
            raise StreamBroken(self._provider_error(chunk["error"]))
        if chunk.get("usageMetadata") is not None:
            self.usage = chunk["usageMetadata"]
        candidates = chunk.get("candidates")
        if not candidates:
            feedback = chunk.get("promptFeedback")
            reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if isinstance(reason, str):
                self.blocked = reason
            return ""
        candidate = candidates[0] if isinstance(candidates, list) else None
        if not isinstance(candidate, dict):
            raise StreamBroken(self.malformed("`candidates[0]` must be an object"))
        content = candidate.get("content") or {}
        parts = content.get("parts") if isinstance(content, dict) else None
        visible = ""
        for part in parts or ():
            if not isinstance(part, dict):
                raise StreamBroken(self.malformed("a part must be an object"))
            text = self._fold(part)
            if text:
                visible += text
        if visible:
            self.text.append(visible)
        finish = candidate.get("finishReason")
        if isinstance(finish, str):
            self.finish = finish
        return visible

    def _fold(self, part: JsonObject) -> str | None:
        """Keep one part; return its visible text. Unsigned text joins the unsigned text before."""
        last = self.parts[-1] if self.parts else None
        text = part.get("text")
        if (
            isinstance(text, str)
            and part.keys() <= {"text", "thought"}
            and last is not None
            and last.keys() == part.keys()
            and last.get("thought") == part.get("thought")
        ):
            last["text"] += text
        else:
            self.parts.append(dict(part))
        if isinstance(text, str) and not part.get("thought"):
            return text
        return None

    def result(self) -> StreamResult:
        """How the stream ended, from its parts and its finish reason."""
        if self.blocked is not None:
            message = f"Gemini blocked the prompt (promptFeedback.blockReason {self.blocked})"
            return self.failed(StreamError(type="prompt_blocked", message=message))
        finish = self.finish
        if finish is None:
            message = f"the stream closed after {self.chunks} chunks without a finishReason"
            return self.failed(StreamError(type="incomplete_stream", message=message))
        if finish in BAD_CALL_ENDS:
            message = f"Gemini could not make the tool call (finishReason {finish})"
            return self.failed(StreamError(type=finish.lower(), message=message))
        if finish not in NORMAL_ENDS:
            message = f"Gemini stopped the reply (finishReason {finish})"
            return self.failed(StreamError(type="finish_reason", message=message))
        calls = self._calls(truncated=finish == "MAX_TOKENS")
        if isinstance(calls, StreamError):
            return self.failed(calls)
        if calls:
            return self._ended(StreamStatus.FUNCTION_CALL, calls)
        if "".join(self.text):
            return self._ended(StreamStatus.COMPLETED, ())
        return self._ended(StreamStatus.EMPTY_RESPONSE, ())

    def _calls(self, *, truncated: bool) -> tuple[FunctionCall, ...] | StreamError:
        """The `functionCall` parts as one batch, each with the parts leading up to it.

        The parts after the last call go with it, so the batch's calls together
        hold the whole model turn. MAX_TOKENS with a call marks the last call
        truncated: its arguments may have been cut (SPEC 6 step 4).
        """
        positions = [i for i, part in enumerate(self.parts) if "functionCall" in part]
        calls: list[FunctionCall] = []
        start = 0
        for number, position in enumerate(positions):
            end = len(self.parts) if number == len(positions) - 1 else position + 1
            function = self.parts[position]["functionCall"]
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return self.malformed(f"functionCall part {number} has no name")
            args = function.get("args")
            if args is not None and not isinstance(args, dict):
                return self.malformed(f"functionCall {function['name']!r}: args is not an object")
            passthrough = {
                PASSTHROUGH_KEY: {"turn": str(self.iteration), "parts": self.parts[start:end]}
            }
            try:
                check_json(passthrough, where=f"tool call {function['name']!r} parts")
            except JsonInputError as error:
                return StreamError(type="malformed_tool_call", message=str(error))
            last = number == len(positions) - 1
            calls.append(
                FunctionCall(
                    name=function["name"],
                    args=args,
                    passthrough=passthrough,
                    arguments_truncated=truncated and last,
                    call_id=_call_id(function, f"gemini-{self.iteration}-{number}"),
                )
            )
            start = end
        return tuple(calls)

    def _ended(self, status: StreamStatus, calls: tuple[FunctionCall, ...]) -> StreamResult:
        thoughts = "".join(
            part["text"]
            for part in self.parts
            if part.get("thought") and isinstance(part.get("text"), str)
        )
        return StreamResult(
            status=status,
            accumulated_text="".join(self.text),
            data=calls[0] if calls else None,
            calls=calls if len(calls) > 1 else (),
            thought_log={"text": thoughts} if thoughts else None,
            model_parts=tuple(self.parts),
            usage=reported(gemini_usage, self.usage, "the Gemini stream"),
        )

    def failed(self, error: StreamError) -> StreamResult:
        """An `error` result that keeps the text already delivered; the API key is masked."""
        return StreamResult(
            status=StreamStatus.ERROR,
            accumulated_text="".join(self.text),
            data=attrs.evolve(error, message=self.quote.mask(error.message)),
            model_parts=tuple(self.parts),
            usage=reported(gemini_usage, self.usage, "the Gemini stream"),
        )

    def malformed(self, what: str) -> StreamError:
        return malformed(self.chunks, what)

    def _provider_error(self, error: Any) -> StreamError:
        """An error Gemini reported inside the stream; 4xx codes other than 429 are final."""
        detail = json.dumps(error) if not isinstance(error, dict) else error.get("message", error)
        code = error.get("code") if isinstance(error, dict) else None
        retryable = not (isinstance(code, int) and 400 <= code < 500 and code != 429)
        message = f"chunk {self.chunks}: Gemini reported an error: {self.quote.quote(str(detail))}"
        return StreamError(type="provider_error", message=message, retryable=retryable)
