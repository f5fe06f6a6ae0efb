"""Traces write to JSON lines, read back the same, and replay through `step` alone."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given

from tests.engine.builders import call, done, ok
from tests.engine.drive import Run, drive
from tests.engine.test_properties import attempts
from toolloop.engine.events import TurnStarted
from toolloop.engine.trace import (
    Trace,
    TraceError,
    TraceStep,
    dump_lines,
    load_lines,
    redacted,
    replay,
)
from toolloop.states import LoopConfig, Phase, TurnSettings

START = json.dumps({"kind": "start", "config": {}, "turn": {}})
EVENT = json.dumps({"kind": "event", "event": {"_type": "TurnStarted"}})


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
        (['{"kind": "zzz"}'], "line 1: expected the start line, got kind 'zzz'"),
        ([START, EVENT, '{"kind": "bogus"}'], "line 3: unexpected line of kind 'bogus' here"),
        ([START, EVENT, '{"kind": "zzz"}'], "line 3: unexpected line of kind 'zzz' here"),
        ([START, '{"kind": "step"}'], "line 2: unexpected line of kind 'step' here"),
        ([START, EVENT], "line 2: the last event has no step line"),
        (
            [START, EVENT, '{"kind": "step", "move": "started", "source": "nowhere"}'],
            "line 3: 'nowhere' is not a valid Phase",
        ),
    ],
)
def test_malformed_trace_names_the_line(lines: list[str], message: str) -> None:
    """Each malformed trace raises TraceError naming its line."""
    with pytest.raises(TraceError, match=f"^{re.escape(message)}"):
        load_lines(lines)


def test_unknown_event_type_is_a_trace_error() -> None:
    """An event of no known type names the line."""
    bad = json.dumps({"kind": "event", "event": {"_type": "Nope"}})
    with pytest.raises(TraceError, match=r"^line 2: not a valid"):
        load_lines([START, bad])


def test_blank_lines_are_skipped_wherever_they_are() -> None:
    """A blank line between records does not end the trace."""
    lines = list(dump_lines(trace_of(drive([call(), done()], [ok()]))))
    assert load_lines([lines[0], "", *lines[1:]]) == load_lines(lines)


@pytest.mark.parametrize("recorded", ["elsewhere", "zzz"])
def test_replay_names_a_step_whose_move_differs(recorded: str) -> None:
    """A tampered move is reported with both paths, whichever way the names sort."""
    lines = [
        line.replace('"move": "started"', f'"move": "{recorded}"')
        for line in dump_lines(trace_of(drive([done()])))
    ]
    assert replay(load_lines(lines)) == [
        f"step 0: recorded idle -{recorded}-> streaming, replayed idle -started-> streaming"
    ]


def test_replay_stops_at_an_event_the_phase_does_not_wait_for() -> None:
    """An event out of place ends the replay with the engine's own refusal."""
    event = TurnStarted()
    steps = (TraceStep(event=event, effects=(), move="x", source=Phase.IDLE, dest=Phase.IDLE),) * 2
    trace = Trace(config=LoopConfig(), turn=TurnSettings(), steps=steps)
    differences = replay(trace)
    assert differences[-1] == "step 1: Invalid event TurnStarted in phase streaming"


def hide(name: str, args: object) -> object:
    return f"<{name} redacted>"


class TestRedacted:
    def test_a_call_with_more_fields_has_its_arguments_redacted(self) -> None:
        """Any object with a name and args is a call, whatever else it holds."""
        data = {"_type": "FunctionCall", "name": " login ", "args": {"pw": "x"}}
        assert redacted(data, hide) == {**data, "args": "<login redacted>"}

    def test_an_object_of_only_name_and_args_is_a_call(self) -> None:
        """The smallest call: exactly the two keys."""
        assert redacted({"name": "login", "args": 1}, hide) == {
            "name": "login",
            "args": "<login redacted>",
        }

    def test_a_failure_notice_is_redacted_by_its_tool_name(self) -> None:
        """The failed-tool notice names its tool in tool_name."""
        details = {"tool_name": "login", "reason": "no", "args": {"pw": "x"}}
        assert redacted(details, hide) == {**details, "args": "<login redacted>"}

    def test_an_object_without_args_is_left_alone(self) -> None:
        """A name alone is no call: nothing is added."""
        assert redacted({"name": "login", "tool_name": "login"}, hide) == {
            "name": "login",
            "tool_name": "login",
        }

    def test_calls_inside_lists_are_redacted_and_scalars_kept(self) -> None:
        """Redaction walks lists; values that are no container stay as they are."""
        data = [{"name": "login", "args": 1}, "text", 3]
        assert redacted(data, hide) == [{"name": "login", "args": "<login redacted>"}, "text", 3]
        assert redacted("text", hide) == "text"
