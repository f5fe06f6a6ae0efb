"""The declared machine: the table of `toolloop.engine.table`, as data to check and draw.

`MOVES` is read off `TABLE`, one declared move per row, so the table is written
once: the conformance tests check that `step`'s interpreted rows pick
the same move as `transitions` running these rows (they test `step`'s selection:
a wrong guard or a wrong row order is in both, and only the property,
scenario and model-based suites, which assert outcomes, catch it);
`toolloop.specs.paths` derives model-based scenarios from it, and
`toolloop.specs.diagram` draws it.

A declared move is (name, trigger, source, dest, conditions, unless, label,
rule): the name is its row's, unique; the trigger is the event class that
causes it; the conditions and unless lists name facts of
`toolloop.engine.guards.Context` (all conditions hold, no unless holds); the
label is the move `step` reports in `Step.move`; the rule is the row's SPEC
rule. The moves of one (source, trigger) are tried in the order declared and
the first whose guards hold is taken, which is how `transitions` picks a transition;
`build_machine` hands the same list to a `transitions.Machine`
(`auto_transitions=False`), and `Executable.predict` asks it which move an
event selects. One label may name several moves from one phase (the ceiling
after each kind of outcome) when they share the trigger and the destination,
so a trace's (source, label, dest) still names one edge of the diagram.

`declare` checks a declaration when it is built and raises a `DeclarationError`
naming the phase or move at fault: an unknown phase, event or guard, a move
label used from one phase for two destinations, a phase the start cannot
reach, or a phase with no path to the final one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from transitions import Machine

from toolloop.engine.events import EVENT_TYPES, Event
from toolloop.engine.guards import FACTS, Context, context
from toolloop.engine.table import FINISHED, IDLE, TABLE, Row
from toolloop.states import IterationState, Phase
from toolloop.states.errors import ToolloopError

EVENT_NAMES = frozenset(cls.__name__ for cls in EVENT_TYPES)
Guard = Callable[[Context], bool]


@attrs.frozen(kw_only=True)
class DeclaredMove:
    """One declared move of the machine: one row of the table."""

    name: str
    """The row's name, unique in the declaration (`toolloop.engine.table.Row.name`)."""
    label: str
    """The move's name, as `step` reports it in `Step.move`; several rows may share it."""
    trigger: str
    """The class name of the event that causes it."""
    source: Phase
    dest: Phase
    conditions: tuple[str, ...] = ()
    """Guards that must all hold on (state_before, event)."""
    unless: tuple[str, ...] = ()
    """Guards of which none may hold."""
    rule: str = ""
    """The SPEC rule the move implements, e.g. "6.4"."""

    @property
    def where(self) -> str:
        """How errors and reports name the move: `label` from `source` (and its row's name)."""
        row = f" (row {self.name!r})" if self.name != self.label else ""
        return f"move {self.label!r} from {self.source.value}{row}"

    def holds(self, state: IterationState, event: Event) -> bool:
        """Whether this move's guards select it for `event` arriving in `state`."""
        ctx = context(state, event)
        return all(resolve_guard(name, self)(ctx) for name in self.conditions) and not any(
            resolve_guard(name, self)(ctx) for name in self.unless
        )


@attrs.frozen(kw_only=True)
class Declaration:
    """A checked machine: its phases, where it starts and ends, and its moves in order."""

    phases: tuple[Phase, ...]
    initial: Phase
    final: Phase
    moves: tuple[DeclaredMove, ...]

    def moves_from(self, source: Phase) -> tuple[DeclaredMove, ...]:
        """The moves leaving `source`, in their declared (selection) order."""
        return tuple(move for move in self.moves if move.source is source)

    def move(self, source: Phase, label: str) -> DeclaredMove | None:
        """The (first) move named `label` from `source`, if declared."""
        return next((m for m in self.moves_from(source) if m.label == label), None)

    def named(self, source: Phase, label: str) -> tuple[DeclaredMove, ...]:
        """Every move named `label` from `source`, in declared order."""
        return tuple(m for m in self.moves_from(source) if m.label == label)


class DeclarationError(ToolloopError, ValueError):
    """A declared machine is broken; `subject` names the phase or move at fault."""

    def __init__(self, subject: str, problem: str) -> None:
        super().__init__(f"{subject}: {problem}")
        self.subject = subject


class UnknownPhase(DeclarationError):
    """A move leaves from or leads to a phase the declaration does not list."""


class UnknownEvent(DeclarationError):
    """A move's trigger is not the name of an event class."""


class UnknownGuard(DeclarationError):
    """A move names a guard that is not a fact of `toolloop.engine.guards.Context`."""


class DuplicateMove(DeclarationError):
    """Two moves share a name, or two from one phase share a label but not the event and
    destination: a trace records only the label, so the label must say where the loop went.
    """


class UnreachablePhase(DeclarationError):
    """No sequence of moves leads from the start to this phase."""


class TrapPhase(DeclarationError):
    """No sequence of moves leads from this phase to the final phase."""


def resolve_guard(name: str, move: DeclaredMove) -> Guard:
    """The guard reading the fact `name` of a `Context`, or `UnknownGuard` naming `move`."""
    if name not in FACTS:
        raise UnknownGuard(move.where, f"guard {name!r} is not a fact of guards.Context")
    guard: Guard = operator.attrgetter(name)
    return guard


def declare(
    moves: Sequence[DeclaredMove],
    *,
    phases: Sequence[Phase] = tuple(Phase),
    initial: Phase = IDLE,
    final: Phase = FINISHED,
) -> Declaration:
    """Check `moves` and build the declaration, or raise the `DeclarationError` at fault."""
    declaration = Declaration(
        phases=tuple(phases), initial=initial, final=final, moves=tuple(moves)
    )
    for move in declaration.moves:
        _check_move(declaration, move)
    _check_unique(declaration.moves)
    _check_paths(declaration)
    return declaration


def _check_move(declaration: Declaration, move: DeclaredMove) -> None:
    for phase in (move.source, move.dest):
        if phase not in declaration.phases:
            raise UnknownPhase(move.where, f"phase {phase.value} is not declared")
    if move.trigger not in EVENT_NAMES:
        expected = ", ".join(sorted(EVENT_NAMES))
        raise UnknownEvent(move.where, f"trigger {move.trigger!r} is not one of {expected}")
    for name in (*move.conditions, *move.unless):
        resolve_guard(name, move)


def _check_unique(moves: Iterable[DeclaredMove]) -> None:
    seen: dict[tuple[Phase, str], DeclaredMove] = {}
    names: set[str] = set()
    for move in moves:
        if move.name in names:
            raise DuplicateMove(move.where, f"the name {move.name!r} is declared twice")
        names.add(move.name)
        first = seen.setdefault((move.source, move.label), move)
        if (first.trigger, first.dest) != (move.trigger, move.dest):
            raise DuplicateMove(
                move.where,
                f"the label is declared twice from this phase, on {first.trigger} to "
                f"{first.dest.value} and on {move.trigger} to {move.dest.value}",
            )


def _check_paths(declaration: Declaration) -> None:
    forward = {(m.source, m.dest) for m in declaration.moves}
    reachable = _closure(declaration.initial, forward)
    reaching_final = _closure(declaration.final, {(dest, src) for src, dest in forward})
    for phase in declaration.phases:
        if phase not in reachable:
            start = declaration.initial.value
            raise UnreachablePhase(f"phase {phase.value}", f"not reachable from {start}")
        if phase is not declaration.final and phase not in reaching_final:
            end = declaration.final.value
            raise TrapPhase(f"phase {phase.value}", f"no path to {end}")


def _closure(start: Phase, edges: set[tuple[Phase, Phase]]) -> set[Phase]:
    """Every phase reachable from `start` along `edges`, `start` included."""
    found, frontier = {start}, [start]
    while frontier:
        here = frontier.pop()
        for src, dest in edges:
            if src is here and dest not in found:
                found.add(dest)
                frontier.append(dest)
    return found


def moves_of(table: Sequence[Row]) -> tuple[DeclaredMove, ...]:
    """One declared move per row of the table, its guards named, in the table's order."""
    return tuple(
        DeclaredMove(
            name=row.name,
            label=row.move.value,
            trigger=row.event.__name__,
            source=row.source,
            dest=row.dest,
            conditions=row.when,
            unless=row.unless,
            rule=row.rule,
        )
        for row in table
    )


MOVES: tuple[DeclaredMove, ...] = moves_of(TABLE)
"""The table's rows as declared moves."""

MACHINE: Declaration = declare(MOVES)
"""The tool loop's machine, checked on import."""


class _Probe:
    """The model object `transitions` moves between phases; remembers the move taken."""

    state: Phase
    taken: DeclaredMove | None = None


class Executable:
    """A `transitions.Machine` built from a declaration, to ask which move an event selects."""

    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration
        self._probe = _Probe()
        self._machine = Machine(
            model=self._probe,
            states=list(declaration.phases),
            initial=declaration.initial,
            transitions=[self._transition(move) for move in declaration.moves],
            auto_transitions=False,
            ignore_invalid_triggers=True,
        )

    def _transition(self, move: DeclaredMove) -> dict[str, Any]:
        def record(*_: object) -> None:
            self._probe.taken = move

        return {
            "trigger": move.trigger,
            "source": move.source,
            "dest": move.dest,
            "conditions": [resolve_guard(name, move) for name in move.conditions],
            "unless": [resolve_guard(name, move) for name in move.unless],
            "after": [record],
        }

    def predict(self, state: IterationState, event: Event) -> DeclaredMove | None:
        """The declared move `event` selects in `state`, or None when no move is declared."""
        self._probe.taken = None
        self._machine.set_state(state.phase, self._probe)
        trigger = self._machine.events.get(type(event).__name__)
        if trigger is not None:
            trigger.trigger(self._probe, context(state, event))
        return self._probe.taken

    def violation(self, state: IterationState, event: Event, move: str, dest: Phase) -> str | None:
        """Why `step` moving by `move` to `dest` breaks the declaration, or None when it conforms.

        The move must be declared from the state's phase, for the event's class and `dest`,
        the guards of one of the moves of that label must hold, and the declaration must
        select one of them.
        """
        source, trigger = state.phase, type(event).__name__
        seen = f"{source.value} -{move}-> {dest.value} on {trigger}"
        declared = self.declaration.named(source, move)
        if not declared or (declared[0].trigger, declared[0].dest) != (trigger, dest):
            return f"{seen} is not a declared move"
        if not any(m.holds(state, event) for m in declared):
            return f"{seen}: its guards do not hold"
        predicted = self.predict(state, event)
        if predicted not in declared:
            other = "no move" if predicted is None else f"move {predicted.label!r}"
            return f"{seen}: the declaration selects {other} first"
        return None


def build_machine(declaration: Declaration = MACHINE) -> Executable:
    """The declaration as a running `transitions` machine (not on the hot path)."""
    return Executable(declaration)
