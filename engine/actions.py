"""The actions (SPEC 4): what each row of the table does, named for what it does.

An action takes the event's `Context`, the `Draft` of the next state and the
effects so far, and only builds: it writes the draft and appends effects. It
never chooses the move; the rows of `toolloop.engine.table` do, by their
guards, and list the actions each move runs, in order. `step` sets the phase
the row names and builds the next state once per event.

Every function a row may name is here, and only here (the table checks it);
how an outcome becomes its history entries, which several actions share, is
`toolloop.engine.history`.
"""

import functools
from collections.abc import Callable

import attrs

from toolloop.engine import batch as batches
from toolloop.engine import build, history, restart, tool_call
from toolloop.engine.commands import (
    AskApproval,
    AwaitTools,
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
    StartTool,
    TakeStashedContext,
    WithdrawApproval,
)
from toolloop.engine.draft import Draft
from toolloop.engine.events import (
    ApprovalDecided,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
)
from toolloop.engine.guards import Context, Refusal
from toolloop.engine.policy import SHORT_TERM_MEMORY_TOOL, is_visible
from toolloop.engine.result import build_result
from toolloop.states import (
    SOFT_WARN_ITERATION_THRESHOLD,
    FunctionCall,
    PendingCall,
    Sticker,
    StreamResult,
    StreamStatus,
    TurnStatus,
)
from toolloop.states.loop_config import in_seconds

Action = Callable[[Context, Draft, list[Effect]], None]
"""What a row of `toolloop.engine.table` runs: reads the event, writes the draft and effects."""

# Read on every event, so module names: a member read off its Enum class is a
# class attribute lookup, several times slower on CPython 3.11.
_FUNCTION_CALL, _COMPLETED = StreamStatus.FUNCTION_CALL, StreamStatus.COMPLETED
_STOPPED, _FOLLOW_UP, _INFO = StreamStatus.STOPPED_BY_USER, StopRequest.FOLLOW_UP, Level.INFO


# An effect without fields is a value: one instance of each serves every step.
_RESET_FOLLOW_UPS = ResetFollowUpCount()
_INCREMENT_FOLLOW_UPS = IncrementFollowUpCount()
_QUEUE_STOP_RESPONSE = QueueStopResponse()
_CLEAR_STOP_REQUEST = ClearStopRequest()
_MARK_CHAIN_ACTIVE = MarkToolChainActive()
_AWAIT_TOOLS = AwaitTools()


# -- iterations and exits ------------------------------------------------------------------


def advance(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The next iteration is the one the loop starts or times out at."""
    draft.iteration = draft.iteration + 1


def begin_iteration(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Start `draft.iteration`: stream once with the history and the context (SPEC 4.1, 4.2)."""
    turn, iteration = draft.turn, draft.iteration
    # Iterations only increase, so this fires at most once per attempt.
    if iteration == SOFT_WARN_ITERATION_THRESHOLD and turn.surface_user_errors:
        effects.append(_notice(NoticeKey.STILL_WORKING, Level.WARNING, iteration))
    context = draft.context
    effects.append(
        build.stream_once(
            iteration=iteration,
            function_history=draft.function_history,
            accumulated_model_parts=draft.accumulated_model_parts,
            context=context.items,
            tail_directives=context.tail_directives,
            disabled=context.disabled,
            suppress_text_output=draft.suppress_text_output,
        )
    )
    draft.pending = None


def finish_timeout(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The ceiling is reached without finishing: notice, no sticker, `timeout` (SPEC 4.4)."""
    if draft.turn.surface_user_errors:
        effects.append(_notice(NoticeKey.MAX_ITERATIONS, Level.WARNING, draft.iteration))
    finish(draft, TurnStatus.TIMEOUT, effects)


def finish(
    draft: Draft, status: TurnStatus, effects: list[Effect], sticker: Sticker | None = None
) -> None:
    """End the attempt with `status`, the text already delivered and (if completed) a sticker."""
    draft.pending = None
    result = build_result(draft.peek(), status, text=draft.final_text, sticker=sticker)
    draft.result = result
    effects.append(Finish(result=result))


def finish_with_sticker(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Finish `completed` with the text already delivered and the selected sticker."""
    finish(draft, TurnStatus.COMPLETED, effects, draft.selected_sticker)


@functools.lru_cache(maxsize=256)
def _count_usage(name: str) -> CountToolUsage:
    """The effect counting a use of tool `name`: a value, so one per name serves every step."""
    return CountToolUsage(name=name)


def _notice(key: NoticeKey, level: Level, iteration: int) -> SendNotice:
    return SendNotice(key=key, level=level, iteration=iteration)


# -- stage 01 answered ---------------------------------------------------------------------


def record_stream(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The stream's result is recorded, with its thought log, text and details (SPEC 4.2)."""
    event = ctx.event
    assert isinstance(event, StreamEnded), "only STREAMING rows record a stream"
    stream = event.result
    # `+` copies the tuple once; `(*results, stream)` would build a list first (RUF005).
    draft.stream_results = draft.stream_results + (stream,)  # noqa: RUF005
    if stream.thought_log is not None:
        draft.thought_log = stream.thought_log
    status = stream.status
    # Compared by identity: hashing an Enum member (a set lookup) is a Python-level call.
    if status is _FUNCTION_CALL or status is _COMPLETED or status is _STOPPED:
        # Only delivered text is what the turn said (SPEC 3, amended): a stream
        # streamed under suppression keeps the text the user already saw.
        if is_visible(stream.accumulated_text) and not draft.suppress_text_output:
            draft.final_text = stream.accumulated_text
        if stream.details_content:
            draft.details_text = merge_details(draft.details_text, stream.details_content)
    if status is _FUNCTION_CALL and stream.model_parts:
        draft.accumulated_model_parts = (*draft.accumulated_model_parts, *stream.model_parts)


def merge_details(merged: str, increment: str) -> str:
    """Scene metadata joined by a blank line; blank increments are ignored."""
    if not increment.strip():
        return merged
    return f"{merged}\n\n{increment}" if merged else increment


def reset_follow_ups(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The channel's follow-up count starts again."""
    effects.append(_RESET_FOLLOW_UPS)


def notice_inactivity(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The provider went silent: the inactivity notice (a warning) names the timeout,
    unless the turn suppresses user errors (SPEC 5, 9)."""
    if not draft.turn.suppress_user_errors:
        key, level = NoticeKey.STREAM_INACTIVITY_TIMEOUT, Level.WARNING
        details = {"seconds": in_seconds(draft.config.stream_sdk_call_timeout_ms)}
        effects.append(SendNotice(key=key, level=level, iteration=draft.iteration, details=details))


def finish_stream_failed(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The provider call failed: finish with its status, no sticker."""
    finish(draft, TurnStatus(_stream(ctx).status.value), effects)


def finish_empty(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The model said nothing: finish `empty_response`."""
    finish(draft, TurnStatus.EMPTY_RESPONSE, effects)


def answer_stop(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A queued stop context is answered first, else the stop request is cleared."""
    queued = draft.turn.stop_context_queued
    effects.append(_QUEUE_STOP_RESPONSE if queued else _CLEAR_STOP_REQUEST)


def finish_stopped(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Finish `stopped_by_user` with the text already delivered."""
    finish(draft, TurnStatus.STOPPED_BY_USER, effects)


def finish_interrupted(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A follow-up interrupted the stream: count it and finish `follow_up_interrupt`."""
    effects.append(_INCREMENT_FOLLOW_UPS)
    finish(draft, TurnStatus.FOLLOW_UP_INTERRUPT, effects)


# -- stage 02 ------------------------------------------------------------------------------


def mark_chain_active(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A `function_call` stream makes the channel's tool-call chain active (SPEC 4.3)."""
    effects.append(_MARK_CHAIN_ACTIVE)


def finish_malformed(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """No call data or a blank name: logged with the result, finish `error` (SPEC 6.1)."""
    fields = {"iteration": draft.iteration, "data": repr(_stream(ctx).data)}
    effects.append(Log(level=Level.ERROR, message="Malformed function call", fields=fields))
    finish(draft, TurnStatus.ERROR, effects)


def clear_follow_up(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A queued follow-up never turns a tool chain into a stop: it is cleared (SPEC 6.2, 6.7)."""
    if ctx.stop is _FOLLOW_UP:
        effects.append(_CLEAR_STOP_REQUEST)


def dispatch(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The registry runs the call under its trimmed name, told about its turn (SPEC 6.3, 6.6)."""
    event, call, name = ctx.event, ctx.call, ctx.name
    assert isinstance(event, StreamEnded) and call is not None and name is not None
    if ctx.batch:
        _start_batch(ctx, draft, effects)
        return
    context = tool_call.tool_context(
        draft.turn, draft.iteration, draft.short_term_memory_updated, draft.context.items
    )
    effects.append(
        build.dispatch_tool(
            call=tool_call.renamed(call, name),
            context=context,
            pre_tool_text=event.result.accumulated_text,
            text_suppressed=draft.suppress_text_output,
        )
    )
    draft.pending = build.pending_call(stream=event.result, name=name)


def _start_batch(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A batch: each refused call is reported, then the first calls start (SPEC 6b 2-3)."""
    for call in ctx.batch:
        if call.refusal is not None:
            history.REFUSAL_REPORTS[Refusal(call.refusal)](
                draft, call.call, call.call.name, effects
            )
    stream = _stream(ctx)
    draft.pending = PendingCall(stream=stream, name=_name(ctx), batch=ctx.batch)
    for index, call in enumerate(ctx.batch):
        if call.waiting:  # they wait together (SPEC 6c)
            _ask(draft, index, effects)
    _start_ready(draft, effects)


def _ask(draft: Draft, index: int, effects: list[Effect]) -> None:
    """Ask the host about the call at `index`, bound to its exact arguments (SPEC 6c)."""
    assert draft.pending is not None
    request = tool_call.approval_request(draft.turn, draft.pending.batch[index].call)
    timeout_ms = draft.config.tool_approval_timeout_ms
    effects.append(AskApproval(request=request, index=index, timeout_ms=timeout_ms))


def settle_in_batch(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A call of the batch settled: its result waits for the others; the next calls start."""
    assert draft.pending is not None, "DISPATCHING always holds the call"
    draft.pending = attrs.evolve(draft.pending, batch=ctx.batch)
    result = ctx.result
    if result is not None and result.success and ctx.name == SHORT_TERM_MEMORY_TOOL:
        draft.short_term_memory_updated = True  # the calls that start later are refused it
    if ctx.stop_requested:  # a stop starts no queued call; the ones running settle (6b.4)
        effects.append(_AWAIT_TOOLS)
        return
    _start_ready(draft, effects)


def _start_ready(draft: Draft, effects: list[Effect]) -> None:
    """Start the calls the parallel limit and exclusivity allow, then wait for one to settle.

    A call that is the only one running is a `DispatchTool`, awaited as a single
    call is; calls running beside others are `StartTool`s, and the step waits for
    the next of them with `AwaitTools` (SPEC 6b item 3). While a call waits for
    approval nothing is awaited inline, so its decision is taken as it arrives.
    """
    pending = draft.pending
    assert pending is not None and pending.batch
    limit = draft.config.tool_parallel_limit
    starting, frontier = batches.ready(pending.batch, pending.started, limit)
    batch = batches.started_calls(pending.batch, starting)
    draft.pending = attrs.evolve(pending, batch=batch, started=frontier)
    context = tool_call.tool_context(
        draft.turn, draft.iteration, draft.short_term_memory_updated, draft.context.items
    )
    alone = sum(call.running for call in batch) == 1 and not any(call.waiting for call in batch)
    text, suppressed = pending.stream.accumulated_text, draft.suppress_text_output
    inline = len(starting) == 1 and alone
    start = DispatchTool if inline else StartTool
    for index in starting:
        effects.append(
            start(
                call=batch[index].call,
                context=context,
                index=index,
                pre_tool_text=text,
                text_suppressed=suppressed,
            )
        )
    if not inline:
        effects.append(_AWAIT_TOOLS)


def keep_refusal(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A refused call never runs; its failure is kept in history (SPEC 6.4, then 6.5).

    A batch whose every call was refused keeps each, in the model's order (6b.5).
    """
    stream = _stream(ctx)
    if ctx.batch:
        for refused in ctx.batch:
            report = history.REFUSAL_REPORTS[Refusal(refused.refusal)]
            report(draft, refused.call, refused.call.name, effects)
        history.keep_batch(draft, stream, ctx.batch)
    else:
        assert ctx.refusal is not None, "only the rows of a refused call keep a refusal"
        call, name = _call(ctx), _name(ctx)
        history.REFUSAL_REPORTS[ctx.refusal](draft, call, name, effects)
        history.keep_refused(draft, ctx.refusal, call, name, history.entry_text(draft, stream))
    history.count_outcome(ctx, draft)


def abort_stopped(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A genuine stop aborts before or during the tool; nothing of the call is kept."""
    finish(draft, TurnStatus.STOPPED_BY_USER, effects)


def report_settled(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The tool is logged, counted, noticed, retained (SPEC 6.8-6.10, in that order)."""
    event, name, call = ctx.event, ctx.name, ctx.call
    assert isinstance(event, ToolSettled) and name is not None and call is not None
    result, turn, iteration = event.result, draft.turn, draft.iteration
    message = f"Function call completed: {name} ({event.duration_ms} ms)"
    effects.append(build.log(level=_INFO, message=message))
    if result.success and not turn.direct_message:
        effects.append(_count_usage(name))
    if not result.success:
        reason = tool_call.failure_reason(result)
        effects.append(tool_call.failed_notice(iteration, call, name, reason, result.data))
    if turn.deliberate_mode.active:
        if result.success:
            effects.append(RetainAffordance(name=name))
        if (trigger := tool_call.trigger_notice(turn, iteration, name)) is not None:
            effects.append(trigger)


def keep_result(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The tool's result becomes the history entry the model reads (SPEC 6.12-6.16)."""
    result, name, call = ctx.result, ctx.name, ctx.call
    assert result is not None and name is not None and call is not None
    assert draft.pending is not None, "DISPATCHING always holds the call"
    if ctx.batch:
        history.keep_batch(draft, draft.pending.stream, ctx.batch)
    else:
        response = tool_call.response_for(name, result)
        text = history.entry_text(draft, draft.pending.stream)
        history.keep_settled(draft, call, name, result, response, text)
    history.count_outcome(ctx, draft)


# -- approval (SPEC 6c) -------------------------------------------------------------------


def report_decision(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A decision is logged; a denial or an unanswered request is noticed as a failure."""
    event, call, name = ctx.event, _call(ctx), _name(ctx)
    assert isinstance(event, ApprovalDecided)
    decided = ctx.batch[event.index]
    if decided.denial is None:
        by = event.decision.by if event.decision is not None else None
        effects.append(Log(level=_INFO, message=f"Tool call approved: {name}", fields={"by": by}))
        return
    effects.append(Log(level=Level.WARNING, message=f"Tool call not approved: {name}"))
    effects.append(tool_call.failed_notice(draft.iteration, call, name, decided.denial, None))


def resume_batch(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The batch as the decision left it: an approved call starts when it may (SPEC 6c)."""
    assert draft.pending is not None, "DISPATCHING always holds the call"
    draft.pending = attrs.evolve(draft.pending, batch=ctx.batch)
    _start_ready(draft, effects)


def refuse_decision(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A decision for other arguments is refused and logged; the call is asked again.

    The wait keeps its first deadline (`AskApproval`): a wrong answer buys no time.
    """
    event, name = ctx.event, _name(ctx)
    assert isinstance(event, ApprovalDecided) and event.decision is not None
    fields = {"call_id": _call(ctx).call_id, "digest": event.decision.digest}
    message = f"Approval decision refused: it was given for other arguments of {name}"
    effects.append(Log(level=Level.WARNING, message=message, fields=fields))
    _ask(draft, event.index, effects)
    effects.append(_AWAIT_TOOLS)


def withdraw_request(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A kill while waiting withdraws the request, so the host can retire its prompt."""
    event = ctx.event
    assert isinstance(event, ApprovalDecided) and draft.pending is not None
    draft.pending = attrs.evolve(draft.pending, batch=ctx.batch)
    effects.append(WithdrawApproval(request=tool_call.approval_request(draft.turn, _call(ctx))))


def await_batch(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Wait for the calls still running or waiting after a kill (SPEC 6b item 4)."""
    effects.append(_AWAIT_TOOLS)


# -- stage 03 ------------------------------------------------------------------------------


def restart_context(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Restart with the tool's enhanced item: no history entry, counters reset (SPEC 6a)."""
    _reset_counters(draft)
    data, kind = ctx.restart_data, _restart_type(ctx)
    assert isinstance(data, dict), "a restart's data is an object"
    draft.context = restart.apply_restart(draft.context, kind, restart.enhanced_item(data))


def take_stash(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Restart with a stashed item: ask for it, holding the call until it comes (SPEC 6a)."""
    _reset_counters(draft)
    data = ctx.restart_data
    assert isinstance(data, dict), "a restart's data is an object"
    key = restart.pending_context_key(data)
    assert key is not None, "the row taking the stash is guarded by has_stash_key"
    effects.append(TakeStashedContext(key=key))
    assert draft.pending is not None, "DISPATCHING always holds the call"
    draft.pending = attrs.evolve(draft.pending, restart_type=_restart_type(ctx))


def join_stash(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """The stashed enrichment item joins the context; a missing one is only a warning."""
    event = ctx.event
    assert isinstance(event, StashTaken) and draft.pending is not None
    kind = draft.pending.restart_type or ""
    if event.item is None:
        message = "Stashed context item is missing or expired; continuing without it"
        effects.append(Log(level=Level.WARNING, message=message))
    draft.context = restart.apply_restart(draft.context, kind, event.item)


def _reset_counters(draft: Draft) -> None:
    draft.consecutive_tool_errors = 0
    draft.nai_consecutive_tool_failures = 0


# -- the history branch of the coordinator -------------------------------------------------


def raise_impersonation(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Too many failures while speaking as the user: the attempt raises instead."""
    count = _failures_in_a_row(draft)
    message = f"User impersonation aborted: the model failed {count} tool calls in a row."
    effects.append(RaiseError(kind=ErrorKind.IMPERSONATION_ABORTED, message=message))
    draft.pending = None


def finish_error_loop(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """Too many failures in a row: the tool error loop notice (or a log), finish `error`."""
    turn, count = draft.turn, _failures_in_a_row(draft)
    if turn.surface_user_errors:
        effects.append(_notice(NoticeKey.TOOL_ERROR_LOOP, Level.ERROR, draft.iteration))
    else:
        message = f"Tool error loop: {count} failed tool calls in a row"
        effects.append(Log(level=Level.ERROR, message=message))
    finish(draft, TurnStatus.ERROR, effects)


def _failures_in_a_row(draft: Draft) -> int:
    """The failures in a row that reached the cap: a batch may have gone on counting
    after it (a later success resets the count), so never less than the cap."""
    count: int = draft.consecutive_tool_errors
    cap: int = draft.config.max_consecutive_tool_errors
    return max(count, cap)


def count_novelai_failure(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A NovelAI failure after visible text counts toward the retry threshold."""
    draft.nai_consecutive_tool_failures = ctx.novelai_failures


def finish_novelai_exhausted(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """NovelAI retries are used up: notice, finish `completed` with the delivered text."""
    effects.append(_notice(NoticeKey.NAI_TOOL_RETRY_EXHAUSTED, Level.ERROR, draft.iteration))
    finish_with_sticker(ctx, draft, effects)


def suppress_text(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """NovelAI retries with its text suppressed."""
    _suppress_text(draft, True, effects)


def unsuppress_after_novelai_text(ctx: Context, draft: Draft, effects: list[Effect]) -> None:
    """A NovelAI success after visible text lets text through again (SPEC 4, history step 5)."""
    if ctx.novelai_text:
        _suppress_text(draft, False, effects)


def _suppress_text(draft: Draft, suppressed: bool, effects: list[Effect]) -> None:
    """Change text suppression, telling the adapter only when it changes."""
    if draft.suppress_text_output != suppressed:
        effects.append(SetTextSuppression(suppressed=suppressed))
        draft.suppress_text_output = suppressed


# -- what the event carries ----------------------------------------------------------------


def _stream(ctx: Context) -> StreamResult:
    assert isinstance(ctx.event, StreamEnded), "only STREAMING rows read the stream"
    return ctx.event.result


def _call(ctx: Context) -> FunctionCall:
    assert ctx.call is not None, "a valid or pending call carries its call"
    return ctx.call


def _name(ctx: Context) -> str:
    assert ctx.name is not None, "a valid or pending call has its trimmed name"
    return ctx.name


def _restart_type(ctx: Context) -> str:
    assert ctx.restart is not None, "restart rows are guarded by restart_requested"
    return ctx.restart
