"""The compiled check of a tool's arguments answers exactly as jsonschema's validator does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolloop.effects.registry.schema import accepting, check_parameters, compiled_check

NAMES = st.sampled_from(["a", "b", "c"])
TEXT = st.text(alphabet="ab", max_size=3)
NUMBER = st.sampled_from([-1, 0, 1, 1.0, 1.5, -0.0, 2.0])
SCALAR = st.none() | st.booleans() | NUMBER | TEXT
VALUES = st.recursive(
    SCALAR,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(NAMES, children, max_size=3),
    max_leaves=6,
)
CONTAINERS = st.lists(SCALAR, min_size=1, max_size=2) | st.dictionaries(
    NAMES, SCALAR, min_size=1, max_size=2
)
KINDS = ["string", "integer", "number", "boolean", "null", "array", "object"]
SCALAR_RULES = {
    "type": st.sampled_from(KINDS) | st.lists(st.sampled_from(KINDS), min_size=1, unique=True),
    "minimum": NUMBER,
    "maximum": NUMBER,
    "exclusiveMinimum": NUMBER,
    "exclusiveMaximum": NUMBER,
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 3),
    "pattern": st.sampled_from(["^a", "b$", "a+b", ""]),
    "enum": st.lists(TEXT, max_size=3),
    "const": TEXT,
    "description": TEXT,
    "format": st.just("email"),
}


def _few(rules: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A schema of at most two of `rules`, so that each rule often decides alone."""
    names = st.lists(st.sampled_from(sorted(rules)), max_size=2, unique=True)
    return names.flatmap(lambda chosen: st.fixed_dictionaries({n: rules[n] for n in chosen}))


def _rules(children: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    return {
        **SCALAR_RULES,
        "properties": st.dictionaries(NAMES, children, max_size=2),
        "required": st.lists(NAMES, unique=True, max_size=2),
        "additionalProperties": st.booleans() | children,
        "items": children,
        "minItems": st.integers(0, 2),
        "maxItems": st.integers(0, 2),
    }


SCHEMAS = st.recursive(st.booleans() | _few(SCALAR_RULES), lambda c: _few(_rules(c)), max_leaves=4)
RULES = _rules(st.booleans() | _few(SCALAR_RULES))


def _agree(schema: dict[str, Any], args: dict[str, Any]) -> None:
    validator = check_parameters("t", schema)
    check = compiled_check(schema)
    assert check is not None
    assert check(args) is validator.is_valid(args)


@pytest.mark.parametrize("keyword", sorted(RULES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_each_compiled_keyword_agrees_with_the_validator(keyword: str, data: st.DataObject) -> None:
    """One keyword over any argument value: the compiled check and jsonschema agree on validity."""
    rule = {keyword: data.draw(RULES[keyword], label=keyword)}
    value = data.draw(SCALAR | CONTAINERS | VALUES, label="v")
    _agree({"type": "object", "properties": {"v": rule}}, {"v": value})


@settings(max_examples=300, deadline=None)
@given(rules=_few(_rules(SCHEMAS)), args=st.dictionaries(NAMES, VALUES, max_size=3))
def test_nested_compiled_schemas_agree_with_the_validator(
    rules: dict[str, Any], args: dict[str, Any]
) -> None:
    """Compiled keywords nested at any depth: the compiled check and jsonschema agree."""
    _agree({**rules, "type": "object"}, args)


@pytest.mark.parametrize(
    "rule",
    [
        {"$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        {"patternProperties": {"^x": {"type": "string"}}},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"properties": {"n": {"enum": [1, True]}}},
        {"properties": {"n": {"const": 1}}},
        {"properties": {"n": {"multipleOf": 2}}},
    ],
)
def test_other_keywords_are_left_to_the_validator(rule: dict[str, Any]) -> None:
    """A schema with a keyword the compiler does not know is checked by the validator itself."""
    schema = {"type": "object", **rule}
    validator = check_parameters("t", schema)
    assert compiled_check(schema) is None
    assert accepting(schema, validator) == validator.is_valid
