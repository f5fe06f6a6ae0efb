"""The JSON document `toolloop simulate` prints, derived from a run's trace (SCENARIOS.md).

Everything here is read off the trace (and what the channel received), so the
same report comes out of a live run and of a replayed one.

Its size is linear in the work: each provider call's effect names how many
history entries, model parts and context items it carried rather than
repeating them (the final history is printed once, the parts sent per call in
`model_parts_sent`), so a long chain does not print its history once per call.
"""

from __future__ import annotations

from typing import Any

import attrs

from toolloop.engine.commands import (
    AskApproval,
    DispatchTool,
    Effect,
    IncrementFollowUpCount,
    MarkToolChainActive,
    QueueStopResponse,
    ResetFollowUpCount,
    SetTextSuppression,
    StartTool,
    StreamOnce,
)
from toolloop.engine.events import ApprovalDecided, StopRequest, StreamEnded, ToolSettled
from toolloop.engine.restart import restart_type
from toolloop.engine.step import initial_state, step
from toolloop.engine.trace import Trace, TraceStep
from toolloop.states import (
    ConfigWarning,
    GenerationTurnResult,
    IterationState,
    StreamStatus,
    Verdict,
)
from toolloop.states.convert import to_json

ABORTS = frozenset(
    {"call_malformed", "stopped_before_tool", "stopped_during_tool", "stopped_while_waiting"}
)
RESTARTS = frozenset(
    {"restarted", "restart_takes_stash", "denied_restarted", "denied_restart_takes_stash"}
)
WAITING = frozenset({"decided", "withdrawn", "decision_refused"})
"""The moves of a decision after which the batch goes on."""


def report(
    trace: Trace,
    *,
    notices: list[dict[str, Any]],
    delivered: list[str],
    config_warnings: tuple[ConfigWarning, ...],
    raised: BaseException | None,
    approvals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The simulate document for a run that recorded `trace`; `delivered`: the channel's texts."""
    final = final_state(trace)
    effects = [effect for record in trace.steps for effect in record.effects]
    return {
        "result": None if final.result is None or raised else result_json(final.result),
        "provider_calls": len(final.stream_results),
        "tool_calls": tool_calls(trace.steps),
        "function_history": history_json(final),
        "notices": notices,
        "channel": channel_json(effects),
        "delivered": delivered,
        "model_parts_sent": [
            list(effect.accumulated_model_parts)
            for effect in effects
            if isinstance(effect, StreamOnce)
        ],
        "config_warnings": [to_json(warning) for warning in config_warnings],
        "effects": [effect_json(effect) for effect in effects],
        "approvals": [] if approvals is None else approvals,
        "raised": None
        if raised is None
        else {"type": type(raised).__name__, "message": str(raised)},
    }


def final_state(trace: Trace) -> IterationState:
    """The state after the trace's last step, rebuilt through `step`."""
    state = initial_state(trace.config, trace.turn)
    for record in trace.steps:
        state = step(state, record.event).state
    return state


def result_json(result: GenerationTurnResult) -> dict[str, Any]:
    """The stable keys of the result."""
    owner = result.thought_log_owner
    owner_json: dict[str, Any] | None = None
    if owner is not None:
        owner_json = {"type": owner.type}
        if owner.type == "user_impersonation":
            owner_json |= {"username": owner.username, "avatar_url": owner.avatar_url}
        elif owner.type == "persona":
            owner_json["persona"] = to_json(owner.persona)
    sticker = result.selected_sticker
    return {
        "status": result.status.value,
        "persona_responses": [to_json(response) for response in result.persona_responses],
        "selected_sticker": None if sticker is None else {"id": sticker.id, "name": sticker.name},
        "tool_response_delivered": bool(result.tool_response_delivered),
        "thought_log_owner": owner_json,
    }


def tool_calls(steps: tuple[TraceStep, ...]) -> list[dict[str, Any]]:
    """Every function call the loop handled, with whether it ran and how it ended.

    The calls of a batch share their iteration and are listed in the model's order.
    """
    calls: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []
    digests: dict[int, str] = {}
    iteration = 0
    for record in steps:
        event = record.event
        if isinstance(event, StreamEnded) and event.result.status is StreamStatus.FUNCTION_CALL:
            batch = _batch_json(iteration, event, record)
            calls += batch
        elif isinstance(event, ApprovalDecided) and batch:
            status = _approval(event, digests[event.index])
            batch[event.index]["approval"] = status or batch[event.index]["approval"]
            if record.move not in WAITING:
                for call in batch:
                    restarted = bool(call.get("restart"))
                    call["outcome"] = _settled_outcome(restarted, record.move, len(batch))
        elif isinstance(event, ToolSettled) and batch:
            settled = batch[event.index]
            settled["success"] = event.result.success
            settled["restart"] = event.result.success and restart_type(event.result.data)
            if record.move != "call_settled":
                for call in batch:
                    restarted = bool(call.get("restart"))
                    call["outcome"] = _settled_outcome(restarted, record.move, len(batch))
        for effect in record.effects:
            if isinstance(effect, StreamOnce):
                iteration = effect.iteration
            elif isinstance(effect, DispatchTool | StartTool) and batch:
                batch[effect.index]["dispatched"] = True
            elif isinstance(effect, AskApproval):
                digests[effect.index] = effect.request.digest
    for call in calls:
        call.pop("restart", None)
    return calls


def _batch_json(iteration: int, event: StreamEnded, record: TraceStep) -> list[dict[str, Any]]:
    stream = event.result
    outcome = "history" if record.move == "dispatched" else _outcome(record.move)
    return [
        {
            "iteration": iteration,
            "name": None if call is None else (call.name.strip() or call.name),
            "args": None if call is None else call.args,
            "call_id": None if call is None else call.call_id,
            "dispatched": False,
            "success": False,
            "outcome": outcome,
            "approval": None,
        }
        for call in (stream.batch or (None,))  # a stream without call data: one entry
    ]


def _approval(event: ApprovalDecided, digest: str) -> str | None:
    """How a call's wait ended, as simulate reports it; None for a refused decision."""
    decision = event.decision
    if event.stop is StopRequest.STOP:
        return "withdrawn"
    if decision is None:
        return "timed_out"
    if decision.digest != digest:
        return None
    return "approved" if decision.verdict is Verdict.APPROVE else "denied"


def _outcome(move: str) -> str:
    if move in ABORTS:
        return "abort"
    return "restart" if move in RESTARTS else "history"


def _settled_outcome(restarted: bool, move: str, calls: int) -> str:
    """A tool's outcome; a restart is one even when the ceiling ends the turn right after it.

    In a batch of two or more only the call that asked for the restart restarted; the
    others are kept in history (SPEC 6b item 7).
    """
    if move not in ABORTS and restarted:
        return "restart"
    if calls > 1 and move in RESTARTS:
        return "history"
    return _outcome(move)


def history_json(state: IterationState) -> list[dict[str, Any]]:
    """The final history as the provider would see it."""
    return [
        {
            "name": entry.function_call.name,
            "args": entry.function_call.args,
            "call_id": entry.function_call.call_id,
            "response": entry.response,
            "pre_tool_text": (
                None
                if entry.pre_tool_call_text_parts is None
                else "\n\n".join(part["text"] for part in entry.pre_tool_call_text_parts)
            ),
        }
        for entry in state.function_history
    ]


def channel_json(effects: list[Effect]) -> dict[str, Any]:
    """What the loop did to the channel's state."""
    follow_up = "unchanged"
    for effect in effects:
        if isinstance(effect, ResetFollowUpCount):
            follow_up = "reset"
        elif isinstance(effect, IncrementFollowUpCount):
            follow_up = "incremented"
    return {
        "follow_up_count": follow_up,
        "tool_chain_active": any(isinstance(e, MarkToolChainActive) for e in effects),
        "stop_response_queued": any(isinstance(e, QueueStopResponse) for e in effects),
        "suppress_text_output": [
            e.suppressed for e in effects if isinstance(e, SetTextSuppression)
        ],
    }


def effect_json(effect: Effect) -> dict[str, Any]:
    """One effect of the trace, tagged with its `type`; the context a call carries, counted."""
    if isinstance(effect, StreamOnce):
        return stream_once_json(effect)
    if isinstance(effect, DispatchTool | StartTool):
        return dispatch_json(effect)
    data: dict[str, Any] = to_json(effect, Effect)
    return {"type": data.pop("_type"), **data}


def dispatch_json(effect: DispatchTool | StartTool) -> dict[str, Any]:
    """A dispatch, its tool context's live context items counted (the report stays linear)."""
    items = effect.context.context_items
    context = attrs.evolve(effect.context, context_items=())
    data: dict[str, Any] = to_json(attrs.evolve(effect, context=context), Effect)
    data["context"]["context_items"] = len(items)
    return {"type": data.pop("_type"), **data}


def stream_once_json(effect: StreamOnce) -> dict[str, Any]:
    """A provider call: what it carried counted, not repeated (the report stays linear)."""
    return {
        "type": "StreamOnce",
        "iteration": effect.iteration,
        "function_history_entries": len(effect.function_history),
        "accumulated_model_parts_count": len(effect.accumulated_model_parts),
        "context_items": len(effect.context),
        "tail_directives": list(effect.tail_directives),
        "disabled": sorted(effect.disabled),
        "suppress_text_output": effect.suppress_text_output,
    }
