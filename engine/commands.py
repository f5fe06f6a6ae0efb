"""Effects: what `step` asks the interpreter to do, named in the imperative.

A step's effects run in order. All but the last are *fire and forget*: the
interpreter carries them out and reports nothing back (a notice that fails to
send is logged, never an event). The last effect is either *awaited* (its answer
is the next event: see `AWAITED`) or *final* (`Finish`, `RaiseError`).
"""

import enum
from typing import Any

import attrs

from toolloop.states import (
    ApprovalRequest,
    ContextItem,
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    ToolContext,
    ToolHistoryEntry,
)
from toolloop.states.convert import register_union


class NoticeKey(enum.Enum):
    """The notices of SPEC section 9."""

    STILL_WORKING = "still_working"
    MAX_ITERATIONS = "max_iterations"
    TOOL_ERROR_LOOP = "tool_error_loop"
    NAI_TOOL_RETRY_EXHAUSTED = "nai_tool_retry_exhausted"
    STREAM_INACTIVITY_TIMEOUT = "stream_inactivity_timeout"
    TOOL_CALL_FAILED = "tool_call_failed"
    DELIBERATE_TRIGGER = "deliberate_trigger"
    #: Sent by a resumed host, never by `step`: a turn too old to resume (toolloop.durable).
    TURN_INTERRUPTED = "turn_interrupted"


class Level(enum.Enum):
    """Severity of a notice or a log line."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@attrs.frozen(kw_only=True, slots=False)
class SendNotice:
    """Send a localized notice; a hidden one goes to the thought log only."""

    key: NoticeKey
    level: Level
    hidden: bool = False
    iteration: int
    details: JsonObject = attrs.field(factory=dict)
    """What the notice's text is filled with (tool name, reason, trigger)."""


@attrs.frozen(kw_only=True, slots=False)
class StreamOnce:
    """Stage 01: one provider call (answer: StreamEnded, with the stop request then)."""

    iteration: int
    function_history: tuple[ToolHistoryEntry, ...]
    accumulated_model_parts: tuple[JsonObject, ...]
    context: tuple[ContextItem, ...]
    tail_directives: tuple[str, ...]
    disabled: frozenset[str]
    suppress_text_output: bool


@attrs.frozen(kw_only=True, slots=False)
class DispatchTool:
    """Run the tool, raced against its timeout and the kill (answer: ToolSettled).

    The only call running: a single call, or one of a batch that runs alone.
    """

    call: FunctionCall
    context: ToolContext
    index: int = 0
    """The call's position in its batch, which its `ToolSettled` carries back."""
    pre_tool_text: str = ""
    """The text the model streamed before asking for the call: the tool's live stream."""
    text_suppressed: bool = False
    """Whether that text was withheld from the user (a NovelAI retry, SPEC 4 step 3)."""


@attrs.frozen(kw_only=True, slots=False)
class StartTool:
    """Start a call of a batch beside the others running, under its own timeout (SPEC 6b).

    Answers nothing itself: the batch's calls settle one `ToolSettled` at a time,
    each the answer of a step's `AwaitTools`.
    """

    call: FunctionCall
    context: ToolContext
    index: int
    pre_tool_text: str = ""
    """As `DispatchTool.pre_tool_text`."""
    text_suppressed: bool = False
    """As `DispatchTool.text_suppressed`."""


@attrs.frozen(kw_only=True, slots=False)
class AwaitTools:
    """Wait for the next running call of the batch to settle (answer: its ToolSettled),
    or the next waiting approval to end (answer: its ApprovalDecided)."""


@attrs.frozen(kw_only=True, slots=False)
class AskApproval:
    """Ask the turn's approval port for a decision on a call of the batch (SPEC 6c).

    Answers nothing itself, like `StartTool`: the decision (or the timeout that
    ends the wait, `timeout_ms` from the first ask of this call) is an
    `ApprovalDecided`, the answer of a step's `AwaitTools`. Asked again after a
    decision for other arguments was refused, the wait keeps its first deadline.
    """

    request: ApprovalRequest
    index: int
    timeout_ms: int


@attrs.frozen(kw_only=True, slots=False)
class WithdrawApproval:
    """The request is moot (the turn was killed while it waited): the host retires its prompt."""

    request: ApprovalRequest


@attrs.frozen(kw_only=True, slots=False)
class TakeStashedContext:
    """Take the enrichment item stashed under `key` out of the stash (answer: StashTaken)."""

    key: str


@attrs.frozen(kw_only=True, slots=False)
class ResetFollowUpCount:
    """Reset the channel's follow-up count."""


@attrs.frozen(kw_only=True, slots=False)
class IncrementFollowUpCount:
    """Count one more follow-up interruption for the channel."""


@attrs.frozen(kw_only=True, slots=False)
class QueueStopResponse:
    """Queue the stop response at the front of the channel's queue."""


@attrs.frozen(kw_only=True, slots=False)
class ClearStopRequest:
    """Clear the channel's stop request (a follow-up, or a stop nobody waits on)."""


@attrs.frozen(kw_only=True, slots=False)
class MarkToolChainActive:
    """Mark the channel's tool-call chain active."""


@attrs.frozen(kw_only=True, slots=False)
class SetTextSuppression:
    """Tell the provider adapter whether to keep streamed text out of the channel."""

    suppressed: bool


@attrs.frozen(kw_only=True, slots=False)
class CountToolUsage:
    """Count a successful, non-blocked call outside direct messages."""

    name: str


@attrs.frozen(kw_only=True, slots=False)
class RetainAffordance:
    """Keep the tool exposed in the channel for the configured further turns."""

    name: str


@attrs.frozen(kw_only=True, slots=False)
class Log:
    """Write a log line."""

    level: Level
    message: str
    fields: JsonObject = attrs.field(factory=dict)


@attrs.frozen(kw_only=True, slots=False)
class Finish:
    """The attempt is over with this result."""

    result: GenerationTurnResult


class ErrorKind(enum.Enum):
    """Errors the loop raises instead of returning a result."""

    #: The model failed too many tool calls in a row under user impersonation.
    IMPERSONATION_ABORTED = "impersonation_aborted"


@attrs.frozen(kw_only=True, slots=False)
class RaiseError:
    """The attempt is over by raising this error to the caller."""

    kind: ErrorKind
    message: str


Effect = (
    SendNotice
    | StreamOnce
    | DispatchTool
    | StartTool
    | AwaitTools
    | AskApproval
    | WithdrawApproval
    | TakeStashedContext
    | ResetFollowUpCount
    | IncrementFollowUpCount
    | QueueStopResponse
    | ClearStopRequest
    | MarkToolChainActive
    | SetTextSuppression
    | CountToolUsage
    | RetainAffordance
    | Log
    | Finish
    | RaiseError
)
AWAITED: tuple[type[Any], ...] = (StreamOnce, DispatchTool, AwaitTools, TakeStashedContext)
"""Effects whose answer is the next event; one ends every non-final step."""
FINAL: tuple[type[Any], ...] = (Finish, RaiseError)
register_union(Effect)
