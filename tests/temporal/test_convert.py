"""The payload converter alone: every attrs value the workflow and its activities pass each
other comes back equal; a payload that is not toolloop's is a clear error.

The values are real: those of every scenario of tests/scenarios run on the virtual
clock (its states, events, effects and results), put into each message the
workflow sends, as the workflow builds them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from temporalio.api.common.v1 import Payload

from tests.scenario_files import SCENARIOS
from toolloop.effects.temporal import messages
from toolloop.effects.temporal.activities import HOST_CHORES
from toolloop.engine import commands as fx
from toolloop.engine import tool_call
from toolloop.engine.events import ApprovalDecided, StashTaken, StreamEnded, ToolSettled
from toolloop.engine.step import initial_state, step
from toolloop.states import (
    ApprovalDecision,
    ContextItem,
    GenerationTurnResult,
    IterationState,
    ToolResult,
    TurnSettings,
)
from toolloop.temporal import Decision, ForeignPayload, TurnInput, Waiting, data_converter
from toolloop.tools.scenario import load_scenario
from toolloop.tools.simulate import simulate

CONVERTER = data_converter.payload_converter


def round_trip(value: Any, hint: Any) -> Any:
    [payload] = CONVERTER.to_payloads([value])
    [back] = CONVERTER.from_payloads([payload], [hint])
    return back


def carried() -> Iterator[tuple[Any, Any]]:
    """(value, type hint) for every message the workflow sends, from every scenario's run."""
    for path in SCENARIOS:
        _, trace, _ = simulate(load_scenario(path))
        turn, config = trace.turn, trace.config
        lean = messages.lean(turn)
        state = initial_state(config, turn)
        for record in trace.steps:
            event = record.event
            yield messages.TurnInput(turn=turn, config=config, carry=carry(state, event)), TurnInput
            state = step(state, event).state
            yield state, IterationState
            yield from _of_event(event)
            chores = tuple(e for e in record.effects if isinstance(e, HOST_CHORES))
            if chores:
                yield messages.Chores(turn=lean, effects=chores), messages.Chores
            for effect in record.effects:
                yield from _of_effect(effect, state, chores)


def carry(state: IterationState, event: Any) -> messages.Carry:
    facts = (messages.CallFacts(timeout_ms=1500, follow_up=True),)
    return messages.Carry(state=state, event=event, chain_active=True, facts=facts, runs=2)


def _of_event(event: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(event, StreamEnded):
        calls = tuple(
            messages.CallFacts(timeout_ms=n * 1000, follow_up=bool(n % 2))
            for n, _ in enumerate(event.result.batch)
        )
        output = messages.StreamOutput(
            result=event.result, calls=calls, exclusive=event.exclusive, approval=event.approval
        )
        yield output, messages.StreamOutput
    elif isinstance(event, ToolSettled):
        yield event.result, ToolResult
    elif isinstance(event, ApprovalDecided) and event.decision is not None:
        yield event.decision, ApprovalDecision
        yield Decision(index=event.index, decision=event.decision), Decision


def _of_effect(
    effect: fx.Effect, state: IterationState, chores: tuple[fx.Effect, ...]
) -> Iterator[tuple[Any, Any]]:
    turn = messages.lean(state.turn)
    if isinstance(effect, fx.StreamOnce):
        context = tool_call.tool_context(
            state.turn, state.iteration, state.short_term_memory_updated, state.context.items
        )
        given = messages.StreamInput(
            turn=state.turn,
            once=effect,
            config=state.config,
            context=context,
            shown="Hello ",
            chores=chores,
        )
        yield given, messages.StreamInput
    elif isinstance(effect, fx.DispatchTool | fx.StartTool):
        given_tool = messages.ToolInput(
            turn=turn,
            call=effect.call,
            context=effect.context,
            pre_tool_text=effect.pre_tool_text,
            text_suppressed=effect.text_suppressed,
            result_limit=100,
            again=True,
            chores=chores,
        )
        yield given_tool, messages.ToolInput
    elif isinstance(effect, fx.AskApproval):
        yield messages.AskInput(turn=turn, request=effect.request), messages.AskInput
        waiting = [Waiting(index=effect.index, request=effect.request)]
        yield waiting, list[Waiting]
    elif isinstance(effect, fx.Finish):
        yield effect.result, GenerationTurnResult


VALUES = list(carried())


def test_every_message_type_of_the_workflow_is_carried_here() -> None:
    """The sample holds each attrs class of `messages` (a new message cannot go untested),
    the stash's two aside (`test_the_stash_messages_come_back_equal`)."""
    defined = {
        value
        for value in vars(messages).values()
        if inspect.isclass(value) and attrs.has(value) and value.__module__ == messages.__name__
    }
    sampled = {kind for value, _ in VALUES for kind in kinds(value)}
    assert defined - sampled == {messages.StashInput}


def kinds(value: Any) -> Iterator[type]:
    """The attrs classes of `value` and of every value inside it."""
    if attrs.has(type(value)):
        yield type(value)
        for field in attrs.fields(type(value)):
            yield from kinds(getattr(value, field.name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from kinds(item)


@pytest.mark.parametrize(
    "kind", sorted({type(value).__name__ for value, _ in VALUES if not isinstance(value, list)})
)
def test_every_value_of_a_kind_comes_back_equal(kind: str) -> None:
    """Each value of the kind, written and read back with the type the receiver declares,
    equals the value sent (enums, tagged unions and nested attrs included)."""
    values = [(v, hint) for v, hint in VALUES if type(v).__name__ == kind]
    for value, hint in values:
        assert round_trip(value, hint) == value


def test_a_query_answer_list_comes_back_equal() -> None:
    """The `approvals` query answers a list of `Waiting`: it comes back as that list."""
    lists = [(v, hint) for v, hint in VALUES if isinstance(v, list)]
    assert lists
    for value, hint in lists:
        assert round_trip(value, hint) == value


def test_the_stash_messages_come_back_equal() -> None:
    """The stash activity's input and answer (no scenario has a stash) come back equal."""
    given = messages.StashInput(
        turn=TurnSettings(channel_id="c7"),
        key="ctx-1",
        chores=(fx.ClearStopRequest(),),
    )
    taken = StashTaken(item=ContextItem(kind="enrichment", content="TRANSCRIPT"))
    assert round_trip(given, messages.StashInput) == given
    assert round_trip(taken, StashTaken) == taken
    assert round_trip(StashTaken(item=None), StashTaken) == StashTaken(item=None)


def test_plain_values_pass_through_temporals_own_converters() -> None:
    """None, bytes and plain JSON are not toolloop's: Temporal's converters carry them."""
    assert round_trip(None, type(None)) is None
    assert round_trip(b"\x00\x01", bytes) == b"\x00\x01"
    assert round_trip({"a": [1, "b"]}, dict) == {"a": [1, "b"]}
    [payload] = CONVERTER.to_payloads([b"raw"])
    assert payload.metadata["encoding"] == b"binary/plain"


def test_a_payload_of_another_shape_is_a_clear_error() -> None:
    """JSON that is not the declared type raises `ForeignPayload` naming the type and where."""
    foreign = Payload(metadata={"encoding": b"json/plain"}, data=b'{"turn": 3}')
    with pytest.raises(ForeignPayload, match=r"not a TurnInput: .*\$\.turn"):
        CONVERTER.from_payloads([foreign], [TurnInput])


def test_a_payload_that_is_not_json_is_a_clear_error() -> None:
    """Bytes labelled `json/plain` that are not JSON raise `ForeignPayload` naming the type."""
    garbage = Payload(metadata={"encoding": b"json/plain"}, data=b"\xff not json")
    with pytest.raises(ForeignPayload, match="not a TurnInput"):
        CONVERTER.from_payloads([garbage], [TurnInput])


def test_a_payload_of_a_foreign_encoding_names_it() -> None:
    """An encoding no converter of the chain reads (protobuf here) is refused by name."""
    foreign = Payload(metadata={"encoding": b"json/protobuf"}, data=b"{}")
    with pytest.raises(KeyError, match="json/protobuf"):
        CONVERTER.from_payloads([foreign], [TurnInput])
