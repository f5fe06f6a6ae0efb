"""What one provider call reports: its status, its text and the call it asked for."""

from __future__ import annotations

import enum
from typing import Any

import attrs

JsonObject = dict[str, Any]


class StreamStatus(enum.Enum):
    """How one provider stream ended."""

    #: The model finished its reply.
    COMPLETED = "completed"
    #: The provider failed; the error is in `data`.
    ERROR = "error"
    #: The rolling inactivity timeout fired; the error is in `data`.
    TIMEOUT = "timeout"
    #: The model produced nothing at all.
    EMPTY_RESPONSE = "empty_response"
    #: A genuine stop (a `/kill`, a stop command) ended the stream.
    STOPPED_BY_USER = "stopped_by_user"
    #: A follow-up message from the user interrupted the stream.
    FOLLOW_UP_INTERRUPT = "follow_up_interrupt"
    #: The model asked for a tool; the call is in `data`.
    FUNCTION_CALL = "function_call"


def _argument_count(args: JsonObject | None) -> str:
    if args is None:
        return "None"
    return f"<{len(args) or 'no'} argument{'' if len(args) == 1 else 's'}>"


@attrs.frozen(kw_only=True)
class FunctionCall:
    """A tool call as the model asked for it, native or recovered from text."""

    name: str
    """The tool's name, as the model wrote it (the engine trims it)."""
    args: JsonObject | None = attrs.field(default=None, repr=_argument_count)
    """The arguments object, or None when the model sent none. Its repr counts the
    arguments and shows neither a value nor a key: a value may be a secret, a key
    the model misplaced may be one too, and reprs reach logs."""
    passthrough: JsonObject = attrs.field(factory=dict)
    """Provider-specific fields (call id, thought signature), opaque, replayed as is."""
    arguments_truncated: bool = False
    """The provider cut the arguments short; `args` holds only the keys that arrived whole."""
    call_id: str = ""
    """The provider's id for the call, else one its adapter made, unique within the turn:
    a response is matched to its call by it (SPEC 3). Empty only where no provider sets one."""


@attrs.frozen(kw_only=True)
class StreamError:
    """Why a stream ended in `error` or `timeout`, as data that a trace can carry."""

    type: str
    """The error's kind, e.g. the exception class name or `http_status`."""
    message: str
    """A sentence saying what went wrong."""
    retryable: bool = True
    """Whether the next attempt of a fallback chain may succeed where this one failed."""


@attrs.frozen(kw_only=True)
class TokenUsage:
    """How many tokens one provider call (or a whole attempt, summed) cost, as the provider
    counted them. Reasoning is output too: `output_tokens` includes `reasoning_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@attrs.frozen(kw_only=True)
class StreamResult:
    """What one provider call delivered."""

    status: StreamStatus
    accumulated_text: str = ""
    """The visible text this stream delivered (also when its delivery was suppressed)."""
    details_content: str = ""
    """NovelAI scene metadata; never shown in the channel."""
    data: FunctionCall | StreamError | None = None
    """The call for `function_call`, the error for `error` and `timeout`, else None."""
    thought_log: JsonObject | None = None
    """The model's reasoning payload, when it sent one."""
    calls: tuple[FunctionCall, ...] = ()
    """For `function_call`: every call the model made in this stream, in the order it
    emitted them (SPEC 3, 6b); `data` is the first. Empty means `data` is the only one."""
    model_parts: tuple[JsonObject, ...] = ()
    """The provider-native parts of the model's own turn in this stream (SPEC 3):
    opaque JSON objects replayed to the same provider as the model's prefill;
    a provider with nothing native reports its visible text as one text part."""
    usage: TokenUsage | None = None
    """The tokens this call cost, when the provider reported them (None: it did not)."""

    @property
    def batch(self) -> tuple[FunctionCall, ...]:
        """The calls of a `function_call` stream, in the model's order (SPEC 6b)."""
        if self.calls:
            return self.calls
        return (self.data,) if isinstance(self.data, FunctionCall) else ()
