"""What a host shows of a running turn, as typed events: streams, tools, notices, the finish.

`run_tool_loop(on_event=...)` calls the host with these as they happen, so a
bot's status line or a log never reads the engine's effects (`StreamOnce`,
`DispatchTool`). They are derived from each step (`host_events`) plus the
interpreter's notice sender; every one names its attempt and iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs

from toolloop.effects.ports import Notice
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, StreamEnded, ToolSettled
from toolloop.engine.step import Step
from toolloop.engine.table import TABLE
from toolloop.states import (
    GenerationTurnResult,
    IterationState,
    JsonObject,
    Phase,
    StreamStatus,
)


@attrs.frozen(kw_only=True)
class StreamStarted:
    """A provider call began."""

    attempt: int
    iteration: int


@attrs.frozen(kw_only=True)
class StreamFirstChunk:
    """The provider reported its first chunk (its first `sink.progress()`) for this call."""

    attempt: int
    iteration: int


@attrs.frozen(kw_only=True)
class StreamFinished:
    """A provider call ended with this status and visible text."""

    attempt: int
    iteration: int
    status: StreamStatus
    text: str


@attrs.frozen(kw_only=True)
class ToolStarted:
    """A tool was dispatched; its arguments have every secret its schema names redacted."""

    attempt: int
    iteration: int
    name: str
    args: JsonObject | None
    call_id: str = ""
    """The call's id: the calls of a batch run side by side, each its own tool event."""


@attrs.frozen(kw_only=True)
class ToolFinished:
    """A tool settled (success, failure, timeout or kill) after `duration_ms`."""

    attempt: int
    iteration: int
    name: str
    success: bool
    error: str | None
    duration_ms: int
    call_id: str = ""


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


def host_events(
    attempt: int, state: IterationState, event: Event, out: Step, redact: Redact
) -> Iterator[HostEvent]:
    """The host events of one step: `state` is the state before it, `out` what it returned."""
    if isinstance(event, StreamEnded):
        result = event.result
        yield StreamFinished(
            attempt=attempt,
            iteration=state.iteration,
            status=result.status,
            text=result.accumulated_text,
        )
    elif isinstance(event, ToolSettled) and (pending := state.pending) is not None:
        batch = pending.batch
        call = batch[event.index].call if batch else pending.stream.data
        yield ToolFinished(
            attempt=attempt,
            iteration=state.iteration,
            name=batch[event.index].call.name if batch else pending.name,
            success=event.result.success,
            error=event.result.error,
            duration_ms=event.duration_ms,
            call_id=getattr(call, "call_id", ""),
        )
    for effect in out.effects:
        if isinstance(effect, fx.StreamOnce):
            yield StreamStarted(attempt=attempt, iteration=effect.iteration)
        elif isinstance(effect, fx.DispatchTool | fx.StartTool):
            name, args = effect.call.name, effect.call.args
            yield ToolStarted(
                attempt=attempt,
                iteration=effect.context.iteration,
                name=name,
                args=redact(name, args),
                call_id=effect.call.call_id,
            )
        elif isinstance(effect, fx.Finish):
            yield TurnFinished(attempt=attempt, result=effect.result)
