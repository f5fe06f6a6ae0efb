"""The OpenAI-compatible stream assembled: chunks folded into text, reasoning and calls.

`Stream` is the hot loop: each event's data goes through JSON's C scanner once
(`sse.decode_payload`) and is folded; it returns the chunk's visible text for
delivery. Nothing is built per chunk but what the chunk itself carries. Tool
calls arrive as `delta.tool_calls` fragments (`CallParts`), fields the
adapter does not know are kept as opaque passthrough and replayed, and a call
cut short by `length` keeps the pairs of its arguments that arrived whole
(`complete_pairs`). With the verbatim parser (SPEC 10), calls written as text
are recovered from the visible text. When the model is done (the event with
the finish reason, `[DONE]`, the body's end) `Stream.result` decides how the
stream ended.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import attrs

from toolloop.effects.ports import StreamSink
from toolloop.effects.providers.credentials import Quoter
from toolloop.effects.providers.openai_body import model_parts
from toolloop.effects.providers.sse import DECODER, StreamBroken, decode_payload
from toolloop.effects.providers.usage import openai_usage, reported
from toolloop.engine.verbatim import VerbatimCall, VerbatimToolCallParser
from toolloop.states import (
    FunctionCall,
    JsonObject,
    StreamError,
    StreamResult,
    StreamStatus,
    TokenUsage,
)
from toolloop.states.json_policy import JsonInputError, check_json, loads

#: Delta keys folded explicitly; the others are opaque passthrough.
KNOWN_DELTA_KEYS = frozenset({"role", "content", "tool_calls", "reasoning", "reasoning_content"})
#: Fragment keys of a tool call folded explicitly; the others are opaque passthrough.
KNOWN_FRAGMENT_KEYS = frozenset({"index", "id", "type", "function"})


@attrs.define(kw_only=True)
class CallParts:
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
        self, message_extras: JsonObject, cut_short: bool, quote: Quoter
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
                args = DECODER.decode(text)
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
    quote: Quoter

    def string(self, value: Any, field: str) -> str:
        if type(value) is not str:
            raise self.broken(field, "a string", value)
        return value

    def object(self, value: Any, field: str) -> JsonObject:
        if type(value) is not dict:
            raise self.broken(field, "an object", value)
        return value

    def broken(self, field: str, expected: str, value: Any) -> StreamBroken:
        message = (
            f"malformed chunk {self.chunk}: `{self.prefix}{field}` must be {expected}, "
            f"got {type(value).__name__} {self.quote.quote(repr(value))}"
        )
        return StreamBroken(StreamError(type="malformed_chunk", message=message, retryable=True))


class Stream:
    """What one stream has delivered so far; folds chunks, then decides the result."""

    __slots__ = (
        "calls",
        "chunks",
        "done",
        "extras",
        "finish_reason",
        "moved",
        "parser",
        "quote",
        "reasoning",
        "text",
        "usage",
        "verbatim_calls",
    )

    def __init__(self, parser: VerbatimToolCallParser | None, quote: Quoter) -> None:
        self.parser = parser
        self.quote = quote
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, CallParts] = {}
        self.extras: JsonObject = {}  # Opaque message fields, e.g. OpenRouter's reasoning_details.
        self.finish_reason: str | None = None
        self.chunks = 0
        self.done = False  # `data: [DONE]` arrived.
        self.moved = False  # The chunk just folded made progress without text (`_fold_rest`).
        self.usage: Any = None  # The last `usage` the server sent, as it came.
        self.verbatim_calls: list[FunctionCall] = []
        """The calls the verbatim parser recovered from the text, in the order written."""

    async def take(self, payloads: Iterator[str], sink: StreamSink) -> bool:
        """Fold these events' data and deliver their text; True once done.

        Done is `[DONE]`, a verbatim call, or the event with the finish reason.
        Progress (the inactivity timer's restart) is what the model made: text,
        reasoning, a piece of a call, the finish; a chunk that carries nothing
        (`{"choices": []}`, an empty delta) is not, or a server could keep a
        turn alive forever without answering.
        The hot loop: every chunk passes here, so names are bound to locals.
        """
        fold, progress = self.fold, sink.progress
        # Without a verbatim parser, text goes straight to the sink (one coroutine less a chunk).
        deliver, keep = sink.deliver if self.parser is None else None, self.text.append
        for payload in payloads:
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
        return False

    def trailer(self, payload: str) -> None:
        """An event after the finish reason: only its usage is kept (servers send it last).

        The reply is complete: an event that cannot be read is skipped, not an error.
        """
        if payload == "[DONE]":
            return
        try:
            chunk = decode_payload(payload, self.chunks + 1, self.quote)
        except StreamBroken:
            return
        if type(chunk) is dict and chunk.get("usage") is not None:
            self.usage = chunk["usage"]

    def fold(self, payload: str) -> str | None:
        """Fold one chunk; return its content text (hot path: plain content deltas)."""
        self.chunks += 1
        chunk = decode_payload(payload, self.chunks, self.quote)
        if type(chunk) is not dict:
            raise self.where("").broken("chunk", "an object", chunk)
        if "error" in chunk:
            raise StreamBroken(self._provider_error(chunk["error"]))
        usage = chunk.get("usage")
        if usage is not None:
            self.usage = usage  # Read once, when the stream ends (`token_usage`).
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
        self.calls.setdefault(index, CallParts()).add(fragment, where)

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
            usage=self.token_usage(),
        )

    def failed(self, error: StreamError) -> StreamResult:
        """An `error` result that keeps the text already delivered; the API key is masked."""
        text = "".join(self.text)
        return StreamResult(
            status=StreamStatus.ERROR,
            accumulated_text=text,
            data=attrs.evolve(error, message=self.quote.mask(error.message)),
            model_parts=model_parts(text),
            usage=self.token_usage(),
        )

    def token_usage(self) -> TokenUsage | None:
        """The usage the server reported last, read once."""
        return reported(openai_usage, self.usage, "the chat-completions stream")

    def cut_short(self) -> StreamError:
        message = f"the stream closed after {self.chunks} chunks without [DONE] or a finish reason"
        return StreamError(type="incomplete_stream", message=message, retryable=True)

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
            key, pos = DECODER.raw_decode(prefix, _skip(prefix, pos))
            pos = _skip(prefix, pos)
            if not isinstance(key, str) or not prefix.startswith(":", pos):
                return found
            value, end = DECODER.raw_decode(prefix, _skip(prefix, pos + 1))
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
