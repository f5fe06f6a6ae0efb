"""What a host shows of a running turn, as typed events: streams, tools, approvals, notices.

`run_tool_loop(on_event=...)` calls the host with these as they happen, so a
bot's status line or a log never reads the engine's effects (`StreamOnce`,
`DispatchTool`). They are derived from each step (`host_events`) plus the
interpreter's notice sender; every one names its attempt and iteration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from toolloop.effects.ports import Notice
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, Event, StreamEnded, ToolSettled
from toolloop.engine.step import Step
from toolloop.engine.table import TABLE, Move
from toolloop.states import (
    BatchCall,
    GenerationTurnResult,
    IterationState,
    JsonObject,
    PendingCall,
    Phase,
    StreamStatus,
    TokenUsage,
    Verdict,
)


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamStarted:
    """A provider call began."""

    attempt: int
    iteration: int


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamFirstChunk:
    """The provider reported its first chunk (its first `sink.progress()`) for this call."""

    attempt: int
    iteration: int


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamFinished:
    """A provider call ended with this status and visible text."""

    attempt: int
    iteration: int
    status: StreamStatus
    text: str
    usage: TokenUsage | None = None
    """The tokens the call cost, when the provider reported them."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class ToolStarted:
    """A tool was dispatched; its arguments have every secret its schema names redacted."""

    attempt: int
    iteration: int
    name: str
    args: JsonObject | None
    call_id: str = ""
    """The call's id: the calls of a batch run side by side, each its own tool event."""
    index: int = 0
    """The call's place in its batch, in the model's order (0 for a reply's only call)."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class ToolFinished:
    """A tool settled (success, failure, timeout or kill) after `duration_ms`."""

    attempt: int
    iteration: int
    name: str
    success: bool
    error: str | None
    duration_ms: int
    call_id: str = ""
    index: int = 0
    """The call's place in its batch, in the model's order (0 for a reply's only call)."""


@attrs.frozen(kw_only=True)
class ApprovalAsked:
    """A call waits for a person's decision (SPEC 6c); its arguments have secrets redacted.

    A call is asked again after a decision given for other arguments, under the
    wait's first deadline: the same `call_id` then has two `ApprovalAsked`.
    """

    attempt: int
    iteration: int
    name: str
    call_id: str
    args: JsonObject | None
    timeout_ms: int


@attrs.frozen(kw_only=True)
class ApprovalAnswered:
    """A person decided on a waiting call.

    `accepted` is False when the decision named other arguments than the call's: it
    is refused, and the call is asked again (an `ApprovalAsked` follows).
    """

    attempt: int
    iteration: int
    name: str
    call_id: str
    verdict: Verdict
    accepted: bool
    by: str | None
    reason: str | None
    """The person's words for a denial: content, which telemetry records only on opt-in."""


@attrs.frozen(kw_only=True)
class ApprovalExpired:
    """Nobody decided within `TOOL_APPROVAL_TIMEOUT_MS`: the call is refused, never run."""

    attempt: int
    iteration: int
    name: str
    call_id: str


@attrs.frozen(kw_only=True)
class ApprovalWithdrawn:
    """The turn was killed while the call waited: the host's prompt is withdrawn, never run."""

    attempt: int
    iteration: int
    name: str
    call_id: str


ApprovalEvent = ApprovalAsked | ApprovalAnswered | ApprovalExpired | ApprovalWithdrawn


@attrs.frozen(kw_only=True)
class NoticeShown:
    """A notice reached the channel, or the thought log when it is hidden."""

    attempt: int
    notice: Notice


@attrs.frozen(kw_only=True)
class TurnFinished:
    """The attempt is over with this result."""

    attempt: int
    result: GenerationTurnResult


HostEvent = (
    StreamStarted
    | StreamFirstChunk
    | StreamFinished
    | ToolStarted
    | ToolFinished
    | ApprovalAsked
    | ApprovalAnswered
    | ApprovalExpired
    | ApprovalWithdrawn
    | NoticeShown
    | TurnFinished
)
HostObserver = Callable[[HostEvent], None]
"""Called synchronously with each host event; it must not block."""
Redact = Callable[[str, JsonObject | None], JsonObject | None]


def move_rules() -> dict[tuple[Phase, type[Event], str, Phase], str]:
    """The SPEC rules of each declared (source, event, move, destination), read off the table.

    A step reports its move (`Step.move`), not its row: the rows that share all four
    (the ceiling's, say) are named together.
    """
    rules: dict[tuple[Phase, type[Event], str, Phase], str] = {}
    for row in TABLE:
        key = (row.source, row.event, str(row.move), row.dest)
        rules[key] = " ".join(dict.fromkeys([*rules.get(key, "").split(), *row.rule.split()]))
    return rules


Made = TypeVar("Made")


class MoveMemo(Generic[Made]):
    """What an observer makes of a step's move (its labels, its timeline text), made once.

    `make(source, event, move, dest, rule)` is called the first time a move is seen
    between those phases; the result is kept per move (a string: hashed in C, where
    a `Phase` hashes in Python) with the phases and event it was made for, checked by
    identity, so a step costs one lookup. Another row of the same move makes it again.
    """

    def __init__(self, make: Callable[[Phase, type[Event], Move, Phase, str], Made]) -> None:
        self._make = make
        self._rules = move_rules()
        self._made: dict[Move, tuple[Phase, type[Event], Phase, Made]] = {}

    def __call__(self, source: Phase, event: type[Event], move: Move, dest: Phase) -> Made:
        made = self._made.get(move)
        if made is not None and made[0] is source and made[1] is event and made[2] is dest:
            return made[3]
        rule = self._rules.get((source, event, str(move), dest), "")
        result = self._make(source, event, move, dest, rule)
        self._made[move] = (source, event, dest, result)
        return result


def host_events(
    attempt: int, state: IterationState, event: Event, out: Step, redact: Redact
) -> list[HostEvent]:
    """The host events of one step: `state` is the state before it, `out` what it returned.

    It runs on every step of an observed turn: each effect is told apart by its
    exact type (the engine's are final), one lookup.
    """
    shown: list[HostEvent] = []
    if isinstance(event, StreamEnded):
        result = event.result
        shown.append(
            StreamFinished(
                attempt=attempt,
                iteration=state.iteration,
                status=result.status,
                text=result.accumulated_text,
                usage=result.usage,
            )
        )
    elif isinstance(event, ToolSettled) and (pending := state.pending) is not None:
        call = pending.batch[event.index].call if pending.batch else pending.stream.data
        shown.append(
            ToolFinished(
                attempt=attempt,
                iteration=state.iteration,
                name=settled_name(pending, event.index),
                success=event.result.success,
                error=event.result.error,
                duration_ms=event.duration_ms,
                call_id=getattr(call, "call_id", ""),
                index=event.index,
            )
        )
    elif isinstance(event, ApprovalDecided) and (pending := state.pending) is not None:
        shown.append(
            approval_ended(attempt, state.iteration, pending.batch[event.index], event, out)
        )
    for effect in out.effects:
        made = EFFECT_EVENTS.get(type(effect))
        if made is not None:
            shown.append(made(attempt, effect, out, redact))
    return shown


def _stream_started(attempt: int, effect: Any, out: Step, redact: Redact) -> HostEvent:
    return StreamStarted(attempt=attempt, iteration=effect.iteration)


def _tool_started(attempt: int, effect: Any, out: Step, redact: Redact) -> HostEvent:
    call = effect.call
    return ToolStarted(
        attempt=attempt,
        iteration=effect.context.iteration,
        name=call.name,
        args=redact(call.name, call.args),
        call_id=call.call_id,
        index=effect.index if type(effect) is fx.StartTool else 0,
    )


def _approval_asked(attempt: int, effect: Any, out: Step, redact: Redact) -> HostEvent:
    request = effect.request
    return ApprovalAsked(
        attempt=attempt,
        iteration=out.state.iteration,
        name=request.tool,
        call_id=request.call_id,
        args=redact(request.tool, request.args),
        timeout_ms=effect.timeout_ms,
    )


def _turn_finished(attempt: int, effect: Any, out: Step, redact: Redact) -> HostEvent:
    return TurnFinished(attempt=attempt, result=effect.result)


EFFECT_EVENTS: dict[type, Callable[[int, Any, Step, Redact], HostEvent]] = {
    fx.StreamOnce: _stream_started,
    fx.DispatchTool: _tool_started,
    fx.StartTool: _tool_started,
    fx.AskApproval: _approval_asked,
    fx.Finish: _turn_finished,
}
"""The host event each effect a host sees makes; the other effects make none."""


def settled_name(pending: PendingCall, index: int) -> str:
    """The name of the call a `ToolSettled` at `index` ends: its batch's, else the pending one's."""
    return pending.batch[index].call.name if pending.batch else pending.name


def approval_ended(
    attempt: int, iteration: int, waited: BatchCall, event: ApprovalDecided, out: Step
) -> ApprovalEvent:
    """How one wait ended, read off its step: withdrawn (the step withdraws the request),
    expired (no decision), else answered; `waited` is the call as it stood before."""
    call = waited.call
    if any(isinstance(effect, fx.WithdrawApproval) for effect in out.effects):
        return ApprovalWithdrawn(
            attempt=attempt, iteration=iteration, name=call.name, call_id=call.call_id
        )
    decision = event.decision
    if decision is None:
        return ApprovalExpired(
            attempt=attempt, iteration=iteration, name=call.name, call_id=call.call_id
        )
    return ApprovalAnswered(
        attempt=attempt,
        iteration=iteration,
        name=call.name,
        call_id=call.call_id,
        verdict=decision.verdict,
        accepted=decision.digest == waited.digest,
        by=decision.by,
        reason=decision.reason,
    )
