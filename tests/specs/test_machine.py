"""The declared machine is checked when it is built; a broken one names what is at fault."""

from __future__ import annotations

import attrs
import pytest

from toolloop.engine.table import FINISHED, ROWS, TABLE, TAKING_STASH
from toolloop.specs.machine import (
    MACHINE,
    MOVES,
    DeclarationError,
    DeclaredMove,
    DuplicateMove,
    TrapPhase,
    UnknownEvent,
    UnknownGuard,
    UnknownPhase,
    UnreachablePhase,
    declare,
)
from toolloop.states import Phase


def replaced(row: str, **changes: object) -> list[DeclaredMove]:
    """MOVES with the move of the row named `row` changed."""
    return [attrs.evolve(m, **changes) if m.name == row else m for m in MOVES]


class TestTheDeclaration:
    """The tool loop's declaration itself."""

    def test_its_phases_are_the_phase_enum(self) -> None:
        """Every `Phase` member is a phase of the machine, in order."""
        assert MACHINE.phases == tuple(Phase)

    def test_it_declares_moves_for_exactly_the_pairs_step_handles(self) -> None:
        """The (phase, event) pairs with moves are the pairs `step`'s table accepts."""
        declared = {(m.source, m.trigger) for m in MACHINE.moves}
        accepted = {(phase, event.__name__) for event, rows in ROWS.items() for phase, _ in rows}
        assert declared == accepted

    def test_every_move_label_names_one_edge_per_source(self) -> None:
        """The moves one label names from one phase share their event and destination."""
        edges = {(m.source, m.label): (m.trigger, m.dest) for m in MACHINE.moves}
        assert all(edges[(m.source, m.label)] == (m.trigger, m.dest) for m in MACHINE.moves)

    def test_each_move_is_one_row_of_the_table_with_its_spec_rule(self) -> None:
        """The declaration is read off the table: one move per row, in order, rule included."""
        assert [(m.name, m.source, m.label, m.dest, m.rule) for m in MACHINE.moves] == [
            (row.name, row.source, row.move.value, row.dest, row.rule) for row in TABLE
        ]

    def test_no_move_leaves_the_final_phase(self) -> None:
        """FINISHED accepts no event."""
        assert MACHINE.moves_from(FINISHED) == ()


class TestBrokenDeclarations:
    """Each check of `declare`, shown failing on a deliberately broken declaration."""

    def test_an_unreachable_phase_is_named(self) -> None:
        """Without the move into TAKING_STASH, that phase cannot be reached from IDLE."""
        moves = [m for m in MOVES if m.dest is not TAKING_STASH]
        unreachable = r"^phase taking_stash: not reachable from idle$"
        with pytest.raises(UnreachablePhase, match=unreachable):
            declare(moves)

    def test_a_phase_without_a_path_to_the_end_is_named(self) -> None:
        """Without the moves out of TAKING_STASH, that phase traps the loop."""
        moves = [m for m in MOVES if m.source is not TAKING_STASH]
        with pytest.raises(TrapPhase, match=r"^phase taking_stash: no path to finished$"):
            declare(moves)

    def test_an_unknown_guard_is_named_with_its_move(self) -> None:
        """A guard name that is no fact of `guards.Context` is refused."""
        moves = replaced("completed", conditions=("stream_done",))
        with pytest.raises(
            UnknownGuard,
            match=r"^move 'completed' from streaming: guard 'stream_done' is not a fact of "
            r"guards\.Context$",
        ):
            declare(moves)

    @pytest.mark.parametrize("name", ["errors", "pre_tool_text", "_outcome", "FACTS"])
    def test_a_context_attribute_that_is_no_bool_is_not_a_guard(self, name: str) -> None:
        """Only the `bool` attributes of `guards.Context` (its facts) count as guards."""
        with pytest.raises(UnknownGuard, match=rf"guard '{name}' is not a fact"):
            declare(replaced("completed", unless=(name,)))

    def test_a_row_name_used_twice_is_named(self) -> None:
        """Two moves named alike: a witness keyed by the name could not tell them apart."""
        moves = replaced("ceiling_reached:failure", name="ceiling_reached:success")
        with pytest.raises(
            DuplicateMove,
            match=r"^move 'ceiling_reached' from dispatching \(row 'ceiling_reached:success'\): "
            r"the name 'ceiling_reached:success' is declared twice$",
        ):
            declare(moves)

    def test_a_label_used_twice_from_one_phase_is_named(self) -> None:
        """A `tool_failed` to FINISHED and one to STREAMING could not be told apart in a trace."""
        moves = replaced("end_turn", label="tool_failed")
        with pytest.raises(
            DuplicateMove,
            match=r"^move 'tool_failed' from dispatching: the label is declared twice from this "
            r"phase, on ToolSettled to finished and on ToolSettled to streaming$",
        ):
            declare(moves)

    def test_an_unknown_trigger_is_named_with_its_move(self) -> None:
        """A trigger must be the name of an event class."""
        moves = replaced("started", trigger="TurnBegan")
        with pytest.raises(
            UnknownEvent, match=r"^move 'started' from idle: trigger 'TurnBegan' is not one of "
        ):
            declare(moves)

    def test_a_phase_missing_from_the_list_is_named_with_its_move(self) -> None:
        """A move into a phase the declaration does not list is refused."""
        phases = [p for p in Phase if p is not TAKING_STASH]
        with pytest.raises(
            UnknownPhase,
            match=r"^move 'restart_takes_stash' from dispatching: phase taking_stash is not",
        ):
            declare(MOVES, phases=phases)

    def test_every_declaration_error_is_a_value_error(self) -> None:
        """Callers can catch a broken declaration as a ValueError and read its subject."""
        with pytest.raises(ValueError) as raised:
            declare([m for m in MOVES if m.source is not TAKING_STASH])
        assert isinstance(raised.value, DeclarationError)
        assert raised.value.subject == "phase taking_stash"
