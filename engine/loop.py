"""The coordinator (SPEC 4): one handler per move, named after what happened.

Each handler takes the state and the event and returns the `Step`; the table
that maps (phase, event type) to a handler lives in `toolloop.engine.step`.
Handlers write into a `Draft` and build the next state once per event.
"""

from typing import Any

import attrs

from toolloop.engine import guards, restart, tool_call
from toolloop.engine.draft import Draft
from toolloop.engine.effects import (
    ClearStopRequest,
    CountToolUsage,
    DispatchTool,
    Effect,
    ErrorKind,
    Finish,
    IncrementFollowUpCount,
    Level,
    Log,
    MarkToolChainActive,
    NoticeKey,
    QueueStopResponse,
    RaiseError,
    ResetFollowUpCount,
    RetainAffordance,
    SendNotice,
    SetTextSuppression,
    StreamOnce,
    TakeStashedContext,
)
from toolloop.engine.events import StashTaken, StopRequest, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.policy import (
    SHORT_TERM_MEMORY_TOOL,
    is_novelai,
    is_visible,
    should_end_after_pre_tool_text,
)
from toolloop.engine.result import build_result
from toolloop.states import (
    SOFT_WARN_ITERATION_THRESHOLD,
    FunctionCall,
    IterationState,
    JsonObject,
    PendingCall,
    Phase,
    Sticker,
    StreamResult,
    StreamStatus,
    ToolHistoryEntry,
    TurnStatus,
)


@attrs.frozen(kw_only=True, slots=False)
class Step:
    """What `step` returns: the next state and the effects to carry out, in order."""

    state: IterationState
    effects: tuple[Effect, ...]
    move: str
    """The declared move this step took (see `toolloop.specs.machine`)."""


@attrs.frozen(kw_only=True, slots=False)
class HistoryOutcome:
    """Stage 02's `history` outcome: an entry to keep and what it implies."""

    entry: ToolHistoryEntry
    success: bool
    end_turn: bool = False
    response_delivered: bool = False
    selects_sticker: bool = False
    """The call was the sticker tool's: `sticker` replaces the selection (None clears it)."""
    sticker: Sticker | None = None
    requires_follow_up: bool = False


# -- iterations and exits ------------------------------------------------------------------


def begin_iteration(draft: Draft, effects: list[Effect], move: str) -> Step:
    """Start `draft.iteration` by `move`, or finish `timeout` when the ceiling is reached."""
    turn, iteration = draft.turn, draft.iteration
    if iteration >= draft.config.max_function_call_iterations:
        if turn.surface_user_errors:
            effects.append(_notice(NoticeKey.MAX_ITERATIONS, Level.WARNING, iteration))
        return finish(draft, TurnStatus.TIMEOUT, effects, move="ceiling_reached")
    # Iterations only increase, so this fires at most once per attempt.
    if iteration == SOFT_WARN_ITERATION_THRESHOLD and turn.surface_user_errors:
        effects.append(_notice(NoticeKey.STILL_WORKING, Level.WARNING, iteration))
    context = draft.context
    effects.append(
        StreamOnce(
            iteration=iteration,
            function_history=draft.function_history,
            accumulated_model_parts=draft.accumulated_model_parts,
            context=context.items,
            tail_directives=context.tail_directives,
            disabled=context.disabled,
            suppress_text_output=draft.suppress_text_output,
        )
    )
    draft.phase = Phase.STREAMING
    draft.pending = None
    return Step(state=draft.commit(), effects=tuple(effects), move=move)


def next_iteration(draft: Draft, effects: list[Effect], move: str) -> Step:
    """Advance to the next iteration by `move`."""
    draft.iteration = draft.iteration + 1
    return begin_iteration(draft, effects, move)


def finish(
    draft: Draft,
    status: TurnStatus,
    effects: list[Effect],
    sticker: Sticker | None = None,
    *,
    move: str,
) -> Step:
    """End the attempt with `status`, the text already delivered and (if completed) a sticker."""
    draft.phase = Phase.FINISHED
    draft.pending = None
    state = draft.commit()
    result = build_result(state, status, text=state.final_text, sticker=sticker)
    effects.append(Finish(result=result))
    return Step(state=attrs.evolve(state, result=result), effects=tuple(effects), move=move)


def _notice(key: NoticeKey, level: Level, iteration: int) -> SendNotice:
    return SendNotice(key=key, level=level, iteration=iteration)


def turn_started(state: IterationState, event: TurnStarted) -> Step:
    """The attempt begins with iteration 0."""
    return begin_iteration(Draft(state), [], "started")


# -- stage 01 answered ---------------------------------------------------------------------

_TAKES_TEXT = frozenset(
    {StreamStatus.COMPLETED, StreamStatus.STOPPED_BY_USER, StreamStatus.FUNCTION_CALL}
)


def stream_ended(state: IterationState, event: StreamEnded) -> Step:
    """The stream's result is recorded, then its status decides the move."""
    stream = event.result
    draft = Draft(state)
    draft.stream_results = (*state.stream_results, stream)
    if stream.thought_log is not None:
        draft.thought_log = stream.thought_log
    if stream.status in _TAKES_TEXT:
        # Only delivered text is what the turn said (SPEC 3, amended): a stream
        # streamed under suppression keeps the text the user already saw.
        if is_visible(stream.accumulated_text) and not state.suppress_text_output:
            draft.final_text = stream.accumulated_text
        draft.details_text = merge_details(state.details_text, stream.details_content)
    if stream.status is StreamStatus.FUNCTION_CALL:
        if stream.model_parts:
            draft.accumulated_model_parts = (*state.accumulated_model_parts, *stream.model_parts)
        return _function_call(draft, state, event)
    return _BY_STATUS[stream.status](draft, stream)


def merge_details(merged: str, increment: str) -> str:
    """Scene metadata joined by a blank line; blank increments are ignored."""
    if not increment.strip():
        return merged
    return f"{merged}\n\n{increment}" if merged else increment


def _completed(draft: Draft, stream: StreamResult) -> Step:
    effects: list[Effect] = [ResetFollowUpCount()]
    return finish(draft, TurnStatus.COMPLETED, effects, draft.selected_sticker, move="completed")


def _errored(draft: Draft, stream: StreamResult) -> Step:
    status = TurnStatus(stream.status.value)
    return finish(draft, status, [ResetFollowUpCount()], move="stream_failed")


def _empty(draft: Draft, stream: StreamResult) -> Step:
    return finish(draft, TurnStatus.EMPTY_RESPONSE, [], move="empty_response")


def _stopped(draft: Draft, stream: StreamResult) -> Step:
    answer: Effect = QueueStopResponse() if draft.turn.stop_context_queued else ClearStopRequest()
    effects = [answer, ResetFollowUpCount()]
    return finish(draft, TurnStatus.STOPPED_BY_USER, effects, move="stopped_by_user")


def _interrupted(draft: Draft, stream: StreamResult) -> Step:
    effects: list[Effect] = [IncrementFollowUpCount()]
    return finish(draft, TurnStatus.FOLLOW_UP_INTERRUPT, effects, move="follow_up_interrupt")


_BY_STATUS = {
    StreamStatus.COMPLETED: _completed,
    StreamStatus.ERROR: _errored,
    StreamStatus.TIMEOUT: _errored,
    StreamStatus.EMPTY_RESPONSE: _empty,
    StreamStatus.STOPPED_BY_USER: _stopped,
    StreamStatus.FOLLOW_UP_INTERRUPT: _interrupted,
}


# -- stage 02 ------------------------------------------------------------------------------


def _function_call(draft: Draft, state: IterationState, event: StreamEnded) -> Step:
    """Validate the call, honour a genuine stop, then refuse or dispatch it."""
    effects: list[Effect] = [MarkToolChainActive()]
    stream = event.result
    name = tool_call.valid_name(stream)
    if name is None:
        fields = {"iteration": draft.iteration, "data": repr(stream.data)}
        effects.append(Log(level=Level.ERROR, message="Malformed function call", fields=fields))
        return finish(draft, TurnStatus.ERROR, effects, move="call_malformed")
    if guards.stop_requested(state, event):
        return finish(draft, TurnStatus.STOPPED_BY_USER, effects, move="stopped_before_tool")
    if event.stop is StopRequest.FOLLOW_UP:
        effects.append(ClearStopRequest())
    call = _call(stream)
    if guards.arguments_truncated(state, event):
        return _refuse_truncated(draft, stream, call, name, effects)
    if guards.tool_blocked(state, event):
        return _refuse_blocked(draft, stream, call, name, effects)
    context = tool_call.tool_context(
        draft.turn, draft.iteration, draft.short_term_memory_updated, draft.context.items
    )
    effects.append(DispatchTool(call=tool_call.renamed(call, name), context=context))
    draft.phase = Phase.DISPATCHING
    draft.pending = PendingCall(stream=stream, name=name)
    return Step(state=draft.commit(), effects=tuple(effects), move="dispatched")


def tool_settled(state: IterationState, event: ToolSettled) -> Step:
    """A stop during the tool aborts (its result is never fed back); else use the result."""
    draft = Draft(state)
    if guards.stop_requested(state, event):
        return finish(draft, TurnStatus.STOPPED_BY_USER, [], move="stopped_during_tool")
    effects: list[Effect] = [ClearStopRequest()] if event.stop is StopRequest.FOLLOW_UP else []
    pending, result, turn = _pending(state), event.result, state.turn
    stream, name = pending.stream, pending.name
    call = _call(stream)
    message = f"Function call completed: {name} ({event.duration_ms} ms)"
    effects.append(Log(level=Level.INFO, message=message))
    if result.success and not turn.direct_message:
        effects.append(CountToolUsage(name=name))
    if not result.success:
        reason = tool_call.failure_reason(result)
        effects.append(tool_call.failed_notice(state.iteration, call, name, reason, result.data))
    if result.success and turn.deliberate_mode.active:
        effects.append(RetainAffordance(name=name))
    if (trigger := tool_call.trigger_notice(turn, state.iteration, name)) is not None:
        effects.append(trigger)
    if result.success and (kind := restart.restart_type(result.data)) is not None:
        return _restart(draft, pending, kind, result.data, effects)
    if result.success and name == SHORT_TERM_MEMORY_TOOL:
        draft.short_term_memory_updated = True
    sticker_tool = tool_call.is_sticker_tool(name)
    response = tool_call.response_for(name, result)
    outcome = HistoryOutcome(
        entry=tool_call.history_entry(call, name, response, result, _pre_tool_text(draft, stream)),
        success=result.success,
        end_turn=result.end_turn,
        response_delivered=result.success and result.response_delivered,
        selects_sticker=sticker_tool,
        sticker=tool_call.resolve_sticker(turn, result) if sticker_tool else None,
        requires_follow_up=event.requires_follow_up,
    )
    return accept_history(draft, stream, name, outcome, effects)


def _refuse_truncated(
    draft: Draft, stream: StreamResult, call: FunctionCall, name: str, effects: list[Effect]
) -> Step:
    """A truncated call never runs; the model is asked to reissue it whole (step 4)."""
    message = f"Tool call arguments truncated by the provider: {name}"
    effects.append(Log(level=Level.ERROR, message=message))
    reason = tool_call.TRUNCATED_REASON
    effects.append(tool_call.failed_notice(draft.iteration, call, name, reason, None))
    response = tool_call.truncated_response(name)
    entry = tool_call.history_entry(
        attrs.evolve(call, args=None), name, response, None, _pre_tool_text(draft, stream)
    )
    return accept_history(draft, stream, name, HistoryOutcome(entry=entry, success=False), effects)


def _refuse_blocked(
    draft: Draft, stream: StreamResult, call: FunctionCall, name: str, effects: list[Effect]
) -> Step:
    """A tool outside the deliberate-mode allowlist never runs; it counts as a failure."""
    response = tool_call.blocked_response(draft.turn, name)
    message = f"Tool blocked by deliberate tool mode: {name}"
    effects.append(Log(level=Level.WARNING, message=message))
    effects.append(tool_call.failed_notice(draft.iteration, call, name, response["reason"], None))
    entry = tool_call.history_entry(call, name, response, None, _pre_tool_text(draft, stream))
    outcome = HistoryOutcome(
        entry=entry, success=False, selects_sticker=tool_call.is_sticker_tool(name)
    )
    return accept_history(draft, stream, name, outcome, effects)


# -- stage 03 ------------------------------------------------------------------------------


def _restart(
    draft: Draft, pending: PendingCall, kind: str, data: dict[str, Any], effects: list[Effect]
) -> Step:
    """Restart with richer context: no history entry, counters reset, next iteration."""
    draft.consecutive_tool_errors = 0
    draft.nai_consecutive_tool_failures = 0
    key = restart.pending_context_key(data)
    if key is not None:
        effects.append(TakeStashedContext(key=key))
        draft.phase = Phase.TAKING_STASH
        draft.pending = attrs.evolve(pending, restart_type=kind)
        return Step(state=draft.commit(), effects=tuple(effects), move="restart_takes_stash")
    draft.context = restart.apply_restart(draft.context, kind, restart.enhanced_item(data))
    return next_iteration(draft, effects, "restarted")


def stash_taken(state: IterationState, event: StashTaken) -> Step:
    """The stashed enrichment item joins the context; a missing one is only a warning."""
    kind = _pending(state).restart_type or ""
    effects: list[Effect] = []
    if event.item is None:
        message = "Stashed context item is missing or expired; continuing without it"
        effects.append(Log(level=Level.WARNING, message=message))
    draft = Draft(state)
    draft.context = restart.apply_restart(state.context, kind, event.item)
    return next_iteration(draft, effects, "restarted_with_stash")


# -- the history branch of the coordinator -------------------------------------------------


def accept_history(
    draft: Draft, stream: StreamResult, name: str, outcome: HistoryOutcome, effects: list[Effect]
) -> Step:
    """Keep the entry, then apply the error cap, end_turn, NovelAI and exit policies in order."""
    draft.function_history = (*draft.function_history, outcome.entry)
    draft.tool_response_delivered = draft.tool_response_delivered or outcome.response_delivered
    draft.accumulated_model_parts = ()
    if outcome.selects_sticker:
        draft.selected_sticker = outcome.sticker
    if outcome.success:
        draft.consecutive_tool_errors = 0
        draft.nai_consecutive_tool_failures = 0
    else:
        draft.consecutive_tool_errors = draft.consecutive_tool_errors + 1
        if draft.consecutive_tool_errors >= draft.config.max_consecutive_tool_errors:
            return _tool_error_loop(draft, effects)
    if outcome.end_turn:
        return finish(draft, TurnStatus.COMPLETED, effects, draft.selected_sticker, move="end_turn")
    text, provider = stream.accumulated_text, draft.turn.provider
    novelai_text = is_novelai(provider) and is_visible(text)
    if not outcome.success:
        if novelai_text:
            return _novelai_failure(draft, effects)
        return next_iteration(draft, effects, "tool_failed")
    if should_end_after_pre_tool_text(provider, name, outcome.requires_follow_up, text):
        sticker = draft.selected_sticker
        return finish(draft, TurnStatus.COMPLETED, effects, sticker, move="exit_policy_ended")
    if novelai_text:
        _suppress_text(draft, False, effects)
    return next_iteration(draft, effects, "tool_succeeded")


def _tool_error_loop(draft: Draft, effects: list[Effect]) -> Step:
    """Too many failures in a row: notice (or raise under impersonation), finish `error`."""
    turn, count = draft.turn, draft.consecutive_tool_errors
    if turn.user_impersonation:
        message = f"User impersonation aborted: the model failed {count} tool calls in a row."
        effects.append(RaiseError(kind=ErrorKind.IMPERSONATION_ABORTED, message=message))
        draft.phase = Phase.FINISHED
        draft.pending = None
        return Step(state=draft.commit(), effects=tuple(effects), move="impersonation_aborted")
    if turn.surface_user_errors:
        effects.append(_notice(NoticeKey.TOOL_ERROR_LOOP, Level.ERROR, draft.iteration))
    else:
        message = f"Tool error loop: {count} failed tool calls in a row"
        effects.append(Log(level=Level.ERROR, message=message))
    return finish(draft, TurnStatus.ERROR, effects, move="tool_error_loop")


def _novelai_failure(draft: Draft, effects: list[Effect]) -> Step:
    """NovelAI failed after visible text: retry with text suppressed, up to the threshold."""
    draft.nai_consecutive_tool_failures = failures = draft.nai_consecutive_tool_failures + 1
    if failures >= draft.config.nai_tool_failure_retry_threshold:
        effects.append(_notice(NoticeKey.NAI_TOOL_RETRY_EXHAUSTED, Level.ERROR, draft.iteration))
        sticker = draft.selected_sticker
        return finish(
            draft, TurnStatus.COMPLETED, effects, sticker, move="novelai_retries_exhausted"
        )
    _suppress_text(draft, True, effects)
    return next_iteration(draft, effects, "novelai_retry")


def _suppress_text(draft: Draft, suppressed: bool, effects: list[Effect]) -> None:
    """Change text suppression, telling the adapter only when it changes."""
    if draft.suppress_text_output != suppressed:
        effects.append(SetTextSuppression(suppressed=suppressed))
        draft.suppress_text_output = suppressed


def _pre_tool_text(draft: Draft, stream: StreamResult) -> tuple[JsonObject, ...] | None:
    """The entry's pre-tool text: the restarted streams' text, then this stream's (step 15).

    The accumulated parts end with this stream's own, appended when it arrived;
    the ones before them are the restarted streams'.
    """
    parts: tuple[JsonObject, ...] = draft.accumulated_model_parts
    restarted = parts[: len(parts) - len(stream.model_parts)]
    return tool_call.pre_tool_text(restarted, stream.accumulated_text)


def _pending(state: IterationState) -> PendingCall:
    assert state.pending is not None, "DISPATCHING and TAKING_STASH always hold the call"
    return state.pending


def _call(stream: StreamResult) -> FunctionCall:
    assert isinstance(stream.data, FunctionCall), "a valid function_call stream carries its call"
    return stream.data
