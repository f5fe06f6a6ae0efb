"""Token usage in traces: a trace without the usage field (one written before it existed)
still loads, and one with it round-trips.

`StreamResult.usage` is a field with a default, so a trace without it reads as
streams that reported none. The golden was written by `toolloop simulate
tests/scenarios/completed_after_one_tool.json --trace`; the trace format moved
to 3 for another change (the dispatch effects) after usage came, so the
pre-usage trace is this one with its `usage` fields taken out.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from toolloop.engine.commands import Finish
from toolloop.engine.events import StreamEnded
from toolloop.engine.step import initial_state, step
from toolloop.engine.trace import (
    VERSION,
    TraceStep,
    dump_lines,
    load_bytes,
    load_lines,
    replay,
)
from toolloop.states import TokenUsage

GOLDEN = Path(__file__).parent / "traces" / "completed_after_one_tool.jsonl"
#: How the usage field of a stream that reported none is written.
NO_USAGE = b', "usage": null'


def test_a_trace_written_before_usage_loads_and_replays() -> None:
    """The golden without its `usage` fields loads, replays the same, and its streams
    report no usage."""
    data = GOLDEN.read_bytes().replace(NO_USAGE, b"")
    assert b'"usage"' not in data and data != GOLDEN.read_bytes()
    trace = load_bytes(data)
    assert replay(trace) == []
    ended = [step.event for step in trace.steps if isinstance(step.event, StreamEnded)]
    assert len(ended) == 2
    assert all(event.result.usage is None for event in ended)


def test_usage_is_written_and_read_back_in_the_same_format() -> None:
    """The golden's events with usage on each stream, stepped again: the trace round-trips
    in the current format and replays the same; the turn's result sums the two streams."""
    golden = load_bytes(GOLDEN.read_bytes())
    usage = TokenUsage(input_tokens=12, output_tokens=5, reasoning_tokens=2)
    state = initial_state(golden.config, golden.turn)
    steps: list[TraceStep] = []
    for recorded in golden.steps:
        event = recorded.event
        if isinstance(event, StreamEnded):
            event = attrs.evolve(event, result=attrs.evolve(event.result, usage=usage))
        out = step(state, event)
        steps.append(
            TraceStep(
                event=event,
                effects=out.effects,
                move=out.move,
                source=state.phase,
                dest=out.state.phase,
            )
        )
        state = out.state
    metered = attrs.evolve(golden, steps=tuple(steps))
    lines = list(dump_lines(metered))
    assert f'"version": {VERSION}' in lines[0]
    again = load_lines(lines)
    assert again == metered
    assert replay(again) == []
    (finish,) = (e for e in steps[-1].effects if isinstance(e, Finish))
    assert finish.result.usage == usage + usage
