"""Traces write to JSON lines, read back the same, and replay through `step` alone."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.builders import call, done, ended, ok
from tests.engine.drive import Run, drive
from tests.engine.test_properties import attempts
from toolloop.engine.events import TurnStarted
from toolloop.engine.trace import (
    Trace,
    TraceError,
    TraceMismatch,
    TraceStep,
    dump_lines,
    load_bytes,
    load_lines,
    redacted,
    replay,
    replayed,
)
from toolloop.states import ContextItem, LoopConfig, Phase, StreamStatus, TurnSettings

START = json.dumps({"kind": "start", "version": 3, "config": {}, "turn": {}})
EVENT = json.dumps({"kind": "event", "event": {"_type": "TurnStarted"}})
STEP = json.dumps({"kind": "step", "move": "started", "source": "idle", "dest": "streaming"})
END = json.dumps({"kind": "end", "steps": 1})


def trace_of(run: Run) -> Trace:
    steps = tuple(
        TraceStep(event=event, effects=effects, move=move, source=before.phase, dest=after.phase)
        for (event, effects), move, before, after in zip(
            run.steps, run.moves, run.states[:-1], run.states[1:], strict=True
        )
    )
    return Trace(config=run.final.config, turn=run.final.turn, steps=steps)


def file_of(trace: Trace) -> bytes:
    """The trace as a file holds it: each line ended by a newline."""
    return "".join(f"{line}\n" for line in dump_lines(trace)).encode()


def a_tool_run(calls: int = 3) -> Trace:
    return trace_of(drive([*(call(args={"q": f"query-{n}"}) for n in range(calls)), done()]))


@given(run=attempts)
def test_any_trace_reads_back_unchanged_and_replays_to_the_same_effects(run: Run) -> None:
    """Replay: a written trace loads equal to itself, writes back byte for byte, and `step`
    reproduces every effect and move."""
    trace = trace_of(run)
    written = file_of(trace)
    loaded = load_bytes(written)
    assert loaded == trace
    assert file_of(loaded) == written
    assert replay(loaded) == []


@given(run=attempts, data=st.data())
def test_a_trace_cut_short_anywhere_is_refused(run: Run, data: st.DataObject) -> None:
    """Truncation: every cut that loses content (more than the last newline) is refused."""
    whole = file_of(trace_of(run))
    cut = data.draw(st.integers(min_value=0, max_value=len(whole) - 2), label="cut")
    with pytest.raises(TraceError):
        load_bytes(whole[:cut])


@given(run=attempts, data=st.data())
def test_a_trace_with_a_line_written_twice_is_refused_or_does_not_replay(
    run: Run, data: st.DataObject
) -> None:
    """Duplication: any line repeated is a load error or, for an effect line, a replay mismatch."""
    lines = list(dump_lines(trace_of(run)))
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1), label="line")
    twice = [*lines[: index + 1], lines[index], *lines[index + 1 :]]
    with pytest.raises((TraceError, TraceMismatch)):
        replayed(load_lines(twice))


@pytest.mark.parametrize("padding", ["\n", " \n", "\x00" * 8, "\n\n", "\t", "{}\n"])
def test_a_trace_padded_after_its_end_is_refused(padding: str) -> None:
    """Padding: blank lines, NUL bytes or anything after the end line is refused, by line."""
    whole = file_of(a_tool_run())
    lines = whole.count(b"\n")
    with pytest.raises(TraceError, match=rf"^line {lines + 1}: "):
        load_bytes(whole + padding.encode())


def test_each_history_entry_is_written_once() -> None:
    """Linear size: a provider call reuses the history the previous one sent, never repeats it."""
    text = file_of(a_tool_run(calls=5)).decode()
    # the call's stream result, its dispatch, its history entry and the result's stream list,
    # never once more per later provider call
    assert [text.count(f"query-{n}") for n in range(5)] == [4] * 5


def test_the_turns_context_is_written_once_per_kind_of_value() -> None:
    """Nested reuse: the context each provider call and each tool context carry is not repeated.

    The items appear in the start line's turn, the first provider call and the
    first dispatched call's tool context, and never again.
    """
    turn = TurnSettings(context=(ContextItem(content="the-long-context"),))
    run = drive([*(call(args={"q": n}) for n in range(5)), done()], turn=turn)
    text = file_of(trace_of(run)).decode()
    assert text.count("the-long-context") == 3
    assert load_bytes(text.encode()) == trace_of(run)


def test_the_trace_size_grows_linearly_with_the_iterations() -> None:
    """Doubling the tool calls doubles the file, give or take the fixed start and end."""
    small, large = (len(file_of(a_tool_run(calls=n))) for n in (40, 80))
    assert large < 2.1 * small


def test_a_raw_line_separator_inside_a_string_stays_in_its_line() -> None:
    """Only `\n` ends a line: U+2028, U+0085 and a form feed inside a JSON string do not."""
    turn = TurnSettings(context=(ContextItem(content="a\u2028b\x85c\x0cd"),))
    trace = trace_of(drive([done()], turn=turn))
    raw = file_of(trace).decode().replace("\\u2028", "\u2028").replace("\\u0085", "\x85")
    assert "\u2028" in raw
    assert load_bytes(raw.encode()) == trace


def test_bytes_that_are_not_utf8_name_their_line() -> None:
    """Decoding errors say which line holds the bad byte, and the byte."""
    whole = file_of(a_tool_run())
    bad = whole.replace(b"query-1", b"query-\xff", 1)
    line = whole[: whole.index(b"query-1")].count(b"\n") + 1
    with pytest.raises(TraceError, match=rf"^line {line}: not UTF-8 text \(byte \d+: invalid"):
        load_bytes(bad)


def test_a_silent_stream_is_written_with_its_flag_and_its_notice_and_replays() -> None:
    """The loop's own inactivity timeout: its event says `went_silent`, its step holds the
    inactivity notice; the trace loads equal and replays. Without the flag (a `timeout`
    the provider reported, or a trace written before it existed) the event is written
    without the key, and the step has no notice, so such a trace replays as before."""
    silent = trace_of(drive([ended(StreamStatus.TIMEOUT)], silences=[True]))
    lines = list(dump_lines(silent))
    (event,) = [json.loads(line) for line in lines if '"StreamEnded"' in line]
    assert event["event"]["went_silent"] is True
    assert sum('"stream_inactivity_timeout"' in line for line in lines) == 1
    assert load_lines(lines) == silent and replay(silent) == []
    reported = trace_of(drive([ended(StreamStatus.TIMEOUT)], silences=[False]))
    lines = list(dump_lines(reported))
    (event,) = [json.loads(line) for line in lines if '"StreamEnded"' in line]
    assert "went_silent" not in event["event"]
    assert not any('"stream_inactivity_timeout"' in line for line in lines)
    assert replay(load_lines(lines)) == []


def test_replay_names_the_step_whose_effects_differ() -> None:
    """A tampered effect is reported with its step."""
    trace = trace_of(drive([call(), done()], [ok()]))
    lines = list(dump_lines(trace))
    lines[2] = lines[2].replace('"iteration": 0', '"iteration": 9')
    assert replay(load_lines(lines)) == ["step 0 (TurnStarted): effects differ"]


def test_replayed_raises_naming_the_first_difference_and_how_many_more() -> None:
    """`replayed` is the trace itself when it replays, else one error with the first difference."""
    trace = trace_of(drive([call(), done()], [ok()]))
    assert replayed(trace) is trace
    lines = [line.replace('"iteration": 0', '"iteration": 9') for line in dump_lines(trace)]
    with pytest.raises(
        TraceMismatch,
        match=r"^does not replay: step 0 \(TurnStarted\): "
        r"effects differ \(and \d+ more\)$",
    ):
        replayed(load_lines(lines))


REUSE = json.dumps({"kind": "event", "event": {"_type": "TurnStarted"}, "reuse": {"x": 1}})


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
        ([START, EVENT, END], "line 3: unexpected line of kind 'end' here"),
        (
            [START, EVENT],
            "line 2: the trace ends inside a step: the event on line 2 has no step line (cut off",
        ),
        ([START], "line 1: the trace ends after its start line without its end line (cut off"),
        ([START, EVENT, STEP], "line 3: the trace ends after 1 steps without its end line"),
        (
            [START, EVENT, EVENT],
            "line 3: an event line before the step line of the event on line 2 (a line written",
        ),
        ([START, START], "line 2: unexpected line of kind 'start' here"),
        ([START, '{"kind": "end", "steps": 0}'], "line 2: the end line comes before any step"),
        ([START, EVENT, STEP, END.replace("1", "2")], "line 4: the end line counts 2 steps, the"),
        ([START, EVENT, STEP, END.replace("1", "true")], "line 4: the end line counts True steps"),
        ([START, EVENT, STEP, END, END], "line 5: a line after the end line (line 4)"),
        ([START, "", EVENT, STEP, END], "line 2: a blank line"),
        ([START, EVENT, STEP, END, " "], "line 5: a line after the end line (line 4)"),
        (
            [START, EVENT, '{"kind": "step", "move": "started", "source": "nowhere", "dest": "x"}'],
            "line 3: 'nowhere' is not a valid Phase",
        ),
        (
            [START, EVENT, '{"kind": "step", "move": "started", "source": "idle"}'],
            "line 3: the step line needs 'dest'",
        ),
        (
            [START, EVENT, STEP[:-1] + ', "note": 1}'],
            "line 3: unknown field 'note' in the step line",
        ),
        ([START[:-1] + ', "x": 1}'], "line 1: unknown field 'x' in the start line"),
        (
            [START, EVENT[:-1] + ', "at": 0}'],
            "line 2: unknown field 'at' in the event line",
        ),
        (
            [START, json.dumps({"kind": "event", "event": {"_type": "TurnStarted", "late": 1}})],
            "line 2: not a valid Event: extra fields found (late) @ $",
        ),
        (
            [START.replace('"config": {}', '"config": {"max_iterations": 5}')],
            "line 1: not a valid LoopConfig: extra fields found (max_iterations) @ $",
        ),
        ([START, REUSE], "line 2: reuse, but no TurnStarted came before"),
        (
            [START.replace('"version": 3', '"version": 4')],
            "line 1: a trace written by format 4; this toolloop reads format 3 only",
        ),
        (  # format 2's dispatch effects lack the pre-tool text: it cannot replay
            [START.replace('"version": 3', '"version": 2')],
            "line 1: a trace written by format 2; this toolloop reads format 3 only",
        ),
        (
            [START.replace('"version": 3, ', "")],
            "line 1: a trace written by an older toolloop (format 1); this toolloop reads format 3",
        ),
    ],
)
def test_malformed_trace_names_the_line(lines: list[str], message: str) -> None:
    """Each malformed trace raises TraceError naming its line."""
    with pytest.raises(TraceError, match=f"^{re.escape(message)}"):
        load_lines(lines)


@pytest.mark.parametrize(
    ("reuse", "message"),
    [
        ({"function_history": 99}, "reuse of 'function_history' must count 1 to 1 items, got 99"),
        ({"function_history": 0}, "reuse of 'function_history' must count 1 to 1 items, got 0"),
        ({"iteration": 1}, "reuse names 'iteration', which is no list field of StreamOnce"),
        ({"nothing": 1}, "reuse names 'nothing', which is no list field of StreamOnce"),
        ([1], "reuse must be an object of counts, got [1]"),
    ],
)
def test_a_bad_reuse_names_the_line(reuse: object, message: str) -> None:
    """A reuse that names no list field, or more items than came before, is refused."""
    lines = list(dump_lines(a_tool_run(calls=2)))
    at = [n for n, line in enumerate(lines) if '"reuse"' in line and "StreamOnce" in line][-1]
    record = json.loads(lines[at])
    lines[at] = json.dumps({**record, "reuse": reuse})
    with pytest.raises(TraceError, match=f"^line {at + 1}: {re.escape(message)}$"):
        load_lines(lines)


@pytest.mark.parametrize(
    ("reuse", "message"),
    [
        ({"context": {"context_items": 7}}, "reuse of 'context.context_items' must count 1 to 1"),
        ({"context": {"locale": 1}}, "reuse names 'context.locale', which is no list field of"),
        ({"context": [1]}, "reuse names 'context', which is no list field of DispatchTool"),
        ({"context": 1}, "reuse names 'context', which is no list field of DispatchTool"),
    ],
)
def test_a_bad_nested_reuse_names_the_line_and_the_path(reuse: object, message: str) -> None:
    """A nested reuse is checked like a top-level one, its path named."""
    turn = TurnSettings(context=(ContextItem(content="c"),))
    lines = list(dump_lines(trace_of(drive([call(), call(), done()], turn=turn))))
    at = [n for n, line in enumerate(lines) if '"DispatchTool"' in line][-1]
    lines[at] = json.dumps({**json.loads(lines[at]), "reuse": reuse})
    with pytest.raises(TraceError, match=f"^line {at + 1}: {re.escape(message)}"):
        load_lines(lines)


def test_unknown_event_type_is_a_trace_error() -> None:
    """An event of no known type names the line."""
    bad = json.dumps({"kind": "event", "event": {"_type": "Nope"}})
    with pytest.raises(TraceError, match=r"^line 2: not a valid"):
        load_lines([START, bad])


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
