"""Properties of the interpreter over generated scenarios, run by `toolloop simulate`.

Hypothesis writes scenario documents in the SCENARIOS.md format (streams that
call, stall, get killed, raise or stop; tools that succeed, fail, hang, raise,
restart or pick stickers; small limits; any turn flags). Each one is read by
the strict scenario reader and run through the real interpreter on the
virtual clock.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.effects.harness import registrations
from toolloop.engine.commands import StreamOnce
from toolloop.engine.events import StreamEnded
from toolloop.engine.step import initial_state, step
from toolloop.engine.trace import Trace, replay
from toolloop.specs.invariants import check, registrations_cleaned_up, result_of
from toolloop.states import JsonObject, StreamStatus
from toolloop.tools.report import final_state
from toolloop.tools.scenario import parse_scenario
from toolloop.tools.simulate import simulate

TOOLS = ("web_search", "update_short_term_memory", "select_sticker_for_response")
CALLABLE = (*TOOLS, "ghost_tool", " web_search ")
"""What streams call: the registered tools, an unknown one, one padded with spaces."""
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}

results = st.one_of(
    st.just({"success": True, "data": {"hits": 3}}),
    st.just({"success": True}),
    st.just({"error": "upstream 503"}),
    st.just({"success": True, "end_turn": True, "response_delivered": True}),
    st.just({"hang": True}),
    st.just({"hang": True, "kill": True}),
    st.just({"raise": "boom"}),
    st.just({"success": True, "data": {"type": "context_restart_youtube"}}),
    st.just({"success": True, "data": {"type": "context_restart_gif", "pending_context_key": "k"}}),
    st.just({"data": {"status": "sticker_selected_successfully", "sticker_id": "s1"}}),
)


@st.composite
def tools(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(TOOLS), unique=True, max_size=3))
    return [
        {
            "name": name,
            "parameters": SEARCH_SCHEMA if name == "web_search" else {"type": "object"},
            "requires_follow_up": draw(st.booleans()),
            "available_for_provider": draw(st.booleans() | st.just(True)),
            "available_for_turn": draw(st.booleans() | st.just(True)),
            "results": draw(st.lists(results, min_size=1, max_size=3)),
        }
        for name in names
    ]


calls = st.fixed_dictionaries(
    {"name": st.sampled_from(CALLABLE)},
    optional={
        "args": st.sampled_from([{"query": "cats"}, {}, {"query": 3}]),
        "arguments_truncated": st.booleans(),
    },
)
texts = st.sampled_from(["", "Let me look.", "  ", "Three hits.", "Retrying.", "Unseen."])
"""Distinct texts, so a text that never reached the channel cannot pass for one that did."""
parts = st.lists(
    st.sampled_from(
        [{"type": "text", "text": "Said before."}, {"type": "reasoning", "summary": "hm"}]
    ),
    max_size=2,
)
#: The 2026-12-03 keys: a follow-up during the call, a channel refusing it, native parts.
amended = {
    "follow_up": st.booleans(),
    "channel_fails": st.just("403 Missing Permissions"),
    "model_parts": parts,
}
calling_streams = st.fixed_dictionaries(
    {"call": calls, "text": texts},
    optional={
        "stop_before_tool": st.booleans(),
        "follow_up_before_tool": st.booleans(),
        **amended,
    },
)
ending_streams = st.one_of(
    st.fixed_dictionaries(
        {"status": st.sampled_from(["completed", "empty_response", "follow_up_interrupt"])},
        optional={"text": texts, "details": st.just("scene: rain"), **amended},
    ),
    st.fixed_dictionaries({"status": st.sampled_from(["error", "timeout"]), "error": texts}),
    st.fixed_dictionaries({"status": st.just("stopped_by_user"), "text": texts}),
    st.fixed_dictionaries({"stall": st.just(True), "text": texts}, optional=amended),
    st.just({"stall": True, "kill": True}),
    st.just({"kill": True, "text": "cut sh"}),
    st.just({"raise": "connection refused"}),
    st.just({"status": "completed", "text": "ok", "thought_log": {"text": "hm"}}),
)
streams = st.lists(
    st.one_of(calling_streams, calling_streams, ending_streams), min_size=1, max_size=8
)
turns = st.fixed_dictionaries(
    {},
    optional={
        "provider": st.fixed_dictionaries(
            {"api_family": st.sampled_from(["custom", "openai", "novelai", "google"])}
        ),
        "surface_user_errors": st.booleans(),
        "suppress_user_errors": st.booleans(),
        "user_impersonation": st.booleans(),
        "direct_message": st.booleans(),
        "locale": st.sampled_from(["en", "ja", "xx"]),
        "deliberate_mode": st.fixed_dictionaries(
            {
                "active": st.booleans(),
                "allowed": st.lists(st.sampled_from(TOOLS), unique=True, max_size=2),
            }
        ),
        "stop_context_queued": st.booleans(),
        "guild_stickers": st.just([{"id": "s1", "name": "gong", "sendable": True}]),
    },
)
envs = st.fixed_dictionaries(
    {},
    optional={
        "BOT_MAX_FUNCTION_CALL_ITERATIONS": st.integers(1, 6),
        "BOT_MAX_CONSECUTIVE_TOOL_ERRORS": st.integers(1, 3),
        "NAI_TOOL_FAILURE_RETRY_THRESHOLD": st.integers(1, 3),
        "STREAM_ABANDONED_SETTLE_TIMEOUT_MS": st.sampled_from([0, 5000]),
    },
)
scenarios = st.fixed_dictionaries(
    {"streams": streams}, optional={"tools": tools(), "turn": turns, "env": envs}
)


@settings(max_examples=150)
@given(document=scenarios)
def test_any_scenario_terminates_replays_keeps_the_invariants_and_cleans_up(
    document: dict[str, Any],
) -> None:
    """Simulate ends; `step` alone replays its trace; invariants hold; no registration is left."""
    scenario = parse_scenario(json.dumps(document), file="<generated>")
    output, trace, control = simulate(scenario)
    assert replay(trace) == []
    assert check(trace) == []
    assert registrations_cleaned_up(registrations(control)) == []
    assert control.kill_handles == []
    if output["raised"] is None:
        finished = result_of(trace)
        assert finished is not None and output["result"]["status"] == finished.status.value


def parts_since_the_last_entry(trace: Trace) -> list[list[JsonObject]]:
    """For each provider call: the parts of the function_call streams since the last entry.

    Derived from the trace's events alone: a function_call stream adds its
    parts, a step that grows the history empties them.
    """
    expected: list[list[JsonObject]] = []
    pending: list[JsonObject] = []
    state = initial_state(trace.config, trace.turn)
    for record in trace.steps:
        event = record.event
        if isinstance(event, StreamEnded) and event.result.status is StreamStatus.FUNCTION_CALL:
            pending += event.result.model_parts
        after = step(state, event).state
        if len(after.function_history) > len(state.function_history):
            pending = []
        state = after
        expected += [list(pending) for e in record.effects if isinstance(e, StreamOnce)]
    return expected


NOVELAI_RETRIES = {
    "turn": {"provider": {"api_family": "novelai"}},
    "streams": [
        {"call": {"name": "ghost_tool"}, "text": "Let me look."},
        {"call": {"name": "ghost_tool"}, "text": "Retrying."},
        {"status": "completed", "text": "Unseen."},
    ],
}
"""A NovelAI turn whose retries, suppressed, say other things than what the user saw."""


@settings(max_examples=150)
@given(document=scenarios)
@example(document=NOVELAI_RETRIES)
@example(document={"streams": [{"text": "Let me look.", "channel_fails": "403"}]})
@example(document={"streams": [{"text": "Let me th", "follow_up": True}]})
def test_the_turns_text_is_always_a_text_that_reached_the_channel(
    document: dict[str, Any],
) -> None:
    """The result's text is empty or one stream's delivered text; never a suppressed,
    refused or interrupted one (SPEC 3, amended)."""
    output, trace, _ = simulate(parse_scenario(json.dumps(document), file="<generated>"))
    text = final_state(trace).final_text
    assert text == "" or text in output["delivered"], (text, output["delivered"])
    if output["result"] is not None and text.strip():
        assert output["result"]["persona_responses"][0]["text"].startswith(text.strip())


RESTARTS_THEN_HISTORY = {
    "tools": [
        {"name": "web_search", "results": [{"data": {"type": "context_restart_gif"}}, {}]},
    ],
    "streams": [
        {"call": {"name": "web_search"}, "text": "Let me look."},
        {"call": {"name": "web_search"}, "text": "Three hits.", "model_parts": []},
        {"call": {"name": "web_search"}, "text": "Retrying."},
        {"status": "completed", "text": "Unseen."},
    ],
}
"""A restart, then a history entry: parts pile up, then the entry takes them."""


@settings(max_examples=150)
@given(document=scenarios)
@example(document=RESTARTS_THEN_HISTORY)
def test_each_call_is_sent_exactly_the_parts_since_the_last_history_entry(
    document: dict[str, Any],
) -> None:
    """`model_parts_sent` of each call = the parts of the function_call streams since the
    last history entry (SPEC 4 and 6 step 15, amended)."""
    output, trace, _ = simulate(parse_scenario(json.dumps(document), file="<generated>"))
    assert output["model_parts_sent"] == parts_since_the_last_entry(trace)
