"""Traces write to JSON lines, read back the same, and replay through `step` alone."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given

from tests.engine.drive import Run
from tests.engine.test_properties import attempts
from toolloop.engine.trace import Trace, TraceError, TraceStep, dump_lines, load_lines, replay
from toolloop.states import LoopConfig, TurnSettings


def trace_of(run: Run) -> Trace:
    steps = tuple(
        TraceStep(event=event, effects=effects, move=move, source=before.phase, dest=after.phase)
        for (event, effects), move, before, after in zip(
            run.steps, run.moves, run.states[:-1], run.states[1:], strict=True
        )
    )
    return Trace(config=run.final.config, turn=run.final.turn, steps=steps)


@given(run=attempts)
def test_any_trace_reads_back_unchanged_and_replays_to_the_same_effects(run: Run) -> None:
    """Replay: a written trace loads equal to itself and `step` reproduces every effect and move."""
    trace = trace_of(run)
    loaded = load_lines(list(dump_lines(trace)))
    assert loaded == trace
    assert replay(loaded) == []


def test_replay_names_the_step_whose_effects_differ() -> None:
    """A tampered effect is reported with its step."""
    from tests.engine.builders import call, done, ok
    from tests.engine.drive import drive

    trace = trace_of(drive([call(), done()], [ok()]))
    lines = list(dump_lines(trace))
    lines[2] = lines[2].replace('"iteration": 0', '"iteration": 9')
    assert replay(load_lines(lines)) == ["step 0 (TurnStarted): effects differ"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{"], "line 1: not JSON"),
        (["[]"], "line 1: expected an object, got list"),
        (['{"kind": "event"}'], "line 1: expected the start line, got kind 'event'"),
        ([], "line 0: the trace is empty"),
    ],
)
def test_malformed_trace_names_the_line(lines: list[str], message: str) -> None:
    """Each malformed trace raises TraceError naming its line."""
    with pytest.raises(TraceError, match=f"^{re.escape(message)}"):
        load_lines(lines)


def test_unknown_event_type_is_a_trace_error() -> None:
    """An event of no known type names the line."""
    start = next(dump_lines(Trace(config=LoopConfig(), turn=TurnSettings())))
    bad = json.dumps({"kind": "event", "event": {"_type": "Nope"}})
    with pytest.raises(TraceError, match=r"^line 2: not a valid"):
        load_lines([start, bad])
