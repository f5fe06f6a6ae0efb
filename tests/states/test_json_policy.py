"""The one JSON policy: size and depth bounds, no NaN, JSON types only, Unicode text, no values."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolloop.states import json_policy
from toolloop.states.json_policy import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    JsonInputError,
    check_json,
    loads,
)

SECRET = "sk-CANARY-json-policy"


def nested(depth: int) -> Any:
    value: Any = SECRET
    for _ in range(depth):
        value = [value]
    return value


def test_depth_at_the_bound_is_accepted_and_one_more_is_refused() -> None:
    """MAX_JSON_DEPTH levels load; one level more is refused by name."""
    assert loads(json.dumps(nested(MAX_JSON_DEPTH)), where="w") == nested(MAX_JSON_DEPTH)
    with pytest.raises(JsonInputError, match=f"^w: nests deeper than {MAX_JSON_DEPTH} levels$"):
        loads(json.dumps(nested(MAX_JSON_DEPTH + 1)), where="w")


def test_nesting_past_the_recursion_limit_is_the_same_error() -> None:
    """200,000 levels are refused with the depth message, never a RecursionError."""
    with pytest.raises(JsonInputError, match="nests deeper than"):
        loads("[" * 200_000 + "]" * 200_000, where="w")


def test_text_over_the_size_bound_is_refused_before_decoding() -> None:
    """Text longer than MAX_JSON_CHARS is refused with its length."""
    text = " " * (MAX_JSON_CHARS + 1)
    with pytest.raises(JsonInputError, match=f"is {MAX_JSON_CHARS + 1} characters long"):
        loads(text, where="w")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_refused(constant: str) -> None:
    """Python's NaN and Infinity extensions are not JSON."""
    with pytest.raises(JsonInputError) as caught:
        loads(f'{{"a": {constant}}}', where="w")
    assert caught.value.reason == f"{constant} (not a JSON number)"


def test_decode_error_carries_line_and_column() -> None:
    """A syntax error says the parser's reason and where it stopped."""
    with pytest.raises(JsonInputError) as caught:
        loads('{\n  "a": }', where="w")
    assert (caught.value.reason, caught.value.line, caught.value.column) == (
        "Expecting value",
        2,
        8,
    )


def test_bytes_that_are_not_utf8_are_refused() -> None:
    """Bytes are decoded as UTF-8 or refused by name."""
    with pytest.raises(JsonInputError, match="is not UTF-8 text"):
        loads(b'"\xff"', where="w")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": "x\\ud800"}', "$.a is a string with a lone surrogate"),
        ('{"\\udfff": 1}', "$ has a key with a lone surrogate"),
    ],
)
def test_lone_surrogates_are_refused(text: str, problem: str) -> None:
    """A string or key that is not Unicode text is refused, named by its path."""
    with pytest.raises(JsonInputError, match=f"^w: {problem.replace('$', '[$]')}"):
        loads(text, where="w")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": {SECRET}}, "$.a is a set, which is not a JSON value"),
        ({"a": [1, float("inf")]}, "$.a[1] is inf, which JSON cannot carry"),
        ({1: SECRET}, "$ has a key that is not a string"),
        ({"k" * 100: {"b": b"x"}}, f"$.{'k' * 40}….b is a bytes, which is not a JSON value"),
        (
            {"a": [-(10**5000)]},
            f"$.a[0] is an integer of more than {sys.get_int_max_str_digits()} digits, "
            "which Python cannot write",
        ),
    ],
)
def test_check_json_names_the_path_never_the_value(value: Any, problem: str) -> None:
    """The error names where the bad value is and its kind; never the value, keys cut at 40."""
    with pytest.raises(JsonInputError) as caught:
        check_json(value, where="w")
    assert caught.value.problem == problem
    assert SECRET not in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_property_any_text_loads_or_raises_json_input_error(text: str) -> None:
    """For any text, `loads` returns JSON data or raises JsonInputError, nothing else."""
    try:
        value = loads(text, where="w")
    except JsonInputError:
        return
    check_json(value, where="w")


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_property_json_data_round_trips(value: Any) -> None:
    """Every JSON value within the bounds loads back equal to itself."""
    assert loads(json.dumps(value), where="w") == value


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities among them
    | st.text(max_size=5)
    | st.sampled_from(["\ud800", "é\udfff", b"x", {1}, object()])
    | st.sampled_from([2001, 20_000]).map(lambda bits: -(2**bits))  # written as text, and not
)
KEYS = st.text(max_size=3) | st.sampled_from(["\udc00", 1, None, ("k",)])


def chain(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


@settings(max_examples=500, deadline=None)
@given(
    st.recursive(
        LEAVES,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(KEYS, inner, max_size=3)
            | st.tuples(inner, st.integers(MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH + 1)).map(
                lambda pair: chain(*pair)
            )
        ),
        max_leaves=10,
    )
)
def test_property_the_fast_walk_passes_exactly_what_the_walk_with_paths_passes(value: Any) -> None:
    """`check_json`'s walk without paths accepts a value exactly when the walk naming paths does."""
    try:
        json_policy._find_problem(value, "w")
    except JsonInputError:
        assert not json_policy._is_json(value)
    else:
        assert json_policy._is_json(value)
