"""`step` against the declared machine: each move it makes is declared and its guards select it."""

from __future__ import annotations

import attrs
from hypothesis import given, settings

from tests.engine.builders import call, done
from tests.engine.drive import Run
from tests.specs.conformance import EXECUTABLE, Stepped, never_taken, row_taken, violations
from tests.specs.strategies import RARE_WAITING, approval_attempts, attempts, every_attempt
from toolloop.engine.events import StreamEnded, TurnStarted
from toolloop.engine.step import initial_state
from toolloop.states import LoopConfig, Phase, TurnSettings


def stepped(run: Run) -> list[Stepped]:
    """The run's steps with the state on both sides."""
    pairs = zip(run.events, run.moves, run.states[:-1], run.states[1:], strict=True)
    return [(before, event, move, after) for event, move, before, after in pairs]


@given(run=every_attempt)
@settings(max_examples=400)
def test_every_step_is_a_declared_move_whose_guards_select_it(run: Run) -> None:
    """Conformance: each (phase, event, move, dest) is declared, its guards hold, it is first."""
    assert violations(stepped(run)) == []


def test_generated_runs_take_every_declared_row() -> None:
    """Coverage: a fixed sample of generated runs (and the hand-made `RARE_WAITING` runs)
    takes every declared move at least once, each by every row that reports it (the
    declaration selects the row: `stream_failed:silent` as well as `stream_failed`)."""
    taken: set[str] = set()

    def take_rows(run: Run) -> None:
        taken.update(row_taken(before, event) for before, event, _, _ in stepped(run))

    @given(run=attempts)
    @settings(max_examples=1000, derandomize=True, database=None)
    def take(run: Run) -> None:
        take_rows(run)

    @given(run=approval_attempts)
    @settings(max_examples=1500, derandomize=True, database=None)
    def take_waiting(run: Run) -> None:
        take_rows(run)

    take()
    take_waiting()
    for run in RARE_WAITING:  # hand-made: a denial last after a restart, an end_turn, NovelAI
        take_rows(run)
    assert never_taken(taken) == []


STREAMING_STATE = attrs.evolve(initial_state(LoopConfig(), TurnSettings()), phase=Phase.STREAMING)


class TestViolation:
    """The checker names what is wrong with a move that does not conform."""

    def test_an_undeclared_label_is_reported(self) -> None:
        """A move name the declaration does not have from the phase is not declared."""
        problem = EXECUTABLE.violation(
            STREAMING_STATE, StreamEnded(result=done()), "finished_early", Phase.FINISHED
        )
        assert problem == (
            "streaming -finished_early-> finished on StreamEnded is not a declared move"
        )

    def test_a_declared_label_to_another_phase_is_reported(self) -> None:
        """A declared move that lands in the wrong phase is not the declared move."""
        problem = EXECUTABLE.violation(
            STREAMING_STATE, StreamEnded(result=done()), "completed", Phase.STREAMING
        )
        assert problem == "streaming -completed-> streaming on StreamEnded is not a declared move"

    def test_a_move_whose_guards_fail_is_reported(self) -> None:
        """A completed stream cannot take the malformed-call move."""
        problem = EXECUTABLE.violation(
            STREAMING_STATE, StreamEnded(result=done()), "call_malformed", Phase.FINISHED
        )
        assert problem == (
            "streaming -call_malformed-> finished on StreamEnded: its guards do not hold"
        )

    def test_a_move_shadowed_by_an_earlier_one_is_reported(self) -> None:
        """The unguarded dispatch is declared last: a completed stream selects `completed` first."""
        problem = EXECUTABLE.violation(
            STREAMING_STATE, StreamEnded(result=done()), "dispatched", Phase.DISPATCHING
        )
        assert problem == (
            "streaming -dispatched-> dispatching on StreamEnded: "
            "the declaration selects move 'completed' first"
        )

    def test_a_conforming_move_has_no_violation(self) -> None:
        """A valid call dispatched from STREAMING conforms."""
        problem = EXECUTABLE.violation(
            STREAMING_STATE, StreamEnded(result=call()), "dispatched", Phase.DISPATCHING
        )
        assert problem is None

    def test_an_event_the_phase_does_not_wait_for_selects_no_move(self) -> None:
        """TurnStarted in STREAMING has no declared move."""
        assert EXECUTABLE.predict(STREAMING_STATE, TurnStarted()) is None
