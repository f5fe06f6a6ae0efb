"""The guards: predicates over one event's `Context` that select the rows of the table.

`toolloop.engine.table` names these functions as the guards of its rows; the
rows of one (phase, event type) are tried in order and `step` takes the first
whose guards hold. Every fact more than one guard needs (the refusal of a
call, the outcome of a settled tool, the pre-tool text) is computed once per
event, when `Context` is built; a guard only compares.

Guards about an outcome (a failure, the error cap, a NovelAI failure) hold for
both kinds of outcome: a call that stage 02 refused when the stream ended
(`StreamEnded`) and a tool that settled (`ToolSettled`). A guard that does not
apply to the event is False.
"""

import enum
from collections.abc import Callable
from typing import Any

from toolloop.engine import restart, tool_call
from toolloop.engine.events import Event, StopRequest, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.policy import is_novelai, is_visible, should_end_after_pre_tool_text
from toolloop.states import FunctionCall, IterationState, StreamStatus, ToolResult


class Refusal(enum.Enum):
    """Why stage 02 refuses a well-formed call without running it."""

    #: SPEC 6.4: the provider cut the arguments short; checked first.
    TRUNCATED = "truncated"
    #: SPEC 6.5: deliberate mode's allowlist does not expose the tool.
    BLOCKED = "blocked"


class Context:
    """One event's facts, computed once when it arrives; the guards and actions read them."""

    # Defaults on the class: an event sets only the facts it has.
    stop = StopRequest.NONE
    status: StreamStatus | None = None
    call: FunctionCall | None = None
    """The call of a well-formed `function_call` stream, or of the pending call."""
    name: str | None = None
    """Its trimmed name; None for a malformed call."""
    refusal: Refusal | None = None
    result: ToolResult | None = None
    restart: str | None = None
    """The restart type a successful tool asked for (SPEC 6a)."""
    failed = False
    """The outcome is a failure kept in history: a refusal or a failed tool."""
    novelai_text = False
    """A NovelAI turn whose call came after visible text (SPEC 4, history steps 3 and 5)."""
    pre_tool_text = ""
    """The text of the stream that asked for the call."""

    def __init__(self, state: IterationState, event: Event) -> None:
        self.state, self.event = state, event
        kind = type(event)
        if kind is StreamEnded:
            assert isinstance(event, StreamEnded)
            self._stream_ended(state, event)
        elif kind is ToolSettled:
            assert isinstance(event, ToolSettled)
            self._tool_settled(state, event)

    def _stream_ended(self, state: IterationState, event: StreamEnded) -> None:
        stream = event.result
        self.stop, self.status = event.stop, stream.status
        if stream.status is not StreamStatus.FUNCTION_CALL:
            return
        self.name = name = tool_call.valid_name(stream)
        if name is None:
            return
        call = stream.data
        assert isinstance(call, FunctionCall), "a valid name comes with its call"
        self.call = call
        if call.arguments_truncated:  # SPEC 6.4 comes before the allowlist gate of 6.5
            self.refusal = Refusal.TRUNCATED
            self.failed = True
        elif tool_call.is_blocked(state.turn, name):
            self.refusal = Refusal.BLOCKED
            self.failed = True
        self._pre_tool_text(state, stream.accumulated_text)

    def _tool_settled(self, state: IterationState, event: ToolSettled) -> None:
        pending = state.pending
        assert pending is not None, "DISPATCHING always holds the call"
        call = pending.stream.data
        assert isinstance(call, FunctionCall), "a dispatched call came from a valid stream"
        self.stop, self.call, self.name = event.stop, call, pending.name
        self.result = result = event.result
        if result.success:
            self.restart = restart.restart_type(result.data)
        else:
            self.failed = True
        self._pre_tool_text(state, pending.stream.accumulated_text)

    def _pre_tool_text(self, state: IterationState, text: str) -> None:
        self.pre_tool_text = text
        self.novelai_text = is_novelai(state.turn.provider) and is_visible(text)


Guard = Callable[[Context], bool]


def stream_completed(ctx: Context) -> bool:
    """The model finished its reply."""
    return ctx.status is StreamStatus.COMPLETED


def stream_failed(ctx: Context) -> bool:
    """The provider call ended in `error` or `timeout`."""
    return ctx.status is StreamStatus.ERROR or ctx.status is StreamStatus.TIMEOUT


def stream_empty(ctx: Context) -> bool:
    """The model produced nothing at all."""
    return ctx.status is StreamStatus.EMPTY_RESPONSE


def stream_stopped(ctx: Context) -> bool:
    """A genuine stop ended the stream."""
    return ctx.status is StreamStatus.STOPPED_BY_USER


def stream_interrupted(ctx: Context) -> bool:
    """A follow-up message interrupted the stream."""
    return ctx.status is StreamStatus.FOLLOW_UP_INTERRUPT


def call_malformed(ctx: Context) -> bool:
    """The model asked for a tool without call data or with a blank name (SPEC 6.1)."""
    return ctx.status is StreamStatus.FUNCTION_CALL and ctx.name is None


def stop_requested(ctx: Context) -> bool:
    """A genuine stop was pending at the check this event carries (SPEC 6.2 and 6.7)."""
    return ctx.stop is StopRequest.STOP


def call_refused(ctx: Context) -> bool:
    """Stage 02 refused the call without dispatching it (SPEC 6.4, 6.5): a failure in history."""
    return ctx.refusal is not None


def tool_succeeded(ctx: Context) -> bool:
    """The tool ran and succeeded."""
    return ctx.result is not None and ctx.result.success


def restart_requested(ctx: Context) -> bool:
    """A successful tool asked for an enhanced-context restart (SPEC 6a)."""
    return ctx.restart is not None


def has_stash_key(ctx: Context) -> bool:
    """The restart's enrichment item waits in the stash under a key."""
    data: Any = ctx.result.data if ctx.result is not None else None
    return ctx.restart is not None and restart.pending_context_key(data) is not None


def outcome_failed(ctx: Context) -> bool:
    """The call's outcome is a failure kept in history: a refusal or a failed tool."""
    return ctx.failed


def error_cap_reached(ctx: Context) -> bool:
    """This failure makes `MAX_CONSECUTIVE_TOOL_ERRORS` in a row (SPEC 4, history step 1)."""
    state = ctx.state
    return (
        ctx.failed and state.consecutive_tool_errors + 1 >= state.config.max_consecutive_tool_errors
    )


def under_impersonation(ctx: Context) -> bool:
    """The turn speaks as the user: the tool error loop raises instead of a notice."""
    return ctx.state.turn.user_impersonation


def end_turn_requested(ctx: Context) -> bool:
    """The tool asked to end the turn (honoured on a failure too, after the cap check)."""
    return ctx.result is not None and ctx.result.end_turn


def novelai_failure_after_text(ctx: Context) -> bool:
    """A NovelAI call failed after visible pre-tool text (SPEC 4, history step 3)."""
    return ctx.novelai_text and ctx.failed


def novelai_retries_exhausted(ctx: Context) -> bool:
    """This NovelAI failure reaches `NAI_TOOL_FAILURE_RETRY_THRESHOLD`."""
    state = ctx.state
    threshold = state.config.nai_tool_failure_retry_threshold
    return ctx.novelai_text and ctx.failed and state.nai_consecutive_tool_failures + 1 >= threshold


def exit_policy_ends(ctx: Context) -> bool:
    """The exit policy ends the turn after this success's pre-tool text (SPEC 7)."""
    if ctx.result is None or not ctx.result.success or ctx.name is None:
        return False
    assert isinstance(ctx.event, ToolSettled)
    follow_up = ctx.event.requires_follow_up
    provider = ctx.state.turn.provider
    return should_end_after_pre_tool_text(provider, ctx.name, follow_up, ctx.pre_tool_text)


def ceiling_reached(ctx: Context) -> bool:
    """The iteration this event would start is `MAX_FUNCTION_CALL_ITERATIONS` (SPEC 4.4)."""
    state = ctx.state
    following = state.iteration if isinstance(ctx.event, TurnStarted) else state.iteration + 1
    return following >= state.config.max_function_call_iterations
