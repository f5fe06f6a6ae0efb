"""`step` alone on a 100-iteration tool chain, beside a hand-written loop on the same data.

Both sides see the same stream results and tool results and build the same
history; the hand-written loop is what a bot author would write without the
state machine (mutable locals, no events, no effects). Reported: µs per
iteration for each and their ratio, from the best of alternating rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toolloop.engine.effects import DispatchTool, Finish, StreamOnce
from toolloop.engine.events import StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import initial_state, step
from toolloop.states import (
    FunctionCall,
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
RESULT = ToolResult(success=True, data={"hits": 3})
CONFIG = LoopConfig(max_function_call_iterations=ITERATIONS)
TURN = TurnSettings()


def through_step() -> int:
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


def main() -> None:
    engine, baseline = best_of_interleaved((through_step, hand_written))
    print(f"step, 100-iteration tool chain: {engine:.2f} µs/iteration (CPU time)")
    print(f"hand-written loop, same chain: {baseline:.2f} µs/iteration (CPU time)")
    print(f"ratio step / hand-written: {engine / baseline:.1f}x")


if __name__ == "__main__":
    main()
