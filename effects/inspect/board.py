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
from operator import attrgetter
from types import TracebackType
from typing import Any

from toolloop.effects.clock import loop_clock
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalEvent,
    ApprovalExpired,
    approval_ended,
    move_rules,
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
STEP_ITEMS = 6
"""Items a step adds to its turn's timeline (`TurnView.timeline`)."""
SEP = "\x1e"
"""Between the entries of one step's text (no tool name holds it: `_plain`)."""
ROW = ("id", "channel", "attempt", "iteration", "phase", "status", "finished")
"""The fields of a turn's row in the page's list."""
row_of = attrgetter(*ROW)
"""A `TurnView`'s row: its `ROW` fields, in order, read in one C call."""


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
        self.timeline: deque[Any] = deque(maxlen=STEP_ITEMS * TIMELINE_LIMIT)
        """`STEP_ITEMS` items a step: the loop's clock, the attempt, and the step's entries
        (kind, text; a move's also source, dest, rule), each after a SEP, their fields by
        tabs: what its event ended (and a tool's duration, or None), its move (a `MOVES`
        entry, the text fourth), what its effects started."""
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
        no host event for the inspector. A step adds `STEP_ITEMS` items to the timeline in
        one `extend`: the loop's clock (formatted only when a page asks for the turn), the
        attempt, what the event ended (a tool's duration apart), the move's `MOVES` entry
        and what the effects started. Texts are made once (per move, per tool name:
        `MOVES`, `NAMED`) and found by one lookup: a step formats nothing.
        Inline, with no object of its own: a Python call costs more than most of what a
        step records, and a step's tuple or dict would be an object the cyclic garbage
        collector tracks.
        """
        now = self._now
        if now is None:
            now = self._now = loop_clock()
            self._started = now()
        kind, after, move = type(event), out.state, out.move
        seen: Any = event  # narrowed by `kind` below, which mypy cannot follow
        effects: tuple[Any, ...] = out.effects
        source, dest = state.phase, after.phase
        made = MOVES.get(move)
        if made is None or made[0] is not source or made[1] is not kind or made[2] is not dest:
            made = _made(source, kind, move, dest)
        ended = started = ""
        took = None
        if kind is ToolSettled:
            pending = state.pending
            if pending is not None:
                name = settled_name(pending, seen.index)
                named = NAMED.get(name) or _named(name)
                ended, took = named[1 if seen.result.success else 2], seen.duration_ms
        elif kind is StreamEnded:
            ended = STREAM_ENDED[seen.result.status._name_]
        elif kind is TurnStarted:
            self.attempt += 1
        elif kind is ApprovalDecided:
            ended = _approval_decided(self.attempt, state, seen, out)
        for effect in effects:
            shown = STARTED.get(type(effect))
            if shown is None:
                continue
            if shown is _NAMED:
                name = effect.call.name
                shown = (NAMED.get(name) or _named(name))[0]
            elif shown is _FINISHED:
                self.status = effect.result.status._value_
                continue
            elif shown is _NOTICE:
                shown = NOTICES[effect.key._name_]
            elif shown is _ASKED:
                shown = f"{SEP}approval\t{_plain(effect.request.tool)} waits for approval"
            started = shown if not started else started + shown
        self.timeline.extend((now(), self.attempt, ended, took, made, started))
        self.phase, self.iteration = made[4], after.iteration
        self.version += 1

    def summary(self) -> dict[str, Any]:
        """The turn's row by name, with when it started and its version."""
        return {
            **dict(zip(ROW, row_of(self), strict=True)),
            "started_at": self.started_at,
            "version": self.version,
        }

    def detail(self) -> dict[str, Any]:
        """The summary and the timeline, oldest first."""
        items = list(self.timeline)  # one C call: whole steps, whatever the loop does meanwhile
        steps = (items[at::STEP_ITEMS] for at in range(STEP_ITEMS))
        timeline = [
            entry
            for at, attempt, ended, took, made, started in zip(*steps, strict=True)
            for entry in _entries(
                round((at - self._started) * 1000),
                attempt,
                (ended if took is None else f"{ended} in {took} ms") + made[3] + started,
            )
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


MOVES: dict[Move, tuple[Phase, type[Event], Phase, str, str]] = {}
"""A move's timeline text and the phase it leads to (its value), with the phases and event
it was made for (checked by identity: a `Phase` hashes and gives its value in Python)."""
RULES = move_rules()


def _made(
    source: Phase, event: type[Event], move: Move, dest: Phase
) -> tuple[Phase, type[Event], Phase, str, str]:
    """A move's `MOVES` entry, made the first time it is seen between those phases; another
    row of the same move makes it again."""
    rule = RULES.get((source, event, str(move), dest), "")
    text = f"{SEP}move\t{move}\t{source.value}\t{dest.value}\t{rule}"
    made = MOVES[move] = (source, event, dest, text, dest.value)
    return made


def _approval_decided(
    attempt: int, state: IterationState, event: ApprovalDecided, out: Step
) -> str:
    pending = state.pending
    if pending is None:
        return ""
    decided = approval_ended(attempt, state.iteration, pending.batch[event.index], event, out)
    return f"{SEP}approval\t{_plain(decided.name)} {_approval_outcome(decided)}"


STREAM_ENDED = {
    status.name: f"{SEP}provider\tcall ended: {status.value}" for status in StreamStatus
}
NOTICES = {key.name: f"{SEP}notice\t{key.value}" for key in fx.NoticeKey}
"""By the name of the status or key: an enum member hashes in Python, its name in C."""
_NAMED, _FINISHED, _NOTICE, _ASKED = object(), object(), object(), object()
STARTED: dict[type, Any] = {
    fx.StreamOnce: f"{SEP}provider\tcall started",
    fx.DispatchTool: _NAMED,
    fx.StartTool: _NAMED,
    fx.AskApproval: _ASKED,
    fx.SendNotice: _NOTICE,
    fx.Finish: _FINISHED,
}
"""What each effect a timeline shows adds after the move: its text, or what makes it (a
tool's name, a notice's key, an approval's tool; the turn's status); the step's other
effects are passed over with one lookup."""


NAMED: dict[str, tuple[str, str, str]] = {}
"""By tool name: its text when it starts, when it succeeds and when it fails (its
duration added when a page asks)."""
NAMED_LIMIT = 1_000
"""Tool names `NAMED` keeps at most: a model can make up any number of them."""


def _named(name: str) -> tuple[str, str, str]:
    """A tool name's `NAMED` texts, made when `NAMED` lacks them (the caller looked)."""
    if len(NAMED) >= NAMED_LIMIT:
        NAMED.clear()
    tool = f"{SEP}tool\t{_plain(name)}"
    named = NAMED[name] = (f"{tool} started", f"{tool} succeeded", f"{tool} failed")
    return named


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
