"""The guards: predicates over `(state_before, event)` that select each move of `step`.

The declared machine (`toolloop.specs.machine`) names these functions as the
conditions of its moves; the moves of one (phase, event) are tried in their
declared order and the first whose guards hold is the one `step` takes (the
`transitions` library's rule). Each guard is built from the engine's own
decisions (`policy`, `tool_call`, `restart`), so the declaration and the
coordinator cannot disagree without the conformance test noticing.

A guard reads only the state *before* the event and the event itself, and is
False for an event it does not apply to. Guards about an outcome (a failure,
the error cap, a NovelAI failure) hold for both kinds of outcome: a call that
stage 02 refused when the stream ended (`StreamEnded`) and a tool that settled
(`ToolSettled`).
"""

from collections.abc import Callable

from toolloop.engine import restart, tool_call
from toolloop.engine.events import Event, StopRequest, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.policy import is_novelai, is_visible, should_end_after_pre_tool_text
from toolloop.states import FunctionCall, IterationState, StreamStatus

Guard = Callable[[IterationState, Event], bool]


def _status(event: Event) -> StreamStatus | None:
    return event.result.status if isinstance(event, StreamEnded) else None


def stream_completed(state: IterationState, event: Event) -> bool:
    """The model finished its reply."""
    return _status(event) is StreamStatus.COMPLETED


def stream_failed(state: IterationState, event: Event) -> bool:
    """The provider call ended in `error` or `timeout`."""
    return _status(event) in (StreamStatus.ERROR, StreamStatus.TIMEOUT)


def stream_empty(state: IterationState, event: Event) -> bool:
    """The model produced nothing at all."""
    return _status(event) is StreamStatus.EMPTY_RESPONSE


def stream_stopped(state: IterationState, event: Event) -> bool:
    """A genuine stop ended the stream."""
    return _status(event) is StreamStatus.STOPPED_BY_USER


def stream_interrupted(state: IterationState, event: Event) -> bool:
    """A follow-up message interrupted the stream."""
    return _status(event) is StreamStatus.FOLLOW_UP_INTERRUPT


def call_malformed(state: IterationState, event: Event) -> bool:
    """The model asked for a tool without call data or with a blank name (SPEC 6.1)."""
    called = _status(event) is StreamStatus.FUNCTION_CALL
    return called and isinstance(event, StreamEnded) and tool_call.valid_name(event.result) is None


def stop_requested(state: IterationState, event: Event) -> bool:
    """A genuine stop was pending at the check this event carries (SPEC 6.2 and 6.7)."""
    return isinstance(event, StreamEnded | ToolSettled) and event.stop is StopRequest.STOP


def _valid_call(event: Event) -> tuple[FunctionCall, str] | None:
    """The call of a well-formed `function_call` stream and its trimmed name."""
    if not isinstance(event, StreamEnded) or event.result.status is not StreamStatus.FUNCTION_CALL:
        return None
    name = tool_call.valid_name(event.result)
    call = event.result.data
    return (call, name) if name is not None and isinstance(call, FunctionCall) else None


def arguments_truncated(state: IterationState, event: Event) -> bool:
    """The provider cut the call's arguments short: it never runs (SPEC 6.4)."""
    valid = _valid_call(event)
    return valid is not None and valid[0].arguments_truncated


def tool_blocked(state: IterationState, event: Event) -> bool:
    """Deliberate mode's allowlist refuses the tool (SPEC 6.5)."""
    valid = _valid_call(event)
    return valid is not None and tool_call.is_blocked(state.turn, valid[1])


def call_refused(state: IterationState, event: Event) -> bool:
    """Stage 02 refused the call without dispatching it: a failure kept in history."""
    return arguments_truncated(state, event) or tool_blocked(state, event)


def tool_succeeded(state: IterationState, event: Event) -> bool:
    """The tool ran and succeeded."""
    return isinstance(event, ToolSettled) and event.result.success


def restart_requested(state: IterationState, event: Event) -> bool:
    """A successful tool asked for an enhanced-context restart (SPEC 6a)."""
    return tool_succeeded(state, event) and _restart_data(event) is not None


def has_stash_key(state: IterationState, event: Event) -> bool:
    """The restart's enrichment item waits in the stash under a key."""
    data = _restart_data(event) if tool_succeeded(state, event) else None
    return data is not None and restart.pending_context_key(data) is not None


def _restart_data(event: Event) -> dict[str, object] | None:
    if not isinstance(event, ToolSettled) or restart.restart_type(event.result.data) is None:
        return None
    data: dict[str, object] = event.result.data
    return data


def outcome_failed(state: IterationState, event: Event) -> bool:
    """The call's outcome is a failure kept in history: a refusal or a failed tool."""
    failed_tool = isinstance(event, ToolSettled) and not event.result.success
    return failed_tool or call_refused(state, event)


def error_cap_reached(state: IterationState, event: Event) -> bool:
    """This failure makes `MAX_CONSECUTIVE_TOOL_ERRORS` in a row (SPEC 4, history step 1)."""
    cap = state.config.max_consecutive_tool_errors
    return outcome_failed(state, event) and state.consecutive_tool_errors + 1 >= cap


def under_impersonation(state: IterationState, event: Event) -> bool:
    """The turn speaks as the user: the tool error loop raises instead of a notice."""
    return state.turn.user_impersonation


def end_turn_requested(state: IterationState, event: Event) -> bool:
    """The tool asked to end the turn (honoured on a failure too, after the cap check)."""
    return isinstance(event, ToolSettled) and event.result.end_turn


def _pre_tool_text(state: IterationState, event: Event) -> str:
    """The visible text of the stream that asked for the call this event answers."""
    if isinstance(event, StreamEnded):
        return event.result.accumulated_text
    return state.pending.stream.accumulated_text if state.pending is not None else ""


def novelai_failure_after_text(state: IterationState, event: Event) -> bool:
    """A NovelAI call failed after visible pre-tool text (SPEC 4, history step 3)."""
    novelai = is_novelai(state.turn.provider) and is_visible(_pre_tool_text(state, event))
    return novelai and outcome_failed(state, event)


def novelai_retries_exhausted(state: IterationState, event: Event) -> bool:
    """This NovelAI failure reaches `NAI_TOOL_FAILURE_RETRY_THRESHOLD`."""
    threshold = state.config.nai_tool_failure_retry_threshold
    failure = novelai_failure_after_text(state, event)
    return failure and state.nai_consecutive_tool_failures + 1 >= threshold


def exit_policy_ends(state: IterationState, event: Event) -> bool:
    """The exit policy ends the turn after this success's pre-tool text (SPEC 7)."""
    pending = state.pending
    if not tool_succeeded(state, event) or pending is None:
        return False
    follow_up = isinstance(event, ToolSettled) and event.requires_follow_up
    text = pending.stream.accumulated_text
    return should_end_after_pre_tool_text(state.turn.provider, pending.name, follow_up, text)


def ceiling_reached(state: IterationState, event: Event) -> bool:
    """The iteration this event would start is `MAX_FUNCTION_CALL_ITERATIONS` (SPEC 4.4)."""
    following = state.iteration if isinstance(event, TurnStarted) else state.iteration + 1
    return following >= state.config.max_function_call_iterations
