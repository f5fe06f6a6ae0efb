"""The engine's predicates that the declared machine names as guards, asked directly."""

from __future__ import annotations

import attrs

from tests.engine.builders import call, ok
from toolloop.engine.events import StreamEnded, ToolSettled
from toolloop.engine.guards import arguments_truncated, call_refused, ceiling_reached
from toolloop.engine.step import initial_state
from toolloop.states import LoopConfig, TurnSettings


def test_a_blank_named_truncated_call_is_malformed_not_truncated() -> None:
    """Truncation is judged only for a well-formed call: a blank name makes it malformed."""
    state = initial_state(LoopConfig(), TurnSettings())
    event = StreamEnded(result=call("  ", {"q": "x"}, truncated=True))
    assert not arguments_truncated(state, event)
    assert not call_refused(state, event)


def test_the_ceiling_guard_compares_values_beyond_small_integers() -> None:
    """At iteration 299 of a 300 cap, a settled tool would start the last allowed iteration."""
    config = LoopConfig(max_function_call_iterations=int("300"))
    state = attrs.evolve(initial_state(config, TurnSettings()), iteration=int("299"))
    assert ceiling_reached(state, ToolSettled(result=ok()))
    assert not ceiling_reached(attrs.evolve(state, iteration=298), ToolSettled(result=ok()))
