"""What the turn workflow and its activities pass each other: attrs data, cattrs-converted.

Every value here lands in the workflow's history, so each carries only what its
activity needs; a tool's result is cut to `TurnInput.result_limit` before it
returns (`bounded`).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from toolloop.engine import commands as fx
from toolloop.engine.events import Event
from toolloop.states import (
    ApprovalDecision,
    ApprovalRequest,
    FunctionCall,
    IterationState,
    LoopConfig,
    StreamResult,
    ToolContext,
    ToolResult,
    TurnSettings,
)

#: A tool result's text fields beyond this many characters stay out of the history.
RESULT_LIMIT = 16_000
#: The workflow continues as new once its history holds this many events ...
HISTORY_EVENTS = 2_000
#: ... or this many bytes (Temporal's own limits are 51,200 events and 50 MB).
HISTORY_BYTES = 2_000_000


@attrs.frozen(kw_only=True)
class Carry:
    """Where a workflow that continued as new goes on: the state and the event it answers."""

    state: IterationState
    event: Event
    chain_active: bool
    facts: tuple[CallFacts, ...]
    """The registry's answers about the calls of the last stream."""
    runs: int
    """How many runs this turn took before this one."""


@attrs.frozen(kw_only=True)
class TurnInput:
    """One turn: its settings and limits; `carry` when it continues an earlier run."""

    turn: TurnSettings
    config: LoopConfig = attrs.field(factory=LoopConfig)
    result_limit: int = RESULT_LIMIT
    history_events: int = HISTORY_EVENTS
    history_bytes: int = HISTORY_BYTES
    worker_lost_s: float = 10.0
    """An activity whose worker has not heartbeated this long (seconds) was lost: the
    workflow makes its call again elsewhere. Keep it a few `heartbeat_every` long."""
    carry: Carry | None = None


@attrs.frozen(kw_only=True)
class StreamInput:
    """One provider call (`StreamOnce`) on the turn's channel."""

    turn: TurnSettings
    once: fx.StreamOnce
    config: LoopConfig
    context: ToolContext
    """What `needs_approval` is asked with, for each call the stream brings."""
    shown: str = ""
    """Text an earlier run of this call delivered before its worker was lost: not sent again."""
    chores: tuple[fx.Effect, ...] = ()
    """The step's fire-and-forget effects for the host, carried out first (`Chores`)."""


@attrs.frozen(kw_only=True)
class CallFacts:
    """The registry's answers about one call of a stream that its run needs."""

    timeout_ms: int
    follow_up: bool


@attrs.frozen(kw_only=True)
class StreamOutput:
    """How the call ended, and the registry's answers about the calls it brought, which
    the workflow cannot ask: `exclusive` and `approval` as `StreamEnded` takes them."""

    result: StreamResult
    calls: tuple[CallFacts, ...] = ()
    exclusive: tuple[bool, ...] = ()
    approval: tuple[bool, ...] = ()
    went_silent: bool = False
    """The activity's rolling inactivity timeout ended the call (`StreamEnded.went_silent`)."""


@attrs.frozen(kw_only=True)
class ToolInput:
    """One tool call, on the turn's channel; `again` after its worker was lost."""

    turn: TurnSettings
    """The turn's settings without its context items (`lean`)."""
    call: FunctionCall
    context: ToolContext
    pre_tool_text: str
    text_suppressed: bool
    result_limit: int
    again: bool = False
    chores: tuple[fx.Effect, ...] = ()


@attrs.frozen(kw_only=True)
class Chores:
    """A step's fire-and-forget effects for the host: notices and the turn control's counts.

    They ride with the step's awaited effect's activity when it has one (one
    activity less an iteration) and run first there; else they are an activity.
    """

    turn: TurnSettings
    effects: tuple[fx.Effect, ...]


@attrs.frozen(kw_only=True)
class StashInput:
    turn: TurnSettings
    key: str
    chores: tuple[fx.Effect, ...] = ()


@attrs.frozen(kw_only=True)
class AskInput:
    """A call waiting for a person's decision: the host's prompt for it."""

    turn: TurnSettings
    request: ApprovalRequest


@attrs.frozen(kw_only=True)
class Decision:
    """A person's decision on the call at `index` of the batch (the `decide` update)."""

    index: int
    decision: ApprovalDecision


@attrs.frozen(kw_only=True)
class Waiting:
    """A call waiting for a decision, as the `approvals` query shows it."""

    index: int
    request: ApprovalRequest


def lean(turn: TurnSettings) -> TurnSettings:
    """The turn's settings without its context items: what an activity other than the
    provider call needs (its channel, locale, persona), kept small in the history."""
    return attrs.evolve(turn, context=()) if turn.context else turn


def bounded(result: ToolResult, limit: int) -> ToolResult:
    """`result` with its text (`error`, `message`) and its payload as JSON cut to `limit`
    characters: a cut payload becomes that JSON text, ending with how much was cut."""
    changes: dict[str, Any] = {
        name: _cut(value, limit)
        for name in ("error", "message")
        if isinstance(value := getattr(result, name), str) and len(value) > limit
    }
    if result.data is not None:
        text = json.dumps(result.data, ensure_ascii=False, default=str)
        if len(text) > limit:
            changes["data"] = _cut(text, limit)
    return attrs.evolve(result, **changes) if changes else result


def _cut(text: str, limit: int) -> str:
    return f"{text[:limit]} [{len(text) - limit} characters cut]"
