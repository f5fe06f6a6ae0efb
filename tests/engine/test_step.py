"""`step` is total: every (phase, event) pair is handled or refused by name."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.builders import call, done, ok
from tests.engine.drive import drive
from toolloop.engine.events import StashTaken, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import InvalidEvent, initial_state, step
from toolloop.engine.table import TABLE
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
