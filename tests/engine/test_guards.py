"""The guards of the table, asked directly about an event's context."""

from __future__ import annotations

import attrs

from tests.engine.builders import NOVELAI, call, fail, ok
from toolloop.engine.events import Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.guards import FACTS, Context, context
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
    assert not context.call_refused
    assert context.call_malformed


def test_the_ceiling_guard_compares_values_beyond_small_integers() -> None:
    """At iteration 299 of a 300 cap, a settled tool would start the last allowed iteration."""
    config = LoopConfig(max_function_call_iterations=int("300"))
    state = dispatching(config, TurnSettings(), iteration=int("299"))
    assert ctx(state, ToolSettled(result=ok())).ceiling_reached
    assert not ctx(attrs.evolve(state, iteration=298), ToolSettled(result=ok())).ceiling_reached


def test_the_error_cap_guard_compares_values_beyond_small_integers() -> None:
    """With 299 failures behind it, the next failure reaches a cap of 300."""
    config = LoopConfig(max_consecutive_tool_errors=int("300"))
    state = dispatching(config, TurnSettings(), consecutive_tool_errors=int("299"))
    assert ctx(state, FAILED).error_cap_reached
    assert not ctx(attrs.evolve(state, consecutive_tool_errors=298), FAILED).error_cap_reached


def test_the_novelai_threshold_guard_compares_values_beyond_small_integers() -> None:
    """With 299 NovelAI failures behind it, the next one reaches a threshold of 300."""
    config = LoopConfig(nai_tool_failure_retry_threshold=int("300"))
    state = dispatching(config, TurnSettings(provider=NOVELAI), nai_consecutive_tool_failures=299)
    assert ctx(state, FAILED).novelai_retries_exhausted
    fewer = attrs.evolve(state, nai_consecutive_tool_failures=298)
    assert not ctx(fewer, FAILED).novelai_retries_exhausted


def test_the_facts_are_the_bool_attributes_of_the_context() -> None:
    """Every fact a row may name is a `bool` of `Context`, False until an event sets it."""
    assert "call_refused" in FACTS and "under_impersonation" in FACTS
    assert "errors" not in FACTS and "pre_tool_text" not in FACTS
    assert all(getattr(Context, fact) is False for fact in FACTS)


def test_a_failure_is_counted_once_by_the_context() -> None:
    """The context holds the counts the actions write: one more error, and one more NovelAI
    failure after visible text, beside the NovelAI count the entries alone leave."""
    turn = TurnSettings(provider=NOVELAI)
    state = dispatching(
        LoopConfig(), turn, consecutive_tool_errors=2, nai_consecutive_tool_failures=1
    )
    facts = ctx(state, FAILED)
    assert (facts.errors, facts.novelai_failures_kept, facts.novelai_failures) == (3, 1, 2)
    after = step(state, FAILED).state
    assert (after.consecutive_tool_errors, after.nai_consecutive_tool_failures) == (3, 2)
