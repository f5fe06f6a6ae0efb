"""Checks driven runs against the declared machine, and records which moves they took.

`TAKEN` collects every (source, move) any check saw in this test session; the
terminal summary (see `conftest.py`) lists the declared moves it never saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from tests.engine.drive import Run
from toolloop.engine.events import Event
from toolloop.engine.trace import Trace, TraceStep
from toolloop.specs.machine import MACHINE, build_machine
from toolloop.states import IterationState, Phase

EXECUTABLE = build_machine()
TAKEN: Counter[tuple[Phase, str]] = Counter()
#: One step of a run: the state before, the event, the move `step` named, the state after.
Stepped = tuple[IterationState, Event, str, IterationState]


def violations(steps: Sequence[Stepped]) -> list[str]:
    """Every step that is not the declared move its guards select, as a sentence."""
    found: list[str] = []
    for index, (before, event, move, after) in enumerate(steps):
        TAKEN[(before.phase, move)] += 1
        problem = EXECUTABLE.violation(before, event, move, after.phase)
        if problem is not None:
            found.append(f"step {index}: {problem}")
    return found


def never_taken(taken: Iterable[tuple[Phase, str]]) -> list[str]:
    """The declared moves not in `taken`, named `label from source`."""
    seen = set(taken)
    return [m.where for m in MACHINE.moves if (m.source, m.label) not in seen]


def trace_of(run: Run) -> Trace:
    """The trace a recorder would have written for a driven run."""
    pairs = zip(run.steps, run.moves, run.states[:-1], run.states[1:], strict=True)
    steps = tuple(
        TraceStep(event=event, effects=effects, move=move, source=before.phase, dest=after.phase)
        for (event, effects), move, before, after in pairs
    )
    return Trace(config=run.final.config, turn=run.final.turn, steps=steps)
