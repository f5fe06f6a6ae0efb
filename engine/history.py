"""What a call's outcome leaves in the function history (SPEC 4, history; 6.4-6.5, 6.12-6.16).

The actions of `toolloop.engine.actions` decide when an outcome is kept (a row
runs `keep_refusal` or `keep_result`); this module builds what is kept: one
entry per call (a batch's in the model's order, 6b item 5) with what its
result sets for the turn (the sticker, short-term memory, a delivered
response), and the report of a refused call (`REFUSAL_REPORTS`: the one choice
made by data, not by a row; see the table's header). Cut from the actions so
each module holds one concern: the actions say what a row does, this module
how an entry is made.
"""

import attrs

from toolloop.engine import restart, tool_call
from toolloop.engine.commands import Effect, Level, Log
from toolloop.engine.draft import Draft
from toolloop.engine.guards import Context, Refusal
from toolloop.engine.policy import SHORT_TERM_MEMORY_TOOL
from toolloop.states import (
    BatchCall,
    FunctionCall,
    JsonObject,
    StreamResult,
    ToolHistoryEntry,
    ToolResult,
)


def report_truncated(draft: Draft, call: FunctionCall, name: str, effects: list[Effect]) -> None:
    """A truncated call never runs: logged as an error, noticed as failed (SPEC 6.4)."""
    message = f"Tool call arguments truncated by the provider: {name}"
    effects.append(Log(level=Level.ERROR, message=message))
    reason = tool_call.TRUNCATED_REASON
    effects.append(tool_call.failed_notice(draft.iteration, call, name, reason, None))


def report_blocked(draft: Draft, call: FunctionCall, name: str, effects: list[Effect]) -> None:
    """A tool outside the deliberate-mode allowlist never runs: a warning, a failed notice."""
    reason = tool_call.blocked_response(draft.turn, name)["reason"]
    message = f"Tool blocked by deliberate tool mode: {name}"
    effects.append(Log(level=Level.WARNING, message=message))
    effects.append(tool_call.failed_notice(draft.iteration, call, name, reason, None))


REFUSAL_REPORTS = {Refusal.TRUNCATED: report_truncated, Refusal.BLOCKED: report_blocked}


def keep_refused(
    draft: Draft,
    refusal: Refusal,
    call: FunctionCall,
    name: str,
    text: tuple[JsonObject, ...] | None,
    same_turn: bool = False,
) -> None:
    """A refused call's failure in history: the model is asked to reissue a truncated call
    whole (without the arguments it never finished), or told which tools it may use."""
    if refusal is Refusal.TRUNCATED:
        response = tool_call.truncated_response(name)
        call = attrs.evolve(call, args=None)
    else:
        response = tool_call.blocked_response(draft.turn, name)
        if tool_call.is_sticker_tool(name):
            draft.selected_sticker = None
    keep(draft, tool_call.history_entry(call, name, response, None, text, same_turn))


def keep_settled(
    draft: Draft,
    call: FunctionCall,
    name: str,
    result: ToolResult,
    response: object,
    text: tuple[JsonObject, ...] | None,
    same_turn: bool = False,
) -> None:
    """A settled call's entry, with what its result sets for the turn (SPEC 6.12-6.15)."""
    if result.success and name == SHORT_TERM_MEMORY_TOOL:
        draft.short_term_memory_updated = True
    if tool_call.is_sticker_tool(name):
        draft.selected_sticker = tool_call.resolve_sticker(draft.turn, result)
    if result.success and result.response_delivered:
        draft.tool_response_delivered = True
    entry = tool_call.history_entry(call, name, response, result, text, same_turn)
    keep(draft, entry)


def keep_batch(draft: Draft, stream: StreamResult, batch: tuple[BatchCall, ...]) -> None:
    """One entry per call of the batch, in the model's order, counted in that order.

    The pre-tool text belongs to the first entry (SPEC 6b item 5); the sticker is the
    last selection in that order. A call that asked for a restart answers that its
    context was restarted (6b item 7, see `tool_call.restarted_response`).
    """
    text = entry_text(draft, stream)
    for position, batched in enumerate(batch):
        call, name, result = batched.call, batched.call.name, batched.result
        owned = text if position == 0 else None
        if result is None:
            assert batched.refusal is not None, "a batch is kept once every call is done"
            refusal = Refusal(batched.refusal)
            if refusal is Refusal.DENIED:
                assert batched.denial is not None, "a denied call keeps its reason"
                response = tool_call.denied_response(name, batched.denial)
                entry = tool_call.history_entry(call, name, response, None, owned, position > 0)
                keep(draft, entry)
                continue
            keep_refused(draft, refusal, call, name, owned, position > 0)
            continue
        kind = restart.restart_type(result.data) if result.success else None
        response = (
            tool_call.response_for(name, result)
            if kind is None
            else tool_call.restarted_response(kind)
        )
        keep_settled(draft, call, name, result, response, owned, position > 0)


def keep(draft: Draft, entry: ToolHistoryEntry) -> None:
    """Keep the entry in history (SPEC 4, history); `count_outcome` counts the outcome."""
    # `+` copies the tuple once; `(*history, entry)` would build a list first (RUF005).
    draft.function_history = draft.function_history + (entry,)  # noqa: RUF005
    draft.accumulated_model_parts = ()


def count_outcome(ctx: Context, draft: Draft) -> None:
    """The outcome's entries counted (SPEC 4, history step 1): the counts the context made."""
    draft.consecutive_tool_errors = ctx.errors
    draft.nai_consecutive_tool_failures = ctx.novelai_failures_kept


def entry_text(draft: Draft, stream: StreamResult) -> tuple[JsonObject, ...] | None:
    """The entry's pre-tool text: the restarted streams' text, then this stream's (step 15).

    The accumulated parts end with this stream's own, appended when it arrived;
    the ones before them are the restarted streams'.
    """
    parts: tuple[JsonObject, ...] = draft.accumulated_model_parts
    restarted = parts[: len(parts) - len(stream.model_parts)]
    return tool_call.pre_tool_text(restarted, stream.accumulated_text)
