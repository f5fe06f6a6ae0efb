"""The port values every tool iteration builds, built without calling their classes.

`toolloop.engine.build` says why, for the core's values: on CPython 3.11 a
keyword call of an attrs class packs the keywords into a dict and unpacks them
again for an `__init__` in a frame of its own. Each function here is written
out by hand for one class of `toolloop.effects.ports`: it makes the instance
with `object.__new__` and sets each field in the instance's own dict, one by
one (so the dict keeps sharing its keys with the class's other instances), or
through its slot for the slotted `StreamSpan`. It takes the class's fields as
keyword-only arguments of the same names, defaults and types, so mypy checks a
call as it checks the class's.
`tests/effects/test_port_values.py` holds each function to its class.
"""

from collections.abc import Awaitable, Callable

from toolloop.effects.ports import (
    KillSignal,
    StreamingContext,
    StreamRequest,
    StreamSpan,
    ToolInvocation,
)
from toolloop.engine.commands import StreamOnce
from toolloop.states import VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS, ToolSpec, TurnSettings

_new = object.__new__


# A span is slotted (a waiting turn holds its stream's): its fields are set through the
# slots' own setters, as attrs' `__init__` does, without fetching them on each call.
_set_attempt, _set_iteration, _set_reply_to, _set_suppressed, _set_turn = (
    vars(StreamSpan)[name].__set__
    for name in ("attempt", "iteration", "reply_to", "suppressed", "turn")
)


def stream_span(
    *,
    attempt: int,
    iteration: int,
    reply_to: str | None = None,
    suppressed: bool = False,
    turn: str | None = None,
) -> StreamSpan:
    """`StreamSpan(...)`: the channel is told of every stream."""
    span: StreamSpan = _new(StreamSpan)
    _set_attempt(span, attempt)
    _set_iteration(span, iteration)
    _set_reply_to(span, reply_to)
    _set_suppressed(span, suppressed)
    _set_turn(span, turn)
    return span


def stream_request(
    *,
    turn: TurnSettings,
    once: StreamOnce,
    tools: tuple[ToolSpec, ...] = (),
    reply_to: str | None = None,
    verbatim: bool = False,
    verbatim_tool_call_max_buffer_chars: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
) -> StreamRequest:
    """`StreamRequest(...)`: the provider gets one per stream."""
    request: StreamRequest = _new(StreamRequest)
    fields = request.__dict__
    fields["turn"] = turn
    fields["once"] = once
    fields["tools"] = tools
    fields["reply_to"] = reply_to
    fields["verbatim"] = verbatim
    fields["verbatim_tool_call_max_buffer_chars"] = verbatim_tool_call_max_buffer_chars
    return request


def tool_invocation(
    *,
    killed: KillSignal,
    notify: Callable[[str], Awaitable[None]],
    streaming: StreamingContext | None = None,
) -> ToolInvocation:
    """`ToolInvocation(...)`: every tool call gets one."""
    invocation: ToolInvocation = _new(ToolInvocation)
    fields = invocation.__dict__
    fields["killed"] = killed
    fields["notify"] = notify
    fields["streaming"] = streaming
    return invocation
