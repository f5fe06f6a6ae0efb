"""A scenario tool's `approval` decisions (SCENARIOS.md, SPEC 6c): read, or refused where wrong."""

from __future__ import annotations

import json

import pytest

from toolloop.tools.scenario import ScriptedDecision, parse_scenario
from toolloop.tools.scenario_json import ScenarioError


def tool_with(approval: object) -> str:
    tool = {"name": "t", "approval": approval}
    return json.dumps({"tools": [tool], "streams": [{"text": "x"}]})


def test_every_decision_form_is_read_in_order() -> None:
    """The SCENARIOS.md forms, and toolloop's approve_for and delay_ms, become decisions."""
    forms = [
        "approve",
        "timeout",
        {"deny": "no"},
        {"kill": True},
        {"approve_for": {"id": "m2"}},
        {"approve": True, "delay_ms": 5},
    ]
    (tool,) = parse_scenario(tool_with(forms)).tools
    assert tool.approval == (
        ScriptedDecision(kind="approve"),
        ScriptedDecision(kind="timeout"),
        ScriptedDecision(kind="deny", reason="no"),
        ScriptedDecision(kind="kill"),
        ScriptedDecision(kind="approve_for", args={"id": "m2"}),
        ScriptedDecision(kind="approve", delay_ms=5),
    )


def test_null_means_no_call_waits() -> None:
    """`"approval": null` is the default: the tool needs no approval."""
    assert parse_scenario(tool_with(None)).tools[0].approval is None


@pytest.mark.parametrize(
    ("approval", "where", "got"),
    [
        (["maybe"], "tools[0].approval[0]", 'got "maybe"'),
        ([{"deny": "x", "kill": True}], "tools[0].approval[0]", "got the keys ['deny', 'kill']"),
        ([{"kill": False}], "tools[0].approval[0].kill", "expected true, got false"),
        ([], "tools[0].approval", "expected a non-empty array of decisions, got an empty array"),
    ],
)
def test_a_wrong_decision_names_where_it_is_and_what_it_was(
    approval: object, where: str, got: str
) -> None:
    """A decision that is none of the forms is refused at its path, saying what arrived."""
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(tool_with(approval), file="s.json")
    assert str(raised.value).startswith(f"s.json: {where}: expected ")
    assert got in str(raised.value)
