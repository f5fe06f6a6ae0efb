"""The transition function: `step(state, event) -> Step(state, effects, move)`.

`step` runs the table (`toolloop.engine.table`, whose header is the theory of
operation) as data, with plain loops: it builds the event's `Context` once,
takes the first row of the (phase, event type) whose guards hold, runs the
row's actions on a draft of the next state and moves to the row's
destination. A pair without rows raises `InvalidEvent` and leaves the state
as it was.

Which row holds depends only on the facts its group's rows name, so each
group remembers the row it took for each combination of them (`Group.chosen`):
a tool iteration reads its facts in one `attrgetter` call and finds its row
in a dict, instead of testing the guards row by row.

`step` is pure: it does no I/O, reads no clock and does not execute its
effects (it is to the interpreter what XState's `transition()` is to a service).
"""

import operator
from collections.abc import Callable, Hashable, Sequence

import attrs

from toolloop.engine.commands import Effect
from toolloop.engine.draft import Draft
from toolloop.engine.events import Event
from toolloop.engine.guards import CONTEXTS, Context
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


_new = object.__new__


def _step(state: IterationState, effects: tuple[Effect, ...], move: Move) -> Step:
    """`Step(...)` without the class call, as `toolloop.engine.build` builds: one per event."""
    built: Step = _new(Step)
    fields = built.__dict__
    fields["state"] = state
    fields["effects"] = effects
    fields["move"] = move
    return built


def step(state: IterationState, event: Event) -> Step:
    """The next state and the effects to carry out, for `event` arriving in `state`."""
    phase = state.phase
    for waiting, group in _GROUPS.get(type(event), ()):
        if waiting is phase:
            return group.take(state, event)
    raise InvalidEvent(phase, event)


class Group:
    """The rows of one (phase, event type), and the row each combination of facts selects."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = tuple(rows)
        self.context: Callable[[IterationState, Event], Context] = CONTEXTS.get(
            rows[0].event, Context
        )
        named = dict.fromkeys(fact for row in rows for fact in (*row.when, *row.unless))
        self.facts: Callable[[Context], Hashable] = (
            operator.attrgetter(*named) if named else _no_facts
        )
        self.chosen: dict[Hashable, Row] = {}
        """The row taken for each combination of the facts, once it has been taken."""

    def take(self, state: IterationState, event: Event) -> Step:
        """The step of the first row whose guards hold for `event` arriving in `state`."""
        ctx = self.context(state, event)
        facts = self.facts(ctx)
        row = self.chosen.get(facts)
        if row is None:
            row = self.chosen[facts] = self.select(ctx)
        draft = Draft(state)
        effects: list[Effect] = []
        for action in row.actions:
            action(ctx, draft, effects)
        dest = row.dest
        if dest is _FINISHED:
            ended(effects, row.move)
        draft.phase = dest
        return _step(draft.commit(), tuple(effects), row.move)

    def select(self, ctx: Context) -> Row:
        """The first row whose `when` facts all hold and whose `unless` facts do not."""
        for row in self.rows:
            if all(getattr(ctx, fact) for fact in row.when) and not any(
                getattr(ctx, fact) for fact in row.unless
            ):
                return row
        state, event = ctx.state, ctx.event
        raise BrokenInvariant(f"no row of the table takes {event!r} in {state.phase}")


def _no_facts(ctx: Context) -> None:
    """The facts of a group whose rows test none: one combination, one row."""


_FINISHED = Phase.FINISHED

_GROUPS = {
    event: tuple((phase, Group(rows)) for phase, rows in pairs) for event, pairs in ROWS.items()
}


def initial_state(config: LoopConfig, turn: TurnSettings) -> IterationState:
    """The state before `TurnStarted`: iteration 0, the turn's base context."""
    return IterationState(config=config, turn=turn, context=ContextState(items=turn.context))
