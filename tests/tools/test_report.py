"""The simulate document's cost: its size grows linearly with the work (issue 12)."""

from __future__ import annotations

import json

from toolloop.tools.scenario import parse_scenario
from toolloop.tools.simulate import simulate

SEARCH = {
    "name": "web_search",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    "results": [{"success": True, "data": {"hits": 3}}],
}


def output_size(iterations: int) -> int:
    """Characters `toolloop simulate` prints for a chain of `iterations` tool calls."""
    document = {
        "env": {"BOT_MAX_FUNCTION_CALL_ITERATIONS": iterations},
        "tools": [SEARCH],
        "streams": [{"text": "Let me look.", "call": {"name": "web_search", "args": {}}}],
    }
    output, _, _ = simulate(parse_scenario(json.dumps(document)))
    assert output["provider_calls"] == iterations
    return len(json.dumps(output, indent=2))


def test_the_output_of_a_chain_twice_as_long_is_about_twice_as_big() -> None:
    """Doubling the iterations doubles the output (a quadratic report would quadruple it)."""
    ratio = output_size(400) / output_size(200)
    assert 1.9 < ratio < 2.1, ratio


def test_a_chain_of_restarts_stays_linear() -> None:
    """Each restart grows the live context; each dispatch counts it rather than repeating it."""

    def size(iterations: int) -> int:
        restart = {"type": "context_restart_youtube", "enhanced_context_item": {"text": "clip"}}
        document = {
            "env": {"BOT_MAX_FUNCTION_CALL_ITERATIONS": iterations},
            "tools": [{**SEARCH, "results": [{"data": restart}]}],
            "streams": [{"call": {"name": "web_search", "args": {}}}],
        }
        output, _, _ = simulate(parse_scenario(json.dumps(document)))
        return len(json.dumps(output))

    assert 1.9 < size(400) / size(200) < 2.1
