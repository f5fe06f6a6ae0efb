"""The guards of the table, asked directly about an event's context."""

from __future__ import annotations

import attrs

from tests.engine.builders import NOVELAI, call, fail, ok
from toolloop.engine.events import Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.guards import (
    Context,
    call_malformed,
    call_refused,
    ceiling_reached,
    context,
    error_cap_reached,
    novelai_retries_exhausted,
)
from toolloop.engine.step import initial_state, step
from toolloop.states import IterationState, LoopConfig, Phase, TurnSettings

FAILED = ToolSettled(result=fail())


def dispatching(config: LoopConfig, turn: TurnSettings, **fields: object) -> IterationState:
    """The state the engine reaches waiting for a tool called after the text "Sure."."""
    out = step(initial_state(config, turn), TurnStarted())
    out = step(out.state, StreamEnded(result=call(text="Sure.")))
    assert out.state.phase is Phase.DISPATCHING
    return attrs.evolve(out.state, **fields)


def ctx(state: IterationState, event: Event) -> Context:
    """The context `step` builds for `event` arriving in `state`."""
    return context(state, event)


def test_a_blank_named_truncated_call_is_malformed_not_truncated() -> None:
    """Truncation is judged only for a well-formed call: a blank name makes it malformed."""
    state = initial_state(LoopConfig(), TurnSettings())
    context = ctx(state, StreamEnded(result=call("  ", {"q": "x"}, truncated=True)))
    assert context.refusal is None
    assert not call_refused(context)
    assert call_malformed(context)


def test_the_ceiling_guard_compares_values_beyond_small_integers() -> None:
    """At iteration 299 of a 300 cap, a settled tool would start the last allowed iteration."""
    config = LoopConfig(max_function_call_iterations=int("300"))
    state = dispatching(config, TurnSettings(), iteration=int("299"))
    assert ceiling_reached(ctx(state, ToolSettled(result=ok())))
    assert not ceiling_reached(ctx(attrs.evolve(state, iteration=298), ToolSettled(result=ok())))


def test_the_error_cap_guard_compares_values_beyond_small_integers() -> None:
    """With 299 failures behind it, the next failure reaches a cap of 300."""
    config = LoopConfig(max_consecutive_tool_errors=int("300"))
    state = dispatching(config, TurnSettings(), consecutive_tool_errors=int("299"))
    assert error_cap_reached(ctx(state, FAILED))
    assert not error_cap_reached(ctx(attrs.evolve(state, consecutive_tool_errors=298), FAILED))


def test_the_novelai_threshold_guard_compares_values_beyond_small_integers() -> None:
    """With 299 NovelAI failures behind it, the next one reaches a threshold of 300."""
    config = LoopConfig(nai_tool_failure_retry_threshold=int("300"))
    state = dispatching(config, TurnSettings(provider=NOVELAI), nai_consecutive_tool_failures=299)
    assert novelai_retries_exhausted(ctx(state, FAILED))
    assert not novelai_retries_exhausted(
        ctx(attrs.evolve(state, nai_consecutive_tool_failures=298), FAILED)
    )
