"""The interpreter's two durable hooks: `recorder` (write-ahead of each event) and `start_from`."""

from __future__ import annotations

import pytest

from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import StartFrom, run_tool_loop
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, StreamEnded, TurnStarted
from toolloop.engine.step import Step, initial_state, step
from toolloop.states import (
    FunctionCall,
    IterationState,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    async def search(args: JsonObject, call: ToolCall) -> JsonObject:
        return {"hits": 1}

    tools.register(search, parameters={"type": "object"})
    return tools


async def test_the_recorder_gets_every_event_in_order_before_step_sees_it() -> None:
    """Each event is awaited by the recorder first: the observer has not seen it yet."""
    recorded: list[tuple[Event, int]] = []
    observed: list[Event] = []

    async def recorder(event: Event) -> None:
        recorded.append((event, len(observed)))

    def observer(before: IterationState, event: Event, out: Step) -> None:
        observed.append(event)

    result = await run_tool_loop(
        turn=TurnSettings(),
        config=LoopConfig(),
        provider=ScriptProvider(calling("search"), completed("Found it.")),
        registry=registry(),
        channel=RecordingChannel(),
        control=MemoryTurnControl(),
        observer=observer,
        recorder=recorder,
    )
    assert result.status is TurnStatus.COMPLETED
    assert [event for event, _ in recorded] == observed
    assert [seen for _, seen in recorded] == list(range(len(observed)))
    assert len(observed) == 4  # TurnStarted, StreamEnded, ToolSettled, StreamEnded


async def test_start_from_performs_the_prelude_then_steps_the_event_from_the_state() -> None:
    """Started from the state after TurnStarted with its StreamEnded: no TurnStarted is stepped,
    the prelude's effect reaches the turn control before the event's own, and the turn goes
    on to its end."""
    config, turn = LoopConfig(), TurnSettings()
    state = step(initial_state(config, turn), TurnStarted()).state
    call = FunctionCall(name="search", args={})
    ended = StreamEnded(result=StreamResult(status=StreamStatus.FUNCTION_CALL, data=call))
    observed: list[Event] = []
    control = MemoryTurnControl()
    result = await run_tool_loop(
        turn=turn,
        config=config,
        provider=ScriptProvider(completed("Found it.")),
        registry=registry(),
        channel=RecordingChannel(),
        control=control,
        observer=lambda before, event, out: observed.append(event),
        start_from=StartFrom(
            state=state, event=ended, prelude=(fx.CountToolUsage(name="prelude"),)
        ),
    )
    assert result.status is TurnStatus.COMPLETED
    assert observed[0] is ended
    assert not any(isinstance(event, TurnStarted) for event in observed)
    assert control.tool_usage == ["prelude", "search"]
