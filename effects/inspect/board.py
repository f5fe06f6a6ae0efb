"""What the inspector knows of the process's turns: each one's phase, counters and timeline.

`Inspector.watch(turn)` registers a turn and yields the `observer` hook for
its loop; it only sets a few fields and appends tuples to a bounded timeline,
so a bot pays little per step. The page's server
runs in another thread (`toolloop.effects.inspect.server`) and reads the turns
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from toolloop.effects.clock import loop_clock
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalEvent,
    ApprovalExpired,
    MoveMemo,
    approval_ended,
)
from toolloop.engine import commands as fx
from toolloop.engine.events import ApprovalDecided, Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import Step
from toolloop.engine.table import Move
from toolloop.states import IterationState, Phase, TurnSettings, Verdict
from toolloop.states.errors import InvalidOption

TIMELINE_LIMIT = 200
"""Steps a turn's timeline keeps (the newest), each with the entries it made."""
SEP = "\x1e"
"""Between the entries of one step's timeline line (no tool name holds it: `_plain`)."""


class TurnView:
    """One watched turn as the page shows it; its `observer` feeds it."""

    __slots__ = (
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

    def __init__(self, turn_id: int, channel: str) -> None:
        self.id, self.channel = turn_id, channel
        self.started_at = time.time()
        self._now: Callable[[], float] | None = None
        """The loop's clock (mocked ones too), found at the first step."""
        self._started = 0.0
        self.phase, self.attempt, self.iteration = "idle", -1, 0
        self.status: str | None = None
        self.finished = False
        self.timeline: deque[str] = deque(maxlen=TIMELINE_LIMIT)
        """A line per step: ms since the first step and attempt, then each entry (kind, text; a
        move's also source, dest, rule) after a SEP, the fields by tabs."""
        self.version = 0

    def observer(self, state: IterationState, event: Event, out: Step) -> None:
        """A step: the phase moves; the call it ends, the move, the calls and notices it starts.

        Everything is read off the step (the event and its effects), so the loop builds
        no host event for the inspector. A step is one string: a string is no object
        the cyclic garbage collector tracks or counts (a tuple per entry made every
        collection of a busy process slower), and one string a step formats its time
        once and appends once.
        """
        now = self._now
        if now is None:
            now = self._now = loop_clock()
            self._started = now()
        if isinstance(event, TurnStarted):
            self.attempt += 1
        ended = ""
        if isinstance(event, StreamEnded):
            ended = f"{SEP}provider\tcall ended: {event.result.status.value}"
        elif isinstance(event, ToolSettled) and (pending := state.pending) is not None:
            outcome = "succeeded" if event.result.success else "failed"
            name = _plain(pending.batch[event.index].call.name if pending.batch else pending.name)
            ended = f"{SEP}tool\t{name} {outcome} in {event.duration_ms} ms"
        elif isinstance(event, ApprovalDecided) and (pending := state.pending) is not None:
            waited = pending.batch[event.index]
            decided = approval_ended(self.attempt, state.iteration, waited, event, out)
            ended = f"{SEP}approval\t{_plain(decided.name)} {_approval_outcome(decided)}"
        after = out.state
        entry, phase = move_entry(state.phase, type(event), out.move, after.phase)
        line = f"{round((now() - self._started) * 1000)}\t{self.attempt}{ended}{entry}"
        for effect in out.effects:
            if type(effect) not in SHOWN_EFFECTS:
                continue
            if isinstance(effect, fx.StreamOnce):
                line += f"{SEP}provider\tcall started"
            elif isinstance(effect, STARTS):
                line += f"{SEP}tool\t{_plain(effect.call.name)} started"
            elif isinstance(effect, fx.AskApproval):
                line += f"{SEP}approval\t{_plain(effect.request.tool)} waits for approval"
            elif isinstance(effect, fx.SendNotice):
                line += f"{SEP}notice\t{effect.key.value}"
            elif isinstance(effect, fx.Finish):
                self.status = effect.result.status.value
        self.timeline.append(line)
        self.phase, self.iteration = phase, after.iteration
        self.version += 1

    def summary(self) -> dict[str, Any]:
        """The turn's row in the page's list."""
        return {
            "id": self.id,
            "channel": self.channel,
            "started_at": self.started_at,
            "attempt": self.attempt,
            "iteration": self.iteration,
            "phase": self.phase,
            "status": self.status,
            "finished": self.finished,
            "version": self.version,
        }

    def detail(self) -> dict[str, Any]:
        """The summary and the timeline, oldest first."""
        timeline = [entry for line in list(self.timeline) for entry in _entries(line)]
        return {**self.summary(), "timeline": timeline}


def _entries(line: str) -> list[dict[str, Any]]:
    """A step's timeline entries as the page reads them, from its line."""
    head, *entries = line.split(SEP)
    at, attempt = (int(field) for field in head.split("\t"))
    read = []
    for text in entries:
        kind, said, *move = text.split("\t")
        entry: dict[str, Any] = {"at_ms": at, "attempt": attempt, "kind": kind, "text": said}
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
STARTS = (fx.DispatchTool, fx.StartTool)
SHOWN_EFFECTS = frozenset({*STARTS, fx.StreamOnce, fx.AskApproval, fx.SendNotice, fx.Finish})
"""The effects a timeline shows; a step's others are passed over with one lookup."""


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

    @contextmanager
    def watch(self, turn: TurnSettings, *, channel: str | None = None) -> Iterator[TurnView]:
        """Show one turn (every attempt) while the block runs; its `observer` goes to the loop."""
        view = TurnView(next(self._ids), turn.channel_id if channel is None else channel)
        with self._lock:
            self._turns[view.id] = view
        try:
            yield view
        except BaseException as error:
            view.status = view.status or f"raised {type(error).__name__}"
            raise
        finally:
            self._finish(view)

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
