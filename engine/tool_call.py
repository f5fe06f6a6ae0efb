"""Stage 02 decisions (SPEC 6): what the model is told about each call.

Everything here is a pure function of the call, the turn and the tool's result;
the rows of `toolloop.engine.table` decide when each applies.
"""

from typing import Any

import attrs

from toolloop.engine import build
from toolloop.engine.commands import Level, NoticeKey, SendNotice
from toolloop.engine.policy import SHORT_TERM_MEMORY_TOOL, STICKER_TOOL, is_visible
from toolloop.states import (
    SOFT_WARN_ITERATION_THRESHOLD,
    ApprovalRequest,
    ContextItem,
    FunctionCall,
    JsonObject,
    Sticker,
    StreamResult,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
    TurnSettings,
    args_digest,
)
from toolloop.states.loop_config import in_seconds

FAILED = "tool_execution_failed"
DENIED = "tool_call_denied"
BLOCKED = "blocked_by_deliberate_tool_mode"
GENERIC_FAILURE = "The tool call failed without an error message."
TRUNCATED_REASON = (
    "The provider truncated this tool call's arguments, so nothing was executed or "
    "updated. Reissue the complete call, with all of its arguments, in one message."
)


def valid_name(stream: StreamResult) -> str | None:
    """The trimmed tool name of a well-formed call, or None for a malformed one."""
    call = stream.data
    if not isinstance(call, FunctionCall):
        return None
    return call.name.strip() or None


def renamed(call: FunctionCall, name: str) -> FunctionCall:
    """The call under its trimmed name (the same object when it was already trimmed)."""
    return call if call.name == name else attrs.evolve(call, name=name)


_MEMORY_UPDATED = frozenset({SHORT_TERM_MEMORY_TOOL})
_ALL_AVAILABLE: frozenset[str] = frozenset()


def tool_context(
    turn: TurnSettings, iteration: int, memory_updated: bool, items: tuple[ContextItem, ...]
) -> ToolContext:
    """What the tool is told about its turn (step 3); `items`: the live context."""
    return build.tool_context(
        channel_id=turn.channel_id,
        user_id=turn.user_id,
        guild_id=turn.guild_id,
        locale=turn.locale,
        provider=turn.provider,
        persona_name=turn.persona.name,
        user_impersonation=turn.user_impersonation,
        iteration=iteration,
        suppress_progress_notices=not turn.surface_user_errors,
        show_kill_hint=iteration >= SOFT_WARN_ITERATION_THRESHOLD,
        unavailable_for_turn=_MEMORY_UPDATED if memory_updated else _ALL_AVAILABLE,
        context_items=items,
    )


def is_blocked(turn: TurnSettings, name: str) -> bool:
    """Deliberate mode with a non-empty allowlist refuses a tool not on it (step 5)."""
    mode = turn.deliberate_mode
    return mode.active and bool(mode.allowed) and name not in mode.allowed


def truncated_response(name: str) -> JsonObject:
    """What the model reads for a call refused for truncated arguments (step 4)."""
    return {"status": FAILED, "tool_name": name, "reason": TRUNCATED_REASON}


def blocked_response(turn: TurnSettings, name: str) -> JsonObject:
    """What the model reads for a call refused by the allowlist, so it can adapt (step 5)."""
    return {
        "status": BLOCKED,
        "tool_name": name,
        "allowed_tool_names": list(turn.deliberate_mode.allowed),
        "reason": f"The tool {name} was not exposed this turn; use one of the allowed tools.",
    }


def approval_request(turn: TurnSettings, call: FunctionCall) -> ApprovalRequest:
    """What the host is asked about a call (SPEC 6c), bound to its exact arguments.

    The arguments are the call's own; the interpreter redacts their secrets before
    the host sees them, as it does for the failed-tool notice.
    """
    return ApprovalRequest(
        tool=call.name,
        call_id=call.call_id,
        args=call.args,
        channel_id=turn.channel_id,
        user_id=turn.user_id,
        digest=args_digest(call.args),
    )


WITHDRAWN_REASON = "The turn was stopped while this tool call waited for approval."


def denied_reason(reason: str | None) -> str:
    """Why a person's denial kept the call from running, in their words when they gave any."""
    if reason and reason.strip():
        return f"A person declined this tool call: {reason.strip()}"
    return "A person declined this tool call."


def unanswered_reason(timeout_ms: int) -> str:
    """Why a call nobody approved in time never ran: `TOOL_APPROVAL_TIMEOUT_MS` in seconds."""
    return f"Nobody approved this tool call within {in_seconds(timeout_ms)} s, so it was not run."


def denied_response(name: str, reason: str) -> JsonObject:
    """What the model reads for a call that was denied or never approved (SPEC 6c)."""
    return {"status": DENIED, "tool_name": name, "reason": reason}


def failure_reason(result: ToolResult) -> str:
    """The reason of a failure: its message, else its error, else a generic text."""
    return result.message or result.error or GENERIC_FAILURE


def response_for(name: str, result: ToolResult) -> Any:
    """What the model reads for a dispatched call (step 14)."""
    if result.success:
        return {"status": "completed"} if result.data is None else result.data
    return {"status": FAILED, "reason": failure_reason(result), "tool_name": name}


RESTARTED = "context_restarted"


def restarted_response(kind: str) -> JsonObject:
    """What a call of a batch of two or more that asked for a restart answers (SPEC 6b.7).

    Every call of a batch must be answered in the next request, so the restarting
    call is: its context was added, and the enriched context follows the batch.
    """
    return {
        "status": RESTARTED,
        "type": kind,
        "reason": "The requested context was added to the conversation after these results.",
    }


def resolve_sticker(turn: TurnSettings, result: ToolResult) -> Sticker | None:
    """The sendable guild sticker a sticker-tool success selected, or None (step 13)."""
    data = result.data
    if not result.success or not isinstance(data, dict):
        return None
    if data.get("status") != "sticker_selected_successfully":
        return None
    wanted = data.get("sticker_id")
    return next((s for s in turn.guild_stickers if s.id == wanted and s.sendable), None)


def history_entry(
    call: FunctionCall,
    name: str,
    response: Any,
    result: ToolResult | None,
    pre_tool_text: tuple[JsonObject, ...] | None,
    same_turn: bool = False,
) -> ToolHistoryEntry:
    """The call/response pair the model sees from now on, with its pre-tool text (step 15).

    `same_turn`: a later call of a batch, made in the same reply as the entry before.
    """
    return build.tool_history_entry(
        function_call=renamed(call, name),
        function_response={"name": name, "response": {"result": response}},
        image_metadata=None if result is None else result.image_metadata,
        pre_tool_call_text_parts=pre_tool_text,
        same_turn=same_turn,
    )


def pre_tool_text(restarted: tuple[JsonObject, ...], text: str) -> tuple[JsonObject, ...] | None:
    """Everything the model said since the last entry, as text parts (step 15, amended).

    `restarted` are the model parts of the streams that ended in a restart since
    then: their text parts (`{"type": "text", ...}`) come first, in order, then
    this stream's visible text. None when there is neither.
    """
    parts = [part for part in restarted if part.get("type") == "text"] if restarted else []
    if is_visible(text):
        parts.append({"type": "text", "text": text})
    return tuple(parts) if parts else None


def failed_notice(
    iteration: int, call: FunctionCall, name: str, reason: str, data: Any
) -> SendNotice:
    """The hidden failed-tool notice; the interpreter redacts secrets before sending."""
    return SendNotice(
        key=NoticeKey.TOOL_CALL_FAILED,
        level=Level.ERROR,
        hidden=True,
        iteration=iteration,
        details={"tool_name": name, "reason": reason, "args": call.args, "data": data},
    )


def trigger_notice(turn: TurnSettings, iteration: int, name: str) -> SendNotice | None:
    """The hidden notice naming the trigger that admitted a tool (step 10)."""
    mode = turn.deliberate_mode
    trigger = mode.triggers.get(name) if mode.active else None
    if trigger is None:
        return None
    return SendNotice(
        key=NoticeKey.DELIBERATE_TRIGGER,
        level=Level.INFO,
        hidden=True,
        iteration=iteration,
        details={"tool_name": name, "trigger": trigger.trigger, "source": trigger.source},
    )


def is_sticker_tool(name: str) -> bool:
    """The sticker tool's every result replaces the selection (a miss clears it)."""
    return name == STICKER_TOOL
