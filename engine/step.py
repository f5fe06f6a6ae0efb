"""The transition function: `step(state, event) -> Step(state, effects)`.

Theory of operation. The loop is in one `Phase` at a time and each phase waits
for exactly one kind of event, the answer to the awaited effect that ended the
previous step:

    IDLE          --TurnStarted-->  STREAMING | FINISHED
    STREAMING     --StreamEnded-->  DISPATCHING | STREAMING | FINISHED
    DISPATCHING   --ToolSettled-->  STREAMING | TAKING_STASH | FINISHED
    TAKING_STASH  --StashTaken-->   STREAMING | FINISHED

STREAMING goes straight back to STREAMING when stage 02 refuses the call
without running it (truncated arguments, the deliberate-mode allowlist).

Every other (phase, event) pair raises `InvalidEvent` and leaves the state as
it was. `step` is pure: it does no I/O, reads no clock and does not execute its
effects (it is to the interpreter what XState's `transition()` is to a service).
The declared machine in `toolloop.specs.machine` lists the same moves as data.
"""

from collections.abc import Callable
from typing import Any

from toolloop.engine import loop
from toolloop.engine.events import (
    Event,
    StashTaken,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.loop import Step
from toolloop.states import ContextState, IterationState, LoopConfig, Phase, TurnSettings

__all__ = ["HANDLERS", "InvalidEvent", "Step", "initial_state", "step"]


class InvalidEvent(RuntimeError):
    """An event arrived in a phase that does not wait for it: a broken interpreter."""

    def __init__(self, phase: Phase, event: object) -> None:
        super().__init__(f"Invalid event {type(event).__name__} in phase {phase.value}")
        self.phase = phase
        self.event = event


HANDLERS: dict[type[Any], tuple[Phase, Callable[[IterationState, Any], Step]]] = {
    TurnStarted: (Phase.IDLE, loop.turn_started),
    StreamEnded: (Phase.STREAMING, loop.stream_ended),
    ToolSettled: (Phase.DISPATCHING, loop.tool_settled),
    StashTaken: (Phase.TAKING_STASH, loop.stash_taken),
}
"""Each event type -> the one phase that waits for it, and its handler."""
_UNHANDLED = (None, None)


def step(state: IterationState, event: Event) -> Step:
    """The next state and the effects to carry out, for `event` arriving in `state`."""
    phase, handler = HANDLERS.get(type(event), _UNHANDLED)
    if handler is None or phase is not state.phase:
        raise InvalidEvent(state.phase, event)
    return handler(state, event)


def initial_state(config: LoopConfig, turn: TurnSettings) -> IterationState:
    """The state before `TurnStarted`: iteration 0, the turn's base context."""
    return IterationState(config=config, turn=turn, context=ContextState(items=turn.context))
