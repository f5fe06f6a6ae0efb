"""The cattrs converter: every state, event and effect survives a JSON round trip."""

from __future__ import annotations

import json

from hypothesis import given

from tests.engine.drive import Run
from tests.engine.test_properties import attempts
from toolloop.engine.commands import Effect
from toolloop.engine.events import Event
from toolloop.states import FunctionCall, IterationState, StreamError, StreamResult, StreamStatus
from toolloop.states.convert import from_json, to_json


@given(run=attempts)
def test_states_events_and_effects_round_trip_through_json_unchanged(run: Run) -> None:
    """Round trip: structure(json(unstructure(x))) == x for every datum of a run."""
    for state in run.states:
        assert from_json(json.loads(json.dumps(to_json(state))), IterationState) == state
    for event in run.events:
        assert from_json(json.loads(json.dumps(to_json(event, Event))), Event) == event
    for effect in run.effects:
        assert from_json(json.loads(json.dumps(to_json(effect, Effect))), Effect) == effect


def test_unions_are_tagged_with_their_class() -> None:
    """A stream's data names its class under `_type`, so a trace reads back the same class."""
    call = to_json(StreamResult(status=StreamStatus.FUNCTION_CALL, data=FunctionCall(name="x")))
    error = to_json(
        StreamResult(status=StreamStatus.ERROR, data=StreamError(type="t", message="m"))
    )
    assert (call["data"]["_type"], error["data"]["_type"]) == ("FunctionCall", "StreamError")


def test_events_and_effects_are_tagged() -> None:
    """Events and effects carry their class name under `_type`."""
    from toolloop.engine.commands import ResetFollowUpCount
    from toolloop.engine.events import TurnStarted

    assert to_json(TurnStarted(), Event) == {"_type": "TurnStarted"}
    assert to_json(ResetFollowUpCount(), Effect) == {"_type": "ResetFollowUpCount"}
