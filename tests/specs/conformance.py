"""Checks driven runs against the declared machine, and records which moves they took.

`TAKEN` collects every row (its name: declared moves are rows, several rows
may report one move) any check saw taken in this test session; the terminal
summary (see `conftest.py`) lists the declared rows it never saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from tests.engine.drive import Run
from toolloop.engine.events import Event
from toolloop.engine.trace import Trace, TraceStep
from toolloop.specs.machine import MACHINE, build_machine
from toolloop.states import IterationState

EXECUTABLE = build_machine()
TAKEN: Counter[str] = Counter()
#: One step of a run: the state before, the event, the move `step` named, the state after.
Stepped = tuple[IterationState, Event, str, IterationState]


def violations(steps: Sequence[Stepped]) -> list[str]:
    """Every step that is not the declared move its guards select, as a sentence."""
    found: list[str] = []
    for index, (before, event, move, after) in enumerate(steps):
        problem = EXECUTABLE.violation(before, event, move, after.phase)
        if problem is not None:
            found.append(f"step {index}: {problem}")
            continue
        TAKEN[row_taken(before, event)] += 1
    return found


def row_taken(before: IterationState, event: Event) -> str:
    """The name of the declared move (the row) `event` selects in `before`."""
    declared = EXECUTABLE.predict(before, event)
    assert declared is not None, "a conforming step is a declared move"
    return declared.name


def never_taken(taken: Iterable[str]) -> list[str]:
    """The declared moves (rows) whose names are not in `taken`, named `label from source`."""
    seen = set(taken)
    return [m.where for m in MACHINE.moves if m.name not in seen]


def trace_of(run: Run) -> Trace:
    """The trace a recorder would have written for a driven run."""
    pairs = zip(run.steps, run.moves, run.states[:-1], run.states[1:], strict=True)
    steps = tuple(
        TraceStep(event=event, effects=effects, move=move, source=before.phase, dest=after.phase)
        for (event, effects), move, before, after in pairs
    )
    return Trace(config=run.final.config, turn=run.final.turn, steps=steps)
