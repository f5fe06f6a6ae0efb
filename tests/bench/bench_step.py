"""`step` alone on a 100-iteration tool chain, beside a hand-written loop on the same data.

Both sides see the same stream results and tool results and build the same
history; the hand-written loop is what a bot author would write without the
state machine (mutable locals, no events, no effects). Reported: µs per
iteration for each and their ratio, from the best of alternating rounds.

In the same rounds: each of the two steps of an iteration alone (`StreamEnded`
while streaming, which dispatches the call; `ToolSettled` while dispatching, a
success that starts the next iteration); and what keeping the draft honest
costs (issue 13, item 4), the table run with each way of building the next
state: the `Draft` as shipped (a misspelt field refused at
commit, one `len` per event), the same draft unchecked (as before the check),
a draft checking every write in `__setattr__`, and no draft at all (each write
an `attrs.evolve` of the state, which refuses an unknown field itself).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

import attrs

from toolloop.engine.commands import DispatchTool, Finish, StreamOnce
from toolloop.engine.draft import FIELDS, Draft, UnknownField
from toolloop.engine.events import Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import Step, initial_state, step
from toolloop.states import (
    FunctionCall,
    IterationState,
    LoopConfig,
    StreamResult,
    StreamStatus,
    ToolHistoryEntry,
    ToolResult,
    TurnSettings,
)

ITERATIONS = 100
CALL = StreamResult(
    status=StreamStatus.FUNCTION_CALL,
    accumulated_text="Let me look.",
    data=FunctionCall(name="web_search", args={"query": "cats"}),
)

step_module = importlib.import_module("toolloop.engine.step")  # the attribute is `step`
RESULT = ToolResult(success=True, data={"hits": 3})
CONFIG = LoopConfig(max_function_call_iterations=ITERATIONS)
TURN = TurnSettings()


def through_step(step: Callable[[IterationState, Event], Step] = step) -> int:
    """Drive `step` until it finishes; every awaited effect is answered at once."""
    state = initial_state(CONFIG, TURN)
    out = step(state, TurnStarted())
    stream_ended = StreamEnded(result=CALL)
    settled = ToolSettled(result=RESULT)
    while True:
        last = out.effects[-1]
        if isinstance(last, StreamOnce):
            out = step(out.state, stream_ended)
        elif isinstance(last, DispatchTool):
            out = step(out.state, settled)
        else:
            assert isinstance(last, Finish)
            return len(out.state.function_history)


def one_kind(event: Event) -> Callable[[], int]:
    """`ITERATIONS` steps of one kind, each from the same state (the chain's first of it)."""
    state = step(initial_state(CONFIG, TURN), TurnStarted()).state
    if isinstance(event, ToolSettled):
        state = step(state, StreamEnded(result=CALL)).state

    def steps() -> int:
        for _ in range(ITERATIONS):
            step(state, event)
        return ITERATIONS

    return steps


def hand_written() -> int:
    """The same chain as an imperative loop a bot author would write."""
    history: list[ToolHistoryEntry] = []
    stream_results: list[StreamResult] = []
    final_text, errors = "", 0
    for _iteration in range(ITERATIONS):
        stream = CALL
        stream_results.append(stream)
        if stream.accumulated_text.strip():
            final_text = stream.accumulated_text
        call = stream.data
        assert isinstance(call, FunctionCall)
        name = call.name.strip()
        result = RESULT
        response: Any = result.data if result.success else {"status": "tool_execution_failed"}
        parts = ({"type": "text", "text": stream.accumulated_text},)
        history.append(
            ToolHistoryEntry(
                function_call=call,
                function_response={"name": name, "response": {"result": response}},
                pre_tool_call_text_parts=parts,
            )
        )
        errors = 0 if result.success else errors + 1
    assert final_text
    return len(history)


def best_of_interleaved(
    sides: tuple[Callable[[], int], ...], rounds: int = 15, repeat: int = 20
) -> list[float]:
    """Best µs of CPU time per iteration for each side, rounds alternating between sides.

    CPU time of this process, not wall time: on a shared machine a neighbour's
    load then stretches neither side, and alternating the rounds exposes both
    to the same cache and frequency conditions.
    """
    for fn in sides:
        assert fn() == ITERATIONS
    best = [float("inf")] * len(sides)
    for _ in range(rounds):
        for index, fn in enumerate(sides):
            start = time.process_time()
            for _ in range(repeat):
                fn()
            best[index] = min(best[index], (time.process_time() - start) / repeat / ITERATIONS)
    return [seconds * 1e6 for seconds in best]


class UncheckedDraft(Draft):
    """The draft before item 4: a misspelt write becomes a stray attribute of the state."""

    def commit(self) -> IterationState:
        fields, self.__dict__ = self.__dict__, {}
        state: IterationState = object.__new__(IterationState)
        object.__setattr__(state, "__dict__", fields)
        return state


_FIELD_SET = frozenset(FIELDS)


class WriteCheckedDraft(Draft):
    """A draft that refuses a misspelt field at the write itself."""

    def __init__(self, base: IterationState) -> None:
        object.__setattr__(self, "__dict__", base.__dict__.copy())

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELD_SET:
            raise UnknownField([name])
        self.__dict__[name] = value

    def commit(self) -> IterationState:
        fields = self.__dict__
        object.__setattr__(self, "__dict__", {})
        state: IterationState = object.__new__(IterationState)
        object.__setattr__(state, "__dict__", fields)
        return state


class Evolving:
    """No draft: each write is an `attrs.evolve` of the state (which refuses unknown fields)."""

    def __init__(self, base: IterationState) -> None:
        object.__setattr__(self, "_state", base)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, "_state", attrs.evolve(self._state, **{name: value}))

    def peek(self) -> IterationState:
        state: IterationState = self._state
        return state

    def commit(self) -> IterationState:
        return self.peek()


def step_with(draft: type[Any]) -> Callable[[], int]:
    """`through_step` with each next state built by `draft` (read by `step` on each event)."""

    def run() -> int:
        shipped = step_module.Draft
        step_module.Draft = draft
        try:
            return through_step()
        finally:
            step_module.Draft = shipped

    return run


def main() -> None:
    sides = (
        through_step,
        hand_written,
        one_kind(StreamEnded(result=CALL)),
        one_kind(ToolSettled(result=RESULT)),
        step_with(UncheckedDraft),
        step_with(WriteCheckedDraft),
        step_with(Evolving),
    )
    engine, baseline, ended, settled, unchecked, per_write, evolving = best_of_interleaved(sides)
    print(f"step, 100-iteration tool chain: {engine:.2f} µs/iteration (CPU time)")
    print(f"hand-written loop, same chain: {baseline:.2f} µs/iteration (CPU time)")
    print(f"ratio step / hand-written: {engine / baseline:.1f}x")
    print(f"step, StreamEnded while streaming (dispatches): {ended:.2f} µs/step")
    print(f"step, ToolSettled while dispatching (succeeded): {settled:.2f} µs/step")
    print(f"step, draft checked at commit (shipped): {engine:.2f} µs/iteration")
    print(f"step, draft unchecked (before item 4): {unchecked:.2f} µs/iteration")
    print(f"step, draft checking each write (__setattr__): {per_write:.2f} µs/iteration")
    print(f"step, no draft (attrs.evolve per write): {evolving:.2f} µs/iteration")


if __name__ == "__main__":
    main()
