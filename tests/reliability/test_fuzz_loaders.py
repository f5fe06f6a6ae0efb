"""Fuzzing the loaders of outside input: scenarios, trace lines and the configuration.

Each property feeds hostile input (any text, any JSON, a valid document with
one value swapped for anything) and states what every answer must be: the
loader's own clear error naming where the input came from, never an
unhandled exception, and for the configuration never an error at all.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolloop.engine.config_parsing import VARIABLES, parse_config
from toolloop.engine.trace import TraceError, load_lines
from toolloop.tools.scenario import parse_scenario
from toolloop.tools.scenario_json import ScenarioError

LIBRARY = sorted(
    path
    for path in (Path(__file__).parent.parent / "scenarios").glob("*.json")
    if not path.name.endswith(".expected.json")
)
FILE = "fuzzed.json"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value`, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


def _parses_or_names_the_file(text: str) -> None:
    try:
        parse_scenario(text, file=FILE)
    except ScenarioError as error:
        assert str(error).startswith(FILE)


@settings(max_examples=300)
@given(text=st.text(max_size=200))
def test_any_text_is_a_scenario_or_a_scenario_error_naming_the_file(text: str) -> None:
    """Arbitrary text never raises anything but `ScenarioError`, which names the file."""
    _parses_or_names_the_file(text)


@settings(max_examples=300)
@given(data=st.data(), value=json_values)
def test_a_library_scenario_with_any_value_swapped_loads_or_names_the_file(
    data: st.DataObject, value: Any
) -> None:
    """Any one value of a real scenario replaced by any JSON: it loads or is refused clearly."""
    path = data.draw(st.sampled_from(LIBRARY))
    document = json.loads(path.read_text())
    where = data.draw(st.sampled_from(_paths(document)))
    _parses_or_names_the_file(json.dumps(_replaced(document, where, value)))


@settings(max_examples=300)
@given(lines=st.lists(st.text(max_size=80) | json_values.map(json.dumps), max_size=4))
def test_any_trace_lines_load_or_raise_a_trace_error(lines: list[str]) -> None:
    """Arbitrary lines (text or JSON) never raise anything but `TraceError`."""
    try:
        load_lines(lines)
    except TraceError as error:
        assert "line" in str(error)


env_values = (
    st.text(max_size=30)
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.integers().map(str)
    | st.booleans()
    | st.floats()
    | st.none()
    | json_values
)


@settings(max_examples=300)
@given(
    env=st.dictionaries(
        st.sampled_from(sorted(VARIABLES)) | st.text(max_size=10), env_values, max_size=8
    )
)
def test_any_environment_gives_a_configuration_within_every_range(env: dict[str, Any]) -> None:
    """The configuration parser never raises, and every value it returns is within its range."""
    loaded = parse_config(env)
    for name, variable in VARIABLES.items():
        assert variable.minimum <= getattr(loaded.config, variable.field) <= variable.maximum, name
    warned = {warning.variable for warning in loaded.warnings}
    assert warned <= set(VARIABLES)
