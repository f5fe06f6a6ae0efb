"""`step` is total (every (phase, event) pair is handled or refused by name) and runs the table."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.builders import NOVELAI, call, done, fail, ok
from tests.engine.drive import drive
from toolloop.engine import actions
from toolloop.engine.commands import DispatchTool, Finish
from toolloop.engine.events import StashTaken, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import Group, InvalidEvent, initial_state, step
from toolloop.engine.table import FINISHED, ROWS, TABLE, Move
from toolloop.states import LoopConfig, PendingCall, Phase, TurnSettings

EVENTS = [
    TurnStarted(),
    StreamEnded(result=done()),
    StreamEnded(result=call()),
    ToolSettled(result=ok()),
    StashTaken(item=None),
]


def state_in(phase: Phase):
    """A plausible state of each phase, reached by driving the engine where possible."""
    base = initial_state(LoopConfig(), TurnSettings())
    pending = PendingCall(stream=call(), name="web_search", restart_type="context_restart_gif")
    needs_pending = phase in (Phase.DISPATCHING, Phase.TAKING_STASH)
    return attrs.evolve(base, phase=phase, pending=pending if needs_pending else None)


@given(phase=st.sampled_from(list(Phase)), event=st.sampled_from(EVENTS))
def test_every_phase_event_pair_moves_to_a_phase_or_raises_invalid_event(phase, event) -> None:
    """Totality: a valid phase, or InvalidEvent naming both; a refusal changes nothing."""
    state = state_in(phase)
    if (phase, type(event)) in {(row.source, row.event) for row in TABLE}:
        assert step(state, event).state.phase in Phase
        return
    with pytest.raises(InvalidEvent) as caught:
        step(state, event)
    assert caught.value.phase is phase and caught.value.event is event
    assert str(caught.value) == f"Invalid event {type(event).__name__} in phase {phase.value}"
    assert state == state_in(phase)


def test_finished_accepts_no_event() -> None:
    """After the final effect nothing more may happen."""
    final = drive([done()]).final
    for event in EVENTS:
        with pytest.raises(InvalidEvent):
            step(final, event)


def test_step_does_not_mutate_its_input() -> None:
    """The state passed in is unchanged after the step."""
    state = initial_state(LoopConfig(), TurnSettings())
    snapshot = attrs.asdict(state)
    step(state, TurnStarted())
    assert attrs.asdict(state) == snapshot


def test_initial_state_takes_the_turn_context() -> None:
    """The attempt starts from the turn's base context at iteration 0."""
    from toolloop.states import ContextItem

    item = ContextItem(content="hi")
    state = initial_state(LoopConfig(), TurnSettings(context=(item,)))
    assert (state.phase, state.iteration, state.context.items) == (Phase.IDLE, 0, (item,))


def test_the_move_is_an_enum_member_that_traces_write_as_its_string() -> None:
    """`Step.move` is a `Move`; JSON (the trace format) writes it as today's string."""
    out = step(initial_state(LoopConfig(), TurnSettings()), TurnStarted())
    assert out.move is Move.STARTED
    assert json.dumps({"move": out.move}) == '{"move": "started"}'


def test_step_does_what_the_rows_say() -> None:
    """A row changed in the table changes what its group does, and nothing else."""
    rows = dict(ROWS[ToolSettled])[Phase.DISPATCHING]
    ended = tuple(
        attrs.evolve(row, actions=(*row.actions[:-2], actions.finish_with_sticker), dest=FINISHED)
        if row.name == "tool_succeeded"
        else row
        for row in rows
    )
    state = step(initial_state(LoopConfig(), TurnSettings()), TurnStarted()).state
    state = step(state, StreamEnded(result=call())).state
    out = Group(ended).take(state, ToolSettled(result=ok()))
    assert (out.move, out.state.phase) == (Move.TOOL_SUCCEEDED, FINISHED)
    assert isinstance(out.effects[-1], Finish)
    assert step(state, ToolSettled(result=ok())).state.phase is Phase.STREAMING


def test_a_group_remembers_the_row_each_combination_of_facts_took() -> None:
    """The second event with the same facts takes the row the first took, from the memo;
    one with other facts selects its own row."""
    group = Group(dict(ROWS[ToolSettled])[Phase.DISPATCHING])
    state = step(initial_state(LoopConfig(), TurnSettings()), TurnStarted()).state
    state = step(state, StreamEnded(result=call())).state
    first = group.take(state, ToolSettled(result=ok()))
    assert list(group.chosen.values()) == [r for r in group.rows if r.name == "tool_succeeded"]
    assert group.take(state, ToolSettled(result=ok())).move is first.move
    assert len(group.chosen) == 1
    assert group.take(state, ToolSettled(result=fail())).move is Move.TOOL_FAILED
    assert len(group.chosen) == 2


def test_a_move_reads_as_its_string_in_a_printed_list() -> None:
    """`print([out.move])` shows `['started']`, as it did when moves were strings."""
    out = step(initial_state(LoopConfig(), TurnSettings()), TurnStarted())
    assert repr([out.move]) == "['started']" and out.move == "started"


def test_the_dispatch_carries_the_pre_tool_text_and_whether_it_was_suppressed() -> None:
    """The interpreter reads the stream's text and its suppression off `DispatchTool`, not the
    state: after a NovelAI failure following visible text, the retry's call is suppressed."""
    state = step(initial_state(LoopConfig(), TurnSettings(provider=NOVELAI)), TurnStarted()).state
    out = step(state, StreamEnded(result=call(text="Sure.")))
    first = out.effects[-1]
    assert isinstance(first, DispatchTool)
    assert (first.pre_tool_text, first.text_suppressed) == ("Sure.", False)
    out = step(out.state, ToolSettled(result=fail()))
    assert out.state.suppress_text_output
    out = step(out.state, StreamEnded(result=call(text="Again.")))
    retry = out.effects[-1]
    assert isinstance(retry, DispatchTool)
    assert (retry.pre_tool_text, retry.text_suppressed) == ("Again.", True)
