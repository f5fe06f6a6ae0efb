"""What the inspector knows of the process's turns: each one's phase, counters and timeline.

`Inspector.watch(turn)` registers a turn and yields the `observer` and
`on_event` hooks for its loop; they only set a few fields and append to a
bounded timeline, so a bot pays next to nothing per step. The page's server
runs in another thread (`toolloop.effects.inspect.server`) and reads the turns
by their `version`, which every change bumps. A finished turn stays browsable
until `keep_finished` newer ones have finished.

The timeline records what happened, never what was said: moves, provider calls
with their status, tool names with their outcome and duration, notice keys.
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
    HostEvent,
    NoticeShown,
    StreamFinished,
    StreamStarted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    move_rules,
)
from toolloop.engine.events import Event, TurnStarted
from toolloop.engine.step import Step
from toolloop.states import IterationState, TurnSettings

TIMELINE_LIMIT = 500
"""Entries a turn's timeline keeps (the newest)."""
_RULES = move_rules()


class TurnView:
    """One watched turn as the page shows it; its `observer` and `on_event` feed it."""

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
        self.timeline: deque[dict[str, Any]] = deque(maxlen=TIMELINE_LIMIT)
        self.version = 0

    def observer(self, state: IterationState, event: Event, out: Step) -> None:
        """A step: the turn's phase moves, and the move joins the timeline."""
        if isinstance(event, TurnStarted):
            self.attempt += 1
        dest = out.state.phase
        move = str(out.move)
        self.phase, self.iteration = dest.value, out.state.iteration
        rule = _RULES.get((state.phase, type(event), move, dest), "")
        self._add("move", move, source=state.phase.value, dest=dest.value, rule=rule)

    def on_event(self, shown: HostEvent) -> None:
        """A host event joins the timeline (names and outcomes only, no content)."""
        if isinstance(shown, StreamStarted):
            self._add("provider", "call started")
        elif isinstance(shown, StreamFinished):
            self._add("provider", f"call ended: {shown.status.value}")
        elif isinstance(shown, ToolStarted):
            self._add("tool", f"{shown.name} started", tool=shown.name)
        elif isinstance(shown, ToolFinished):
            outcome = "succeeded" if shown.success else "failed"
            self._add("tool", f"{shown.name} {outcome} in {shown.duration_ms} ms", tool=shown.name)
        elif isinstance(shown, NoticeShown):
            self._add("notice", shown.notice.key, level=shown.notice.level)
        elif isinstance(shown, TurnFinished):
            self.status = shown.result.status.value

    def _add(self, kind: str, text: str, **fields: Any) -> None:
        if self._now is None:
            self._now = loop_clock()
            self._started = self._now()
        at = round((self._now() - self._started) * 1000)
        self.timeline.append(
            {"at_ms": at, "attempt": self.attempt, "kind": kind, "text": text, **fields}
        )
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
        return {**self.summary(), "timeline": list(self.timeline)}


class Inspector:
    """The turns of this process that the page shows: running ones, and the last finished."""

    def __init__(self, *, keep_finished: int = 200) -> None:
        if keep_finished < 0:
            raise ValueError(f"keep_finished must be 0 or more, not {keep_finished}")
        self._lock = threading.Lock()
        self._turns: dict[int, TurnView] = {}
        self._finished: deque[int] = deque()
        self._keep = keep_finished
        self._ids = itertools.count(1)

    @contextmanager
    def watch(self, turn: TurnSettings, *, channel: str | None = None) -> Iterator[TurnView]:
        """Show one turn (all its attempts) while the block runs; pass its hooks to the loop."""
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
