"""What the inspector knows of the process's turns: each one's phase, counters and timeline.

`with Inspector.watch(turn) as view` shows a turn and gives the `observer` hook
for its loop; it only sets a few fields and adds a step's time, attempt and text
to a bounded timeline, so a bot pays little per step. The page's server runs in
another thread (`toolloop.effects.inspect.server`) and reads the turns
by their `version`, which every change bumps. A finished turn stays browsable
until `keep_finished` newer ones have finished.

The timeline records what happened, never what was said: moves, provider calls
with their status, tool names with their outcome and duration, approval waits
with their outcome (never the arguments, the reason or who decided), notice keys.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

from toolloop.effects.clock import loop_clock
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalEvent,
    ApprovalExpired,
    MoveMemo,
    approval_ended,
    settled_name,
)
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import Step
from toolloop.engine.table import Move
from toolloop.states import IterationState, Phase, StreamStatus, TurnSettings, Verdict
from toolloop.states.errors import InvalidOption

TIMELINE_LIMIT = 200
"""Steps a turn's timeline keeps (the newest), each with the entries it made."""
SEP = "\x1e"
"""Between the entries of one step's text (no tool name holds it: `_plain`)."""
ROW = ("id", "channel", "attempt", "iteration", "phase", "status", "finished")
"""The fields of a turn's row in the page's list, in `TurnView.row`'s order."""


class TurnView:
    """One watched turn as the page shows it; its `observer` feeds it."""

    __slots__ = (
        "_inspector",
        "_now",
        "_started",
        "attempt",
        "channel",
        "finished",
        "id",
        "iteration",
        "phase",
        "started_at",
        "status",
        "timeline",
        "version",
    )

    def __init__(self, inspector: Inspector, turn_id: int, channel: str) -> None:
        self._inspector, self.id, self.channel = inspector, turn_id, channel
        self.started_at = time.time()
        self._now: Callable[[], float] | None = None
        """The loop's clock (mocked ones too), found at the first step."""
        self._started = 0.0
        self.phase, self.attempt, self.iteration = "idle", -1, 0
        self.status: str | None = None
        self.finished = False
        self.timeline: deque[Any] = deque(maxlen=3 * TIMELINE_LIMIT)
        """Three items a step: the loop's clock, the attempt, and the step's entries (kind,
        text; a move's also source, dest, rule), each after a SEP, their fields by tabs."""
        self.version = 0
        """Bumped by every change, so a page's push sends only the turns changed since its last."""

    def __enter__(self) -> TurnView:
        self._inspector._show(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.status = self.status or f"raised {kind.__name__}"
        self._inspector._finish(self)

    def observer(self, state: IterationState, event: Event, out: Step) -> None:
        """A step: the phase moves; the call it ends, the move, the calls and notices it starts.

        Everything is read off the step (the event and its effects), so the loop builds
        no host event for the inspector. The move's text is made once per move
        (`move_entry`), the rest found by one lookup of the event's and of each effect's
        type; the step's time is kept as the clock gave it, formatted only when a page
        asks for the turn. A step adds three items to the timeline in one `extend`, no
        object of its own: a step's tuple or dict would be an object the cyclic garbage
        collector tracks, and one string per step is all the text allocates.
        """
        now = self._now
        if now is None:
            now = self._now = loop_clock()
            self._started = now()
        kind = type(event)
        after = out.state
        text, phase = move_entry(state.phase, kind, out.move, after.phase)
        ended = ENDED.get(kind)
        if ended is not None:
            text = ended(self, state, event, out) + text
        for effect in out.effects:
            started = STARTED.get(type(effect))
            if started is not None:
                text += started(self, effect)
        self.timeline.extend((now(), self.attempt, text))
        self.phase, self.iteration = phase, after.iteration
        self.version += 1

    def row(self) -> tuple[Any, ...]:
        """The turn's row in the page's list: the `ROW` fields, in order."""
        return (
            self.id,
            self.channel,
            self.attempt,
            self.iteration,
            self.phase,
            self.status,
            self.finished,
        )

    def summary(self) -> dict[str, Any]:
        """The turn's row by name, with when it started and its version."""
        return {
            **dict(zip(ROW, self.row(), strict=True)),
            "started_at": self.started_at,
            "version": self.version,
        }

    def detail(self) -> dict[str, Any]:
        """The summary and the timeline, oldest first."""
        items = list(self.timeline)  # one C call: whole steps, whatever the loop does meanwhile
        timeline = [
            entry
            for at, attempt, text in zip(items[::3], items[1::3], items[2::3], strict=True)
            for entry in _entries(round((at - self._started) * 1000), attempt, text)
        ]
        return {**self.summary(), "timeline": timeline}


def _entries(at_ms: int, attempt: int, text: str) -> list[dict[str, Any]]:
    """A step's timeline entries as the page reads them, from its text."""
    read = []
    for entry_text in text.split(SEP)[1:]:
        kind, said, *move = entry_text.split("\t")
        entry: dict[str, Any] = {"at_ms": at_ms, "attempt": attempt, "kind": kind, "text": said}
        if move:
            entry["source"], entry["dest"], entry["rule"] = move
        read.append(entry)
    return read


def _approval_outcome(ended: ApprovalEvent) -> str:
    """How a wait ended, in words without content."""
    if isinstance(ended, ApprovalAnswered):
        verdict = "approved" if ended.verdict is Verdict.APPROVE else "denied"
        return verdict if ended.accepted else f"{verdict} for other arguments: refused"
    return "expired" if isinstance(ended, ApprovalExpired) else "withdrawn"


def _move_entry(
    source: Phase, event: type[Event], move: Move, dest: Phase, rule: str
) -> tuple[str, str]:
    """A move's timeline text (after its time and attempt), and the phase it leads to."""
    return f"{SEP}move\t{move}\t{source.value}\t{dest.value}\t{rule}", dest.value


move_entry = MoveMemo(_move_entry)


def _attempt_started(view: TurnView, state: IterationState, event: Any, out: Step) -> str:
    view.attempt += 1
    return ""


def _stream_ended(view: TurnView, state: IterationState, event: Any, out: Step) -> str:
    return STREAM_ENDED[event.result.status]


def _tool_settled(view: TurnView, state: IterationState, event: Any, out: Step) -> str:
    pending = state.pending
    if pending is None:
        return ""
    outcome = "succeeded" if event.result.success else "failed"
    name = _plain(settled_name(pending, event.index))
    return f"{SEP}tool\t{name} {outcome} in {event.duration_ms} ms"


def _approval_decided(view: TurnView, state: IterationState, event: Any, out: Step) -> str:
    pending = state.pending
    if pending is None:
        return ""
    decided = approval_ended(view.attempt, state.iteration, pending.batch[event.index], event, out)
    return f"{SEP}approval\t{_plain(decided.name)} {_approval_outcome(decided)}"


ENDED: dict[type[Event], Callable[[TurnView, IterationState, Any, Step], str]] = {
    TurnStarted: _attempt_started,
    StreamEnded: _stream_ended,
    ToolSettled: _tool_settled,
    ApprovalDecided: _approval_decided,
}
"""What a step's event adds before its move (the call it ends), by the event's type."""
STREAM_ENDED = {status: f"{SEP}provider\tcall ended: {status.value}" for status in StreamStatus}
PROVIDER_STARTED = f"{SEP}provider\tcall started"
NOTICES = {key: f"{SEP}notice\t{key.value}" for key in fx.NoticeKey}


def _tool_started(view: TurnView, effect: Any) -> str:
    return f"{SEP}tool\t{_plain(effect.call.name)} started"


def _approval_asked(view: TurnView, effect: Any) -> str:
    return f"{SEP}approval\t{_plain(effect.request.tool)} waits for approval"


def _finished(view: TurnView, effect: Any) -> str:
    view.status = effect.result.status.value
    return ""


STARTED: dict[type, Callable[[TurnView, Any], str]] = {
    fx.StreamOnce: lambda view, effect: PROVIDER_STARTED,
    fx.DispatchTool: _tool_started,
    fx.StartTool: _tool_started,
    fx.AskApproval: _approval_asked,
    fx.SendNotice: lambda view, effect: NOTICES[effect.key],
    fx.Finish: _finished,
}
"""What each effect a timeline shows adds after the move, by its type; the step's other
effects are passed over with one lookup."""


def _plain(name: str) -> str:
    """A tool name as the model wrote it, with no tab, line break or SEP (all whitespace to
    `str.split`) to split an entry."""
    return name if name.isidentifier() else " ".join(name.split())


class Inspector:
    """The turns of this process that the page shows: running ones, and the last finished."""

    def __init__(self, *, keep_finished: int = 200) -> None:
        if keep_finished < 0:
            raise InvalidOption(f"keep_finished must be 0 or more, not {keep_finished}")
        self._lock = threading.Lock()
        self._turns: dict[int, TurnView] = {}
        self._finished: deque[int] = deque()
        self._keep = keep_finished
        self._ids = itertools.count(1)

    def watch(self, turn: TurnSettings, *, channel: str | None = None) -> TurnView:
        """Show one turn (every attempt) while its `with` block runs; `observer` goes to the loop.

        The view is its own context manager: a watched turn makes the view and its timeline,
        no generator or wrapper that would live as long as the turn for the garbage
        collector to count and carry.
        """
        return TurnView(self, next(self._ids), turn.channel_id if channel is None else channel)

    def _show(self, view: TurnView) -> None:
        with self._lock:
            self._turns[view.id] = view

    def _finish(self, view: TurnView) -> None:
        view.finished = True
        view.version += 1
        with self._lock:
            self._finished.append(view.id)
            while len(self._finished) > self._keep:
                del self._turns[self._finished.popleft()]

    def turns(self) -> list[TurnView]:
        """Every turn shown now, oldest first (a copy: the loop's threads may add more)."""
        with self._lock:
            return list(self._turns.values())

    def turn(self, turn_id: int) -> TurnView | None:
        with self._lock:
            return self._turns.get(turn_id)
