"""Typed tools at their edges (issue 20 item 7, issue 21 item 4).

This module uses `from __future__ import annotations` on purpose: every hint
below is a string until the registry resolves it, as in a bot's own module.
"""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import attrs
import pytest

from tests.effects.test_registry import CUSTOM, execute
from toolloop.effects.registry import ToolRegistry, ToolSchemaError
from toolloop.states import JsonObject, ToolResult

pytestmark = pytest.mark.anyio


class Window(TypedDict):
    days: int
    hourly: NotRequired[bool]
    note: NotRequired[Annotated[str, "shown to the model"]]


class Loose(TypedDict, total=False):
    city: Required[str]
    country: str


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    lat: float
    lon: float


def spec_of(registry: ToolRegistry, name: str) -> JsonObject:
    return next(spec.parameters for spec in registry.specs(CUSTOM) if spec.name == name)


class TestFutureAnnotations:
    def test_not_required_keys_stay_optional_under_future_annotations(self) -> None:
        """`NotRequired` (also inside `Annotated`) and `Required` read from the resolved hints."""
        registry = ToolRegistry()

        @registry.tool
        async def plan(window: Window, place: Loose) -> None: ...

        properties = spec_of(registry, "plan")["properties"]
        assert properties["window"]["required"] == ["days"]
        assert properties["window"]["properties"]["note"] == {
            "type": "string",
            "description": "shown to the model",
        }
        assert properties["place"]["required"] == ["city"]

    async def test_a_typed_dict_without_its_optional_keys_reaches_the_function(self) -> None:
        """The model may leave `NotRequired` keys out; the function gets the keys it sent."""
        registry, seen = ToolRegistry(), []

        @registry.tool
        async def plan(window: Window, place: Loose) -> None:
            seen.append((window, place))

        args = {"window": {"days": 2}, "place": {"city": "Oslo"}}
        assert await execute(registry, "plan", args) == ToolResult(success=True)
        assert seen == [({"days": 2}, {"city": "Oslo"})]


class TestNumbers:
    async def test_a_whole_float_for_an_int_literal_arrives_as_the_literal(self) -> None:
        """`1.0` passes the schema's enum (JSON equality) and arrives as `1`, an int."""
        registry, seen = ToolRegistry(), []

        @registry.tool
        async def pick(n: Literal[1, 2], level: Level, flag: Literal[True, 1] = 1) -> None:
            seen.extend([n, level, flag])

        await execute(registry, "pick", {"n": 1.0, "level": 2.0, "flag": True})
        assert seen == [1, Level.HIGH, True]
        assert [type(value) for value in seen] == [int, Level, bool]

    async def test_an_integer_beyond_the_float_range_is_refused_naming_the_argument(
        self,
    ) -> None:
        """`10**400` for a float, at the top or nested: an error by path; the tool never runs."""
        registry, seen = ToolRegistry(), []

        @registry.tool
        async def locate(x: float, points: list[Point], scale: dict[str, float]) -> None:
            seen.append(x)

        huge = 10**400
        args = {"x": huge, "points": [{"lat": 1, "lon": huge}], "scale": {"k": huge}}
        result = await execute(registry, "locate", args)
        too_large = f"is too large for a float (at most {sys.float_info.max:.4g})"
        assert result.error == (
            f'invalid arguments for tool "locate": $.x: {too_large}; '
            f"$.points[0].lon: {too_large}; $.scale.k: {too_large}"
        )
        assert seen == []
        assert (registry.recent()[-1].ran, registry.recent()[-1].success) == (False, False)


class TestOptionalObjectErrors:
    async def test_an_error_inside_an_optional_object_names_what_was_wrong(self) -> None:
        """For `X | None` given an object, the problems inside X, not "one of 2 schemas"."""
        registry = ToolRegistry()

        @registry.tool
        async def locate(point: Point | None = None, points: list[Point] | None = None) -> None:
            pass

        result = await execute(
            registry, "locate", {"point": {"lat": "north"}, "points": [{"lat": 1, "lon": "x"}]}
        )
        assert result.error == (
            'invalid arguments for tool "locate": '
            "$.point.lon: is required (rule: required); "
            "$.point.lat: must be of type number (rule: type); "
            "$.points[0].lon: must be of type number (rule: type)"
        )

    async def test_a_value_of_no_branch_s_type_keeps_the_union_message(self) -> None:
        """A string for `Point | None` fits neither branch: the union itself is named."""
        registry = ToolRegistry()

        @registry.tool
        async def locate(point: Point | None = None) -> None: ...

        result = await execute(registry, "locate", {"point": "here"})
        assert result.error == (
            'invalid arguments for tool "locate": '
            "$.point: must match at least one of the 2 schemas it allows (rule: anyOf)"
        )


class TestMetaSchemaRef:
    async def test_a_ref_to_the_json_schema_meta_schema_resolves_and_validates(self) -> None:
        """A parameter that is itself a JSON Schema: `$ref` to the 2020-12 meta-schema."""
        registry = ToolRegistry()
        meta = "https://json-schema.org/draft/2020-12/schema"
        parameters = {"type": "object", "properties": {"schema": {"$ref": meta}}}

        @registry.tool(name="define", parameters=parameters)
        async def define(args: JsonObject, call: Any) -> None: ...

        assert (await execute(registry, "define", {"schema": {"type": "string"}})).success
        result = await execute(registry, "define", {"schema": {"type": "strin"}})
        assert result.error is not None
        assert result.error.startswith('invalid arguments for tool "define": $.schema.type: ')


class TestDecorator:
    async def test_the_decorator_works_with_and_without_parentheses(self) -> None:
        """`@registry.tool`, `@registry.tool()` and `@registry.tool(name=...)` register alike."""
        registry = ToolRegistry()

        @registry.tool
        async def bare(q: str) -> None: ...

        @registry.tool()
        async def called(q: str) -> None: ...

        @registry.tool(name="named")
        async def renamed(q: str) -> None: ...

        assert [spec.name for spec in registry.specs(CUSTOM)] == ["bare", "called", "named"]
        assert bare.__name__ == "bare"  # the function itself comes back
        assert (await execute(registry, "bare", {"q": "x"})).success


class TestReturns:
    @pytest.mark.parametrize(
        ("value", "data"),
        [
            ("a text", "a text"),
            (3, 3),
            (2.5, 2.5),
            (False, False),
            ([1, "two"], [1, "two"]),
            (Point(lat=1.0, lon=2.0), {"lat": 1.0, "lon": 2.0}),
            (Level.HIGH, 2),
            ({"k": 1}, {"k": 1}),
        ],
    )
    async def test_a_returned_value_becomes_the_success_data(self, value: Any, data: Any) -> None:
        """A str, a number, a bool, a list, an attrs instance, an enum, a dict: success data."""
        registry = ToolRegistry()

        @registry.tool
        async def answer() -> Any:
            return value

        assert await execute(registry, "answer") == ToolResult(success=True, data=data)

    async def test_a_tool_result_or_none_is_returned_as_it_is(self) -> None:
        """A typed tool keeps the full `ToolResult` form and the plain success of None."""
        registry = ToolRegistry()
        failure = ToolResult(success=False, error="no")

        @registry.tool
        async def fail() -> ToolResult | None:
            return failure

        @registry.tool
        async def nothing() -> None:
            return None

        assert await execute(registry, "fail") == failure
        assert await execute(registry, "nothing") == ToolResult(success=True)

    @pytest.mark.parametrize(
        "annotation", ["bytes", "set[int]", "str | bytes", "list[object]", "dict[int, str]"]
    )
    def test_a_return_annotation_json_cannot_hold_is_refused_at_registration(
        self, annotation: str
    ) -> None:
        """The return annotation is checked like a parameter's, each arm of a union alone."""
        namespace: dict[str, Any] = {}
        exec(f"async def answer() -> {annotation}: ...", namespace)  # the hint as written
        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(namespace["answer"])
        assert str(caught.value).startswith('tool "answer": signature.return: ')
        assert "is not JSON data (return a ToolResult, None or data str, int" in str(caught.value)

    def test_json_return_annotations_register(self) -> None:
        """Unions of JSON types, `ToolResult | dict | None`, `Any` and no annotation are fine."""
        registry = ToolRegistry()
        for index, annotation in enumerate(
            ["str | int", "ToolResult | dict[str, Any] | None", "Any", "list[Point]", ""]
        ):
            namespace: dict[str, Any] = {"ToolResult": ToolResult, "Any": Any, "Point": Point}
            arrow = f" -> {annotation}" if annotation else ""
            exec(f"async def t{index}(){arrow}: ...", namespace)
            registry.register(namespace[f"t{index}"])
        assert len(registry.specs(CUSTOM)) == 5
