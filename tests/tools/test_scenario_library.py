"""The scenario library: each file in tests/scenarios pins one rule of SPEC 4 to 9.

Each `NAME.json` runs through `simulate` (real engine, interpreter and
registry, scripted model and tools, virtual clock); its `NAME.expected.json`
lists the parts of the output that the rule fixes. Every run must also replay
to the same effects through `step` alone and keep the loop's invariants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scenario_files import SCENARIOS
from toolloop.engine.trace import dump_lines, load_lines, replay
from toolloop.specs import invariants
from toolloop.tools.scenario import load_scenario
from toolloop.tools.simulate import simulate


def matches(expected: Any, actual: Any, where: str = "$") -> list[str]:
    """Where `actual` differs from `expected`: dicts by their listed keys, lists item by item."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [
            problem
            for key, value in expected.items()
            for problem in (
                [f"{where}.{key} is missing"]
                if key not in actual
                else matches(value, actual[key], f"{where}.{key}")
            )
        ]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where} has {len(actual)} items, expected {len(expected)}"]
        return [
            p
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for p in matches(e, a, f"{where}[{i}]")
        ]
    return [] if expected == actual else [f"{where} is {actual!r}, expected {expected!r}"]


def test_every_scenario_has_its_expectation() -> None:
    """No scenario runs unchecked."""
    missing = [p.name for p in SCENARIOS if not p.with_suffix(".expected.json").exists()]
    assert SCENARIOS and missing == []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_gives_its_expected_output(path: Path) -> None:
    """The simulate document matches the expectation; the trace replays and keeps the invariants."""
    document, trace, control = simulate(load_scenario(path))
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    keys = expected.pop("notice_keys", None)
    problems = matches(expected, document)
    if keys is not None:
        actual_keys = [notice["key"] for notice in document["notices"]]
        problems += [] if actual_keys == keys else [f"notice keys {actual_keys}, expected {keys}"]
    assert problems == []
    assert replay(load_lines(list(dump_lines(trace)))) == []
    assert invariants.check(trace) == []
    assert control.kill_handles == []


def test_matching_reports_what_differs() -> None:
    """The comparison can fail: a wrong value, a missing key, a wrong length are named."""
    actual = {"a": 1, "b": [{"c": 2}], "d": "x"}
    assert matches({"a": 1, "b": [{}]}, actual) == []
    assert matches({"a": 2}, actual) == ["$.a is 1, expected 2"]
    assert matches({"z": 1}, actual) == ["$.z is missing"]
    assert matches({"b": []}, actual) == ["$.b has 1 items, expected 0"]
