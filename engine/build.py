"""The values every tool iteration builds, built without calling their classes.

On CPython 3.11 calling an attrs class with keywords costs more than filling
its fields: the call packs the keywords into a dict, unpacks them again for
`__init__` in a frame of its own, and attrs' `__init__` fetches a setter it
does not use. Each function here is written out by hand for one class: it
makes the instance with `object.__new__` and sets each field in the
instance's own dict, as `__init__` does (set one by one, the dict keeps
sharing its keys with the class's other instances). Under valgrind a 4-field
value takes about 3,500 instructions this way and 5,900 through the class.
`step` builds seven of these on every iteration (and `Step` itself, with
`step._step`), and the interpreter the two events that answer it.

Each takes the class's fields as keyword-only arguments of the same names,
defaults and types, so mypy checks a call as it checks the class's; only
these classes, which have no validator, converter or `__attrs_post_init__`,
can be built so. `tests/engine/test_build.py` holds each function to its
class: the same parameters and defaults, and an equal value.
"""

from toolloop.engine.commands import DispatchTool, Level, Log, StreamOnce
from toolloop.engine.events import StopRequest, StreamEnded, ToolSettled
from toolloop.states import (
    BatchCall,
    ContextItem,
    FunctionCall,
    JsonObject,
    PendingCall,
    ProviderDescriptor,
    StreamResult,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
)

_new = object.__new__
_NO_STOP = StopRequest.NONE  # a member read off its Enum class costs ~900 instructions


def stream_ended(
    *,
    result: StreamResult,
    stop: StopRequest = _NO_STOP,
    exclusive: tuple[bool, ...] = (),
    approval: tuple[bool, ...] = (),
    went_silent: bool = False,
) -> StreamEnded:
    """`StreamEnded(...)`: the interpreter reports every stream."""
    event: StreamEnded = _new(StreamEnded)
    fields = event.__dict__
    fields["result"] = result
    fields["stop"] = stop
    fields["exclusive"] = exclusive
    fields["approval"] = approval
    fields["went_silent"] = went_silent
    return event


def tool_settled(
    *,
    result: ToolResult,
    requires_follow_up: bool = False,
    duration_ms: int = 0,
    stop: StopRequest = _NO_STOP,
    index: int = 0,
) -> ToolSettled:
    """`ToolSettled(...)`: the interpreter reports every settled tool."""
    event: ToolSettled = _new(ToolSettled)
    fields = event.__dict__
    fields["result"] = result
    fields["requires_follow_up"] = requires_follow_up
    fields["duration_ms"] = duration_ms
    fields["stop"] = stop
    fields["index"] = index
    return event


def stream_once(
    *,
    iteration: int,
    function_history: tuple[ToolHistoryEntry, ...],
    accumulated_model_parts: tuple[JsonObject, ...],
    context: tuple[ContextItem, ...],
    tail_directives: tuple[str, ...],
    disabled: frozenset[str],
    suppress_text_output: bool,
) -> StreamOnce:
    """`StreamOnce(...)`: every iteration streams once."""
    once: StreamOnce = _new(StreamOnce)
    fields = once.__dict__
    fields["iteration"] = iteration
    fields["function_history"] = function_history
    fields["accumulated_model_parts"] = accumulated_model_parts
    fields["context"] = context
    fields["tail_directives"] = tail_directives
    fields["disabled"] = disabled
    fields["suppress_text_output"] = suppress_text_output
    return once


def dispatch_tool(
    *,
    call: FunctionCall,
    context: ToolContext,
    index: int = 0,
    pre_tool_text: str = "",
    text_suppressed: bool = False,
) -> DispatchTool:
    """`DispatchTool(...)`: every single call is dispatched."""
    dispatch: DispatchTool = _new(DispatchTool)
    fields = dispatch.__dict__
    fields["call"] = call
    fields["context"] = context
    fields["index"] = index
    fields["pre_tool_text"] = pre_tool_text
    fields["text_suppressed"] = text_suppressed
    return dispatch


def tool_context(
    *,
    channel_id: str,
    user_id: str,
    guild_id: str | None,
    locale: str,
    provider: ProviderDescriptor,
    persona_name: str,
    user_impersonation: bool,
    iteration: int,
    suppress_progress_notices: bool,
    show_kill_hint: bool,
    unavailable_for_turn: frozenset[str] = frozenset(),
    context_items: tuple[ContextItem, ...] = (),
) -> ToolContext:
    """`ToolContext(...)`: every dispatched call is told about its turn."""
    context: ToolContext = _new(ToolContext)
    fields = context.__dict__
    fields["channel_id"] = channel_id
    fields["user_id"] = user_id
    fields["guild_id"] = guild_id
    fields["locale"] = locale
    fields["provider"] = provider
    fields["persona_name"] = persona_name
    fields["user_impersonation"] = user_impersonation
    fields["iteration"] = iteration
    fields["suppress_progress_notices"] = suppress_progress_notices
    fields["show_kill_hint"] = show_kill_hint
    fields["unavailable_for_turn"] = unavailable_for_turn
    fields["context_items"] = context_items
    return context


def pending_call(
    *,
    stream: StreamResult,
    name: str,
    restart_type: str | None = None,
    batch: tuple[BatchCall, ...] = (),
    started: int = 0,
) -> PendingCall:
    """`PendingCall(...)`: the state holds every dispatched call until it settles."""
    pending: PendingCall = _new(PendingCall)
    fields = pending.__dict__
    fields["stream"] = stream
    fields["name"] = name
    fields["restart_type"] = restart_type
    fields["batch"] = batch
    fields["started"] = started
    return pending


def log(*, level: Level, message: str, fields: JsonObject | None = None) -> Log:
    """`Log(...)`: every settled tool is logged. No `fields`: a new empty dict, as `Log`'s."""
    line: Log = _new(Log)
    values = line.__dict__
    values["level"] = level
    values["message"] = message
    values["fields"] = {} if fields is None else fields
    return line


# A history entry is slotted (a turn holds every one): its fields are set through the
# slots' own setters, as attrs' `__init__` does, without fetching them on each call.
_set_call, _set_response, _set_image, _set_text, _set_same_turn = (
    vars(ToolHistoryEntry)[name].__set__
    for name in (
        "function_call",
        "function_response",
        "image_metadata",
        "pre_tool_call_text_parts",
        "same_turn",
    )
)


def tool_history_entry(
    *,
    function_call: FunctionCall,
    function_response: JsonObject,
    image_metadata: JsonObject | None = None,
    pre_tool_call_text_parts: tuple[JsonObject, ...] | None = None,
    same_turn: bool = False,
) -> ToolHistoryEntry:
    """`ToolHistoryEntry(...)`: every settled call leaves one."""
    entry: ToolHistoryEntry = _new(ToolHistoryEntry)
    _set_call(entry, function_call)
    _set_response(entry, function_response)
    _set_image(entry, image_metadata)
    _set_text(entry, pre_tool_call_text_parts)
    _set_same_turn(entry, same_turn)
    return entry


__all__ = [
    "dispatch_tool",
    "log",
    "pending_call",
    "stream_ended",
    "stream_once",
    "tool_context",
    "tool_history_entry",
    "tool_settled",
]
