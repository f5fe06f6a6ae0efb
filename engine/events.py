"""Events: the facts the interpreter reports to `step`, named in the past tense.

Each event answers the effect that ended the previous step (see
`toolloop.engine.commands`); failures travel inside the event as data. The two
stop checks of stage 02 travel inside the events too: the interpreter reads the
channel's stop request when the stream ends and when the tool settles, so a
tool iteration costs two events, not four.
"""

import enum

import attrs

from toolloop.states import ApprovalDecision, ContextItem, StreamResult, ToolResult
from toolloop.states.convert import omit_when_default, register_union


class StopRequest(enum.Enum):
    """What the turn control holds for the channel when asked."""

    #: Nothing is pending.
    NONE = "none"
    #: A genuine stop: a `/kill`, a stop command, a stale-lock release.
    STOP = "stop"
    #: A queued follow-up message, which never turns a tool chain into a stop.
    FOLLOW_UP = "follow_up"


@attrs.frozen(kw_only=True)
class TurnStarted:
    """The interpreter is ready to run the attempt."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamEnded:
    """The provider call of stage 01 ended with this result."""

    result: StreamResult
    stop: StopRequest = StopRequest.NONE
    """The channel's stop request when the stream ended: stage 02's check before any tool."""
    exclusive: tuple[bool, ...] = ()
    """For a batch of two or more calls, the registry's answer for each, in order: the
    tool runs alone (SPEC 6b item 3). Empty for a single call, which always runs alone."""
    approval: tuple[bool, ...] = ()
    """The registry's answer for each call, in order: it needs a person's approval and
    passed the registry's own checks (SPEC 6c). Empty when no call needs approval."""
    went_silent: bool = False
    """The loop's rolling inactivity timeout ended the call (SPEC 5): the provider sent
    nothing for `STREAM_SDK_CALL_TIMEOUT_MS`, and the `timeout` result is the loop's, not
    one the provider reported. Its row sends the inactivity notice. Written to a trace
    only when set, so a trace without such a timeout reads as before."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class ToolSettled:
    """The registry's run of the tool ended (success, failure, timeout or kill)."""

    result: ToolResult
    requires_follow_up: bool = False
    """The registry's answer for this tool, provider and server (SPEC 7)."""
    duration_ms: int = 0
    stop: StopRequest = StopRequest.NONE
    """The channel's stop request when the tool settled: stage 02's check after dispatch."""
    index: int = 0
    """Which call of the batch settled: its position in the model's order (SPEC 6b)."""


@attrs.frozen(kw_only=True)
class ApprovalDecided:
    """The wait for a call's approval ended: a decision came, or nobody answered in time.

    A kill ends every wait too; it is reported as no decision with `stop` set.
    """

    index: int
    """Which call of the batch it was for: its position in the model's order."""
    decision: ApprovalDecision | None
    """None: no decision within `TOOL_APPROVAL_TIMEOUT_MS` (or the kill ended the wait)."""
    stop: StopRequest = StopRequest.NONE
    """The channel's stop request when the wait ended: a kill while waiting aborts."""


@attrs.frozen(kw_only=True)
class StashTaken:
    """The stashed context item under the requested key was taken (None: missing)."""

    item: ContextItem | None


Event = TurnStarted | StreamEnded | ToolSettled | ApprovalDecided | StashTaken
EVENT_TYPES: tuple[type[Event], ...] = (
    TurnStarted,
    StreamEnded,
    ToolSettled,
    ApprovalDecided,
    StashTaken,
)
omit_when_default(StreamEnded, "went_silent")
register_union(Event)
