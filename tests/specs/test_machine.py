"""The declared machine is checked when it is built; a broken one names what is at fault."""

from __future__ import annotations

import attrs
import pytest

from toolloop.engine.table import DISPATCHING, FINISHED, ROWS, STREAMING, TABLE, TAKING_STASH
from toolloop.specs.machine import (
    MACHINE,
    MOVES,
    DeclarationError,
    DuplicateMove,
    Move,
    TrapPhase,
    UnknownEvent,
    UnknownGuard,
    UnknownPhase,
    UnreachablePhase,
    declare,
)
from toolloop.states import Phase


def replaced(name: str, source: Phase, **changes: object) -> list[Move]:
    """MOVES with the move `name` from `source` changed."""
    return [
        attrs.evolve(m, **changes) if (m.label, m.source) == (name, source) else m for m in MOVES
    ]


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
        assert [(m.source, m.label, m.dest, m.rule) for m in MACHINE.moves] == [
            (row.source, row.move.value, row.dest, row.rule) for row in TABLE
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
        """A guard name that is no function of engine/guards.py is refused."""
        moves = replaced("completed", STREAMING, conditions=("stream_done",))
        with pytest.raises(
            UnknownGuard,
            match=r"^move 'completed' from streaming: guard 'stream_done' is not a function in "
            r"toolloop\.engine\.guards$",
        ):
            declare(moves)

    @pytest.mark.parametrize("name", ["_status", "is_novelai", "Guard"])
    def test_private_imported_or_non_function_names_are_not_guards(self, name: str) -> None:
        """Only public functions defined in engine/guards.py count as guards."""
        with pytest.raises(UnknownGuard, match=rf"guard '{name}' is not a function"):
            declare(replaced("completed", STREAMING, unless=(name,)))

    def test_a_label_used_twice_from_one_phase_is_named(self) -> None:
        """A `tool_failed` to FINISHED and one to STREAMING could not be told apart in a trace."""
        moves = replaced("end_turn", DISPATCHING, label="tool_failed")
        with pytest.raises(
            DuplicateMove,
            match=r"^move 'tool_failed' from dispatching: the label is declared twice from this "
            r"phase, on ToolSettled to finished and on ToolSettled to streaming$",
        ):
            declare(moves)

    def test_an_unknown_trigger_is_named_with_its_move(self) -> None:
        """A trigger must be the name of an event class."""
        moves = replaced("started", Phase.IDLE, trigger="TurnBegan")
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
