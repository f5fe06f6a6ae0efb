"""The registry against hostile schemas, arguments and results: no leak, no hang, no raise."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.effects.test_registry import execute
from toolloop.effects.registry import tool_registry as registry_module
from toolloop.effects.registry.tool_registry import (
    MAX_KEPT_ARGS_CHARS,
    MAX_RESULT_CHARS,
    REDACTED,
    ToolCall,
    ToolRegistry,
    ToolSchemaError,
)
from toolloop.states import JsonObject, ToolResult
from toolloop.states.json_policy import MAX_JSON_DEPTH

pytestmark = pytest.mark.anyio

SECRET = "hunter2-CANARY-7f3a"
DIGITS = sys.get_int_max_str_digits()
LOGIN: JsonObject = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "password": {
            "type": "string",
            "writeOnly": True,
            "minLength": 40,
            "maxLength": 60,
            "pattern": "^[a-z]+$",
            "enum": ["open-sesame-and-more-than-forty-characters-long"],
        },
        "pin": {"type": "integer", "writeOnly": True},
        "extra": {
            "type": "object",
            "additionalProperties": {"type": "integer", "writeOnly": True},
        },
    },
    "additionalProperties": False,
}


async def _noop(args: JsonObject, call: ToolCall) -> None:
    return None


def login_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(_noop, name="login", parameters=LOGIN)
    return registry


def everything_said(registry: ToolRegistry, result: ToolResult) -> str:
    """Every text the registry hands out about its calls: the result and the ring."""
    return json.dumps([repr(result), [repr(entry) for entry in registry.recent()]])


class TestSecretsNeverEnterMessages:
    @pytest.mark.parametrize(
        "args",
        [
            {"password": SECRET},  # minLength, pattern, enum
            {"password": [SECRET]},  # type
            {"pin": SECRET},  # type on another writeOnly field
            {"extra": {"k": SECRET}},  # additionalProperties given as a schema
            {"password": SECRET * 10},  # maxLength
        ],
    )
    async def test_failing_secret_appears_in_no_result_or_ring(self, args: JsonObject) -> None:
        """A value breaking any rule is named by path and rule, its text in no failure or record."""
        registry = login_registry()
        result = await execute(registry, "login", args)
        assert not result.success and result.error is not None
        assert result.error.startswith('invalid arguments for tool "login": $')
        assert SECRET not in everything_said(registry, result)

    async def test_model_learns_argument_rule_and_expectation(self) -> None:
        """Each broken rule says the path, what the schema expected and the rule's name."""
        result = await execute(login_registry(), "login", {"password": SECRET, "other": 1})
        assert result.error == (
            'invalid arguments for tool "login": '
            '$: has keys that are not allowed (allowed: "user", "password", "pin", "extra") '
            "(rule: additionalProperties); "
            "$.password: must be at least 40 characters long (rule: minLength); "
            '$.password: must match the pattern "^[a-z]+$" (rule: pattern); '
            '$.password: must be one of ["open-sesame-and-more-than-forty-characters-long"] '
            "(rule: enum)"
        )

    @pytest.mark.parametrize(
        ("schema", "args", "expected"),
        [
            ({"type": "integer", "minimum": 3}, 1, "must be at least 3 (rule: minimum)"),
            ({"type": "integer", "maximum": 3}, 9, "must be at most 3 (rule: maximum)"),
            ({"exclusiveMinimum": 3}, 3, "must be greater than 3 (rule: exclusiveMinimum)"),
            ({"exclusiveMaximum": 3}, 3, "must be less than 3 (rule: exclusiveMaximum)"),
            ({"multipleOf": 5}, 7, "must be a multiple of 5 (rule: multipleOf)"),
            ({"const": "x"}, "y", 'must be "x" (rule: const)'),
            ({"minItems": 2}, [1], "must have at least 2 items (rule: minItems)"),
            ({"maxItems": 1}, [1, 2], "must have at most 1 item (rule: maxItems)"),
            ({"uniqueItems": True}, [1, 1], "must not repeat an item (rule: uniqueItems)"),
            ({"minProperties": 1}, {}, "must have at least 1 property (rule: minProperties)"),
            (
                {"maxProperties": 0},
                {"a": 1},
                "must have at most 0 properties (rule: maxProperties)",
            ),
            (
                {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                [],
                "must match at least one of the 2 schemas it allows (rule: anyOf)",
            ),
            (
                {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
                1,
                "must match exactly one of the 2 schemas it allows (rule: oneOf)",
            ),
            ({"not": {"type": "string"}}, "s", "must not match the schema under `not` (rule: not)"),
            ({"type": ["string", "null"]}, 1, "must be of type string or null (rule: type)"),
            (
                {"propertyNames": {"maxLength": 2}},
                {"long": 1},
                "property names: must be at most 2 characters long (rule: maxLength)",
            ),
        ],
    )
    async def test_every_rule_is_worded_from_the_schema(
        self, schema: Any, args: Any, expected: str
    ) -> None:
        """Each keyword's failure reads as the path and the rule's expectation, never the value."""
        registry = ToolRegistry()
        params = {"type": "object", "properties": {"v": schema}}
        registry.register(_noop, name="t", parameters=params)
        result = await execute(registry, "t", {"v": args})
        assert result.error == f'invalid arguments for tool "t": $.v: {expected}'

    async def test_false_schema_is_reported_at_its_parent(self) -> None:
        """jsonschema reports a `false` subschema at the parent's path; the wording says so."""
        registry = ToolRegistry()
        params = {"type": "object", "properties": {"v": False}}
        registry.register(_noop, name="t", parameters=params)
        result = await execute(registry, "t", {"v": SECRET})
        assert result.error == (
            'invalid arguments for tool "t": '
            "$: has a value its schema forbids (`false`) (rule: false schema)"
        )

    async def test_dependent_required_names_both_arguments(self) -> None:
        """A `dependentRequired` failure names the missing argument and the one that needs it."""
        registry = ToolRegistry()
        params = {"type": "object", "dependentRequired": {"card": ["cvv"]}}
        registry.register(_noop, name="pay", parameters=params)
        result = await execute(registry, "pay", {"card": SECRET})
        assert result.error == (
            'invalid arguments for tool "pay": '
            "$.cvv: is required when $.card is present (rule: dependentRequired)"
        )

    @settings(max_examples=60, deadline=None)
    @given(value=st.recursive(st.text(min_size=1), lambda inner: st.lists(inner, max_size=3)))
    def test_property_no_value_text_reaches_the_failure(self, value: Any) -> None:
        """For any value sent as a too-short writeOnly string, the failure holds only the path."""
        registry = login_registry()
        result = anyio.run(execute, registry, "login", {"password": value, "pin": value})
        assert result.error is not None
        rules = result.error.removeprefix('invalid arguments for tool "login": ').split("; ")
        assert all(rule.startswith(("$.password: ", "$.pin: ")) for rule in rules)
        assert all("(rule: " in rule for rule in rules)


class TestSchemasCheckedWhole:
    def test_unresolvable_ref_is_refused_at_registration(self) -> None:
        """A `$ref` that resolves to nothing is refused then, naming the tool and the ref."""
        params = {"type": "object", "properties": {"q": {"$ref": "#/$defs/missing"}}}
        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(_noop, name="search", parameters=params)
        assert str(caught.value) == (
            'tool "search": parameters.properties.q.$ref: cannot resolve "#/$defs/missing" '
            "(only references inside the schema or to a JSON Schema meta-schema are allowed)"
        )

    def test_remote_ref_is_refused_without_fetching(self) -> None:
        """A reference to another document is refused: nothing is fetched from the network."""
        params = {"type": "object", "properties": {"q": {"$ref": "https://example.invalid/s"}}}
        with pytest.raises(ToolSchemaError, match=r'cannot resolve "https://example.invalid/s"'):
            ToolRegistry().register(_noop, name="search", parameters=params)

    async def test_resolvable_refs_validate(self) -> None:
        """Refs into `$defs`, also under a nested `$id`, resolve and are applied."""
        registry = ToolRegistry()
        params = {
            "type": "object",
            "$defs": {"word": {"type": "string"}},
            "properties": {
                "q": {"$ref": "#/$defs/word"},
                "n": {
                    "$id": "https://toolloop.invalid/n",
                    "$defs": {"int": {"type": "integer"}},
                    "$ref": "#/$defs/int",
                },
            },
        }
        registry.register(_noop, name="search", parameters=params)
        assert (await execute(registry, "search", {"q": "x", "n": 1})).success
        result = await execute(registry, "search", {"q": 1, "n": "x"})
        assert result.error == (
            'invalid arguments for tool "search": $.n: must be of type integer (rule: type); '
            "$.q: must be of type string (rule: type)"
        )

    async def test_ref_cycle_is_a_failure_not_a_raise(self) -> None:
        """A schema that loops only when applied makes the call fail; `execute` does not raise."""
        registry = ToolRegistry()
        params = {
            "type": "object",
            "$defs": {"loop": {"$ref": "#/$defs/loop"}},
            "properties": {"q": {"$ref": "#/$defs/loop"}},
        }
        registry.register(_noop, name="loop", parameters=params)
        result = await execute(registry, "loop", {"q": 1})
        assert result.error == (
            'tool "loop" cannot check its arguments: its schema fails (RecursionError)'
        )

    def test_deep_schema_is_refused(self) -> None:
        """A schema nested past the JSON depth bound is refused by name, never a RecursionError."""
        deep: JsonObject = {"type": "object"}
        for _ in range(MAX_JSON_DEPTH):
            deep = {"type": "object", "properties": {"a": deep}}
        with pytest.raises(ToolSchemaError, match=r'^tool "deep": parameters: nests deeper than'):
            ToolRegistry().register(_noop, name="deep", parameters=deep)


class TestLinearPatterns:
    async def test_backtracking_pattern_answers_at_once(self) -> None:
        """`^(a+)+$` against 5,000 `a`s and a `b` is refused within a second of virtual time."""
        registry = ToolRegistry()
        params = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
        registry.register(_noop, name="t", parameters=params)
        with anyio.fail_after(1):  # RE2 cannot backtrack; Python's re would take years here
            result = await execute(registry, "t", {"s": "a" * 5000 + "b"})
        assert result.error == (
            'invalid arguments for tool "t": $.s: must match the pattern "^(a+)+$" (rule: pattern)'
        )
        assert (await execute(registry, "t", {"s": "aaa"})).success

    async def test_pattern_properties_and_additional_properties_use_the_same_engine(
        self,
    ) -> None:
        """Keys matching `patternProperties` are checked by it and are not extras."""
        registry = ToolRegistry()
        params = {
            "type": "object",
            "patternProperties": {"^(x+)+$": {"type": "integer"}},
            "additionalProperties": False,
        }
        registry.register(_noop, name="t", parameters=params)
        assert (await execute(registry, "t", {"xx": 1})).success
        result = await execute(registry, "t", {"xx": "a", "x" * 3000 + "y": 1})
        assert result.error is not None
        assert "$.xx: must be of type integer (rule: type)" in result.error
        assert '$: has keys that are not allowed (allowed: keys matching "^(x+)+$")' in result.error

    @pytest.mark.parametrize(
        ("pattern", "where"),
        [("(a)\\1", "properties.s.pattern"), ("(?=a)b", "properties.s.pattern")],
    )
    def test_pattern_re2_cannot_run_is_refused(self, pattern: str, where: str) -> None:
        """Backreferences and lookaround are refused at registration, naming where and why."""
        params = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(_noop, name="t", parameters=params)
        assert caught.value.where == f"parameters.{where}"
        assert "is not supported by RE2, the linear-time engine" in caught.value.problem

    def test_unevaluated_with_pattern_properties_is_refused(self) -> None:
        """The one pair jsonschema would match with a backtracking engine is refused."""
        params = {
            "type": "object",
            "patternProperties": {"^a": {}},
            "unevaluatedProperties": False,
        }
        with pytest.raises(ToolSchemaError, match="cannot be used with `patternProperties`"):
            ToolRegistry().register(_noop, name="t", parameters=params)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


class TestJsonSizes:
    @pytest.mark.parametrize("c_encoder", [True, False])
    @settings(max_examples=50, deadline=None)
    @given(value=JSON_VALUES)
    def test_property_json_text_is_json_dumps_of_the_value(
        self, c_encoder: bool, value: Any
    ) -> None:
        """The size bounds measure `json.dumps(value, ensure_ascii=False)`, C encoder or not."""
        with pytest.MonkeyPatch.context() as patch:
            if not c_encoder:
                patch.setattr(registry_module, "_C_ENCODER", None)
            assert registry_module._to_json(value) == json.dumps(value, ensure_ascii=False)


class TestArgumentsAndResultsAreJson:
    async def test_deep_arguments_are_a_failure_and_redacted_in_the_ring(self) -> None:
        """Arguments nested past the bound fail by name; nothing of them is kept."""
        registry = login_registry()
        deep: Any = SECRET
        for _ in range(5000):
            deep = [deep]
        result = await execute(registry, "login", {"password": deep})
        assert result.error == (
            f'invalid arguments for tool "login": nests deeper than {MAX_JSON_DEPTH} levels'
        )
        kept = {REDACTED: f"nests deeper than {MAX_JSON_DEPTH} levels"}
        assert registry.recent()[-1].args == kept

    async def test_an_integer_python_cannot_write_is_refused_by_name(self) -> None:
        """Arguments with an integer too long to write as text fail by path; the ring keeps why."""
        registry = ToolRegistry()
        registry.register(_noop, name="t")
        result = await execute(registry, "t", {"n": 2**20_000})
        problem = f"$.n is an integer of more than {DIGITS} digits, which Python cannot write"
        assert result.error == f'invalid arguments for tool "t": {problem}'
        assert registry.recent()[-1].args == {REDACTED: problem}

    async def test_a_gate_refuses_arguments_that_are_not_json_before_they_are_named(
        self,
    ) -> None:
        """A closed gate is reported over arguments that are not JSON; the ring keeps only why."""
        registry = ToolRegistry()
        registry.register(_noop, name="t", available=lambda ctx: False)
        result = await execute(registry, "t", {"token": {SECRET}})
        assert result.error == (
            'tool "t" is not available for the current turn, do not retry it this turn'
        )
        kept = {REDACTED: "$.token is a set, which is not a JSON value"}
        assert registry.recent()[-1].args == kept

    @pytest.mark.parametrize(
        ("returned", "problem"),
        [
            ({"ids": {1, 2}}, "data that is not JSON: $.ids is a set, which is not a JSON value"),
            (
                ToolResult(success=True, data=[float("nan")]),
                "data that is not JSON: $[0] is nan, which JSON cannot carry",
            ),
            (
                ToolResult(success=True, image_metadata={"at": object()}),
                "image_metadata that is not JSON: $.at is a object, which is not a JSON value",
            ),
            (
                {"n": 2**20_000},
                f"data that is not JSON: $.n is an integer of more than {DIGITS} digits, "
                "which Python cannot write",
            ),
        ],
    )
    async def test_non_json_result_is_a_failure_naming_the_tool(
        self, returned: Any, problem: str
    ) -> None:
        """Data the model could not be sent is refused as the tool's failure, at once."""
        registry = ToolRegistry()

        @registry.tool(name="lookup")
        async def lookup(args: JsonObject, call: ToolCall) -> Any:
            return returned

        result = await execute(registry, "lookup", {})
        assert result == ToolResult(success=False, error=f'tool "lookup" returned {problem}')

    async def test_huge_result_is_cut_with_a_marker(self) -> None:
        """Data beyond MAX_RESULT_CHARS of JSON is kept as its first characters and a marker."""
        registry = ToolRegistry()

        @registry.tool(name="dump")
        async def dump(args: JsonObject, call: ToolCall) -> JsonObject:
            return {"text": "x" * (MAX_RESULT_CHARS + 10)}

        result = await execute(registry, "dump", {})
        total = MAX_RESULT_CHARS + 10 + len('{"text": ""}')
        assert result.success
        assert result.data == (
            json.dumps({"text": "x" * (MAX_RESULT_CHARS + 10)})[:MAX_RESULT_CHARS]
            + f" [cut: {total} characters of JSON, the first {MAX_RESULT_CHARS} kept]"
        )

    async def test_result_at_the_bound_is_kept_whole(self) -> None:
        """Data of exactly MAX_RESULT_CHARS characters of JSON is returned unchanged."""
        registry = ToolRegistry()
        data = {"text": "x" * (MAX_RESULT_CHARS - len('{"text": ""}'))}

        @registry.tool(name="dump")
        async def dump(args: JsonObject, call: ToolCall) -> JsonObject:
            return data

        assert (await execute(registry, "dump", {})).data == data

    async def test_ring_keeps_only_the_size_of_huge_arguments(self) -> None:
        """Arguments beyond MAX_KEPT_ARGS_CHARS are kept in the ring as their size alone."""
        registry = login_registry()
        await execute(registry, "login", {"user": "u" * MAX_KEPT_ARGS_CHARS})
        size = MAX_KEPT_ARGS_CHARS + len('{"user": ""}')
        assert registry.recent()[-1].args == {REDACTED: f"{size} characters of arguments"}

    async def test_long_exception_message_is_cut(self) -> None:
        """A tool exception's message is cut at MAX_ERROR_CHARS with a marker."""
        registry = ToolRegistry()

        @registry.tool(name="boom")
        async def boom(args: JsonObject, call: ToolCall) -> None:
            raise RuntimeError("e" * 5000)

        result = await execute(registry, "boom", {})
        assert result.error == (
            f'tool "boom" raised RuntimeError: {"e" * 2000}… [cut at 2000 characters]'
        )

    async def test_long_message_and_error_are_cut(self) -> None:
        """A result's `error` and `message` beyond MAX_RESULT_CHARS are cut with a marker."""
        registry = ToolRegistry()
        long = "m" * (MAX_RESULT_CHARS + 1)

        @registry.tool(name="chatty")
        async def chatty(args: JsonObject, call: ToolCall) -> ToolResult:
            return ToolResult(success=False, error=long, message=long)

        result = await execute(registry, "chatty", {})
        cut = f"{'m' * MAX_RESULT_CHARS}… [cut at {MAX_RESULT_CHARS} characters]"
        assert (result.error, result.message) == (cut, cut)

    async def test_lone_surrogate_in_a_message_is_a_failure(self) -> None:
        """A message no UTF-8 request could carry is refused as the tool's failure."""
        registry = ToolRegistry()

        @registry.tool(name="odd")
        async def odd(args: JsonObject, call: ToolCall) -> ToolResult:
            return ToolResult(success=True, message="a\ud800")

        result = await execute(registry, "odd", {})
        assert result.error == (
            'tool "odd" returned message that is not JSON: '
            "$ is a string with a lone surrogate, which is not Unicode text"
        )

    async def test_exception_text_with_a_lone_surrogate_is_made_text(self) -> None:
        """An exception message with a lone surrogate reaches the failure as `?`."""
        registry = ToolRegistry()

        @registry.tool(name="boom")
        async def boom(args: JsonObject, call: ToolCall) -> None:
            raise ValueError("bad \udc80 byte")

        result = await execute(registry, "boom", {})
        assert result.error == 'tool "boom" raised ValueError: bad ? byte'


class TestNeverRaisesForTheBotsFault:
    @pytest.mark.parametrize("gate", ["providers", "available"])
    async def test_a_gate_that_raises_is_a_failure(self, gate: str) -> None:
        """A provider or turn gate that raises refuses the call; `execute` does not raise."""
        registry = ToolRegistry()

        def broken(_: Any) -> bool:
            raise KeyError("missing setting")

        registry.register(_noop, name="t", **{gate: broken})
        result = await execute(registry, "t", {})
        assert result == ToolResult(
            success=False, error='tool "t" cannot be checked: its gate raised KeyError'
        )
        assert registry.recent()[-1].ran is False

    async def test_a_huge_unknown_name_is_cut(self) -> None:
        """An unknown name from the model is quoted at most 64 characters long."""
        registry = ToolRegistry()
        result = await execute(registry, "x" * 100_000, {})
        assert result.error == f'unknown tool "{"x" * 64}…"; the available tools are: none'
