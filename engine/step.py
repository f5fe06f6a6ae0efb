"""The transition function: `step(state, event) -> Step(state, effects, move)`.

`step` runs the table (`toolloop.engine.table`, whose header is the theory of
operation): it builds the event's `Context` once, takes the first row of the
(phase, event type) whose guards hold, runs the row's actions on a draft of the
next state and moves to the row's destination. A pair without rows raises
`InvalidEvent` and leaves the state as it was.

Each (phase, event type)'s rows are compiled on import into one function that
does exactly that, spelled out as a chain of `if`s, one comment per row naming
its move and SPEC rule (a traceback shows these lines); the conformance tests
run the same rows through `transitions` and check that both pick the same move.

`step` is pure: it does no I/O, reads no clock and does not execute its
effects (it is to the interpreter what XState's `transition()` is to a service).
"""

import itertools
import linecache
from collections.abc import Callable, Sequence

import attrs

from toolloop.engine.commands import Effect
from toolloop.engine.construct import constructor
from toolloop.engine.draft import Draft
from toolloop.engine.events import Event
from toolloop.engine.guards import CONTEXTS, Context, Fact, Guard
from toolloop.engine.result import ended
from toolloop.engine.table import ROWS, Move, Row
from toolloop.states import ContextState, IterationState, LoopConfig, Phase, TurnSettings
from toolloop.states.errors import BrokenInvariant, ToolloopError

__all__ = ["InvalidEvent", "Step", "initial_state", "step"]


class InvalidEvent(ToolloopError, RuntimeError):
    """An event arrived in a phase that does not wait for it: a broken interpreter."""

    def __init__(self, phase: Phase, event: object) -> None:
        super().__init__(f"Invalid event {type(event).__name__} in phase {phase.value}")
        self.phase = phase
        self.event = event


@attrs.frozen(kw_only=True, slots=False)
class Step:
    """What `step` returns: the next state and the effects to carry out, in order."""

    state: IterationState
    effects: tuple[Effect, ...]
    move: Move
    """The move the row taken reports (see `toolloop.engine.table`)."""


Transition = Callable[[IterationState, Event], Step]


def step(state: IterationState, event: Event) -> Step:
    """The next state and the effects to carry out, for `event` arriving in `state`."""
    phase = state.phase
    for waiting, transition in _TRANSITIONS.get(type(event), ()):
        if waiting is phase:
            return transition(state, event)
    raise InvalidEvent(phase, event)


def compile_rows(rows: Sequence[Row]) -> tuple[Transition, str]:
    """The rows of one (phase, event type) as one function, and its source.

    The function does what reading the rows says, spelled out as a chain of
    `if`s, one per row in order, commented with the row's move and SPEC rule:
    build the context, test each row's guards, run the first matching row's
    actions on a draft, move to its destination. Consecutive rows whose `when`
    starts with the same guard test it once, in one `if` around them (guards
    are facts, so this selects the same row, with fewer reads: about 0.3 µs an
    iteration). Compiled once on import, it spares every event an interpreter's
    loops over rows, guards and actions; its source is registered with
    `linecache`, so tracebacks and debuggers show it.
    """
    event = rows[0].event
    names: dict[str, object] = {
        "Context": CONTEXTS.get(event, Context),
        "Draft": Draft,
        "BrokenInvariant": BrokenInvariant,
        "Step": constructor(Step),  # built on every event: see `construct`
        "ended": ended,
    }
    lines = ["def transition(state, event):", "    ctx = Context(state, event)"]
    lines += _select([(number, row, row.when) for number, row in enumerate(rows)], names, "    ")
    lines.append(
        "    raise BrokenInvariant(f'no row of the table takes {event!r} in {state.phase}')"
    )
    source = "\n".join(lines) + "\n"
    filename = f"<table {rows[0].source.value} {event.__name__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)
    transition: Transition = names["transition"]  # type: ignore[assignment]
    return transition, source


Numbered = list[tuple[int, Row, tuple[Guard, ...]]]
"""Rows with their number and the `when` guards not yet tested by an enclosing `if`."""


def _select(rows: Numbered, names: dict[str, object], indent: str) -> list[str]:
    """The `if`s of `rows`, in order; a run of rows whose next guard is one guard tests it once."""
    lines: list[str] = []
    for first, grouped in itertools.groupby(rows, key=lambda numbered: numbered[2][:1]):
        run = list(grouped)
        if first and len(run) > 1:
            lines.append(f"{indent}if {_test(names, first[0])}:")
            inner = [(number, row, when[1:]) for number, row, when in run]
            lines += _select(inner, names, indent + "    ")
        else:
            lines += [line for numbered in run for line in _row(*numbered, names, indent)]
    return lines


def _row(
    number: int, row: Row, when: tuple[Guard, ...], names: dict[str, object], indent: str
) -> list[str]:
    tests = [_test(names, guard) for guard in when]
    tests += [f"not {_test(names, guard)}" for guard in row.unless]
    names[f"dest_{number}"], names[f"move_{number}"] = row.dest, row.move
    body = indent + "    "
    return [
        f"{indent}if {' and '.join(tests) or 'True'}:  # {row.move} (SPEC {row.rule})",
        f"{body}draft, effects = Draft(state), []",
        *(f"{body}{_name(names, action)}(ctx, draft, effects)" for action in row.actions),
        *([f"{body}ended(effects, move_{number})"] if row.dest is Phase.FINISHED else []),
        f"{body}draft.phase = dest_{number}",
        f"{body}return Step(state=draft.commit(), effects=tuple(effects), move=move_{number})",
    ]


def _test(names: dict[str, object], guard: Guard) -> str:
    """A guard in the generated code: a `Fact` is read, any other guard called."""
    if isinstance(guard, Fact):
        return f"ctx.{guard.__name__}"
    return f"{_name(names, guard)}(ctx)"


def _name(names: dict[str, object], function: Callable[..., object]) -> str:
    """`function`'s name in the generated code (its own name, prefixed by its module's)."""
    name = f"{function.__module__.rsplit('.', 1)[-1]}_{function.__name__}"
    names[name] = function
    return name


_TRANSITIONS = {
    event: tuple((phase, compile_rows(rows)[0]) for phase, rows in pairs)
    for event, pairs in ROWS.items()
}


def initial_state(config: LoopConfig, turn: TurnSettings) -> IterationState:
    """The state before `TurnStarted`: iteration 0, the turn's base context."""
    return IterationState(config=config, turn=turn, context=ContextState(items=turn.context))
