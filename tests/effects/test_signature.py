"""Typed tools: the schema a function's signature implies, and the typed call (issue 14)."""

import enum
import json
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import pytest

from tests.effects.test_registry import CUSTOM, execute
from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import REDACTED, ToolCall, ToolRegistry, ToolSchemaError
from toolloop.effects.registry.signature import Secret
from toolloop.states import (
    ContextItem,
    JsonObject,
    LoopConfig,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

pytestmark = pytest.mark.anyio


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@attrs.frozen
class Place:
    city: Annotated[str, "the city's name"]
    country: str | None = None


class Window(TypedDict):
    days: int
    hourly: NotRequired[bool]


@attrs.frozen
class Node:
    children: list["Node"]


def parameters(function: Any) -> JsonObject:
    """The parameters schema the registry infers for `function`."""
    registry = ToolRegistry()
    registry.register(function, name="t")
    (spec,) = registry.specs(CUSTOM)
    return spec.parameters


def recording() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    """A registry for typed tools under test, and the keyword arguments each call received."""
    return ToolRegistry(), []


class TestMapping:
    def test_primitives_map_to_json_types_and_are_required(self) -> None:
        """str, int, float, bool are string, integer, number, boolean; no other key is allowed."""

        async def t(a: str, b: int, c: float, d: bool) -> None: ...

        assert parameters(t) == {
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "integer"},
                "c": {"type": "number"},
                "d": {"type": "boolean"},
            },
            "required": ["a", "b", "c", "d"],
            "additionalProperties": False,
        }

    def test_any_is_any_json_value(self) -> None:
        """`Any` puts no constraint on the argument."""

        async def t(value: Any) -> None: ...

        assert parameters(t)["properties"] == {"value": {}}

    def test_literal_is_an_enum_of_its_values(self) -> None:
        """A Literal of one JSON type has that type; a mixed one only the enum."""

        async def t(mode: Literal["fast", "slow"], level: Literal[1, "max"]) -> None: ...

        assert parameters(t)["properties"] == {
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "level": {"enum": [1, "max"]},
        }

    def test_enum_class_is_an_enum_of_its_member_values(self) -> None:
        """An Enum class offers its members' values."""

        async def t(unit: Unit) -> None: ...

        assert parameters(t)["properties"] == {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
        }

    def test_list_and_dict_map_to_array_and_object(self) -> None:
        """list[X] is an array of X, dict[str, X] an object with X values, nested too."""

        async def t(tags: list[str], scores: dict[str, float], grid: list[list[int]]) -> None: ...

        assert parameters(t)["properties"] == {
            "tags": {"type": "array", "items": {"type": "string"}},
            "scores": {"type": "object", "additionalProperties": {"type": "number"}},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        }

    def test_optional_is_the_type_or_null(self) -> None:
        """`X | None` is anyOf X or null."""

        async def t(note: str | None) -> None: ...

        assert parameters(t)["properties"] == {
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        }

    def test_defaults_are_not_required_and_are_shown(self) -> None:
        """A parameter with a default is optional; a JSON default is shown to the model."""

        async def t(
            query: str,
            limit: int = 5,
            unit: Unit = Unit.CELSIUS,
            note: str | None = None,
            ratio: float = float("nan"),
        ) -> None: ...

        schema = parameters(t)
        assert schema["required"] == ["query"]
        assert schema["properties"]["limit"] == {"type": "integer", "default": 5}
        assert schema["properties"]["unit"]["default"] == "celsius"
        assert schema["properties"]["note"]["default"] is None
        assert schema["properties"]["ratio"] == {"type": "number"}  # NaN is no JSON

    def test_without_required_parameters_there_is_no_required_list(self) -> None:
        """A tool whose parameters all have defaults has no `required` key."""

        async def t(limit: int = 5) -> None: ...

        assert "required" not in parameters(t)

    def test_annotated_text_describes_the_parameter(self) -> None:
        """`Annotated[X, "text"]` is X with that description."""

        async def t(query: Annotated[str, "what to search for"]) -> None: ...

        assert parameters(t)["properties"] == {
            "query": {"type": "string", "description": "what to search for"}
        }

    def test_attrs_class_is_a_nested_object(self) -> None:
        """An attrs class is an object of its fields; those with defaults are optional."""

        async def t(place: Place) -> None: ...

        assert parameters(t)["properties"]["place"] == {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "the city's name"},
                "country": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["city"],
            "additionalProperties": False,
        }

    def test_typed_dict_is_a_nested_object(self) -> None:
        """A TypedDict is an object of its keys; NotRequired keys are optional."""

        async def t(window: Window) -> None: ...

        assert parameters(t)["properties"]["window"] == {
            "type": "object",
            "properties": {"days": {"type": "integer"}, "hourly": {"type": "boolean"}},
            "required": ["days"],
            "additionalProperties": False,
        }

    def test_nested_objects_inside_containers(self) -> None:
        """Objects nest inside lists and optionals as anywhere else."""

        async def t(places: list[Place], window: Window | None = None) -> None: ...

        properties = parameters(t)["properties"]
        assert properties["places"]["items"]["required"] == ["city"]
        assert properties["window"]["anyOf"][0]["required"] == ["days"]


class TestDocstrings:
    def test_google_args_describe_parameters_and_the_rest_describes_the_tool(self) -> None:
        """The text before `Args:` is the description; each entry describes its parameter."""

        async def forecast(city: str, days: int = 1) -> None:
            """Forecast the weather.

            Uses the national service.

            Args:
                city: The city,
                    as the user wrote it.
                days (int): How many days ahead.

            Returns:
                The forecast.
            """

        registry = ToolRegistry()
        registry.register(forecast)
        (spec,) = registry.specs(CUSTOM)
        assert spec.description == "Forecast the weather.\n\nUses the national service."
        assert spec.parameters["properties"] == {
            "city": {"type": "string", "description": "The city, as the user wrote it."},
            "days": {"type": "integer", "description": "How many days ahead.", "default": 1},
        }

    def test_rest_param_fields_describe_parameters(self) -> None:
        """`:param name: text` fields describe parameters too."""

        async def forecast(city: str) -> None:
            """Forecast the weather.

            :param city: The city.
            :returns: The forecast.
            """

        registry = ToolRegistry()
        registry.register(forecast)
        (spec,) = registry.specs(CUSTOM)
        assert spec.description == "Forecast the weather."
        assert spec.parameters["properties"]["city"]["description"] == "The city."

    def test_annotated_text_wins_over_the_docstring(self) -> None:
        """The description next to the type is the one the model reads."""

        async def t(city: Annotated[str, "from the type"], days: int) -> None:
            """Look up a city.

            Args:
                city: from the docstring.
                days: from the docstring too.
            """

        assert parameters(t)["properties"] == {
            "city": {"type": "string", "description": "from the type"},
            "days": {"type": "integer", "description": "from the docstring too."},
        }


class TestRefusals:
    @pytest.mark.parametrize(
        ("annotation", "problem"),
        [
            (set[int], "set[int] has no JSON Schema mapping"),
            (bytes, "<class 'bytes'> has no JSON Schema mapping"),
            (int | str, "only X | None unions are supported"),
            (dict[int, str], "dict keys must be str (JSON object keys), not <class 'int'>"),
            (Literal[b"x"], "enum values must be JSON scalars"),
        ],
    )
    def test_unmapped_annotation_is_refused_naming_the_parameter(
        self, annotation: Any, problem: str
    ) -> None:
        """A type without a JSON Schema is refused at registration, naming where it is."""

        async def t(value: int) -> None: ...

        t.__annotations__["value"] = annotation
        with pytest.raises(ToolSchemaError) as caught:
            parameters(t)
        assert caught.value.where == "signature.value"
        assert problem in caught.value.problem

    def test_unmapped_field_of_a_nested_class_is_named_by_its_path(self) -> None:
        """A field deep in a nested class is named `signature.param.field`."""

        @attrs.frozen
        class Bad:
            blob: bytes

        async def t(item: Bad) -> None: ...

        with pytest.raises(ToolSchemaError) as caught:
            parameters(t)
        assert caught.value.where == "signature.item.blob"

    def test_recursive_class_is_refused(self) -> None:
        """A class that contains itself has no finite schema."""

        async def t(tree: Node) -> None: ...

        with pytest.raises(ToolSchemaError, match=r"the recursive type Node is not supported"):
            parameters(t)

    def test_missing_annotation_is_refused(self) -> None:
        """Every parameter needs a type."""

        async def t(query) -> None: ...  # type: ignore[no-untyped-def]

        with pytest.raises(ToolSchemaError, match=r'^tool "t": signature.query: has no type'):
            parameters(t)

    def test_variadic_parameters_are_refused(self) -> None:
        """`*args` and `**kwargs` have no names the model could fill."""

        async def t(*values: int) -> None: ...

        with pytest.raises(ToolSchemaError, match=r"\*args and \*\*kwargs cannot be"):
            parameters(t)

    def test_a_sync_function_is_refused(self) -> None:
        """The registry awaits tools, so a typed tool must be `async def`."""

        def t(query: str) -> None: ...

        with pytest.raises(ToolSchemaError, match=r"must be an async function"):
            parameters(t)

    def test_an_unresolvable_hint_is_refused(self) -> None:
        """A string annotation naming nothing is refused with the name."""

        async def t(query: "Missing") -> None: ...  # type: ignore[name-defined]  # noqa: F821

        with pytest.raises(ToolSchemaError, match=r"cannot resolve the type hints: .*Missing"):
            parameters(t)


class TestTypedCall:
    async def test_arguments_arrive_structured_into_the_declared_types(self) -> None:
        """Objects become attrs instances, enum values members, TypedDicts dicts."""
        registry, seen = recording()

        @registry.tool()
        async def forecast(place: Place, unit: Unit, window: Window, days: list[int]) -> None:
            seen.append({"place": place, "unit": unit, "window": window, "days": days})

        args = {
            "place": {"city": "Oslo"},
            "unit": "fahrenheit",
            "window": {"days": 2},
            "days": [1, 2],
        }
        assert await execute(registry, "forecast", args) == ToolResult(success=True)
        assert seen == [
            {
                "place": Place(city="Oslo"),
                "unit": Unit.FAHRENHEIT,
                "window": {"days": 2},
                "days": [1, 2],
            }
        ]

    async def test_missing_optional_argument_takes_its_default(self) -> None:
        """An argument the model left out is the function's default."""
        registry, seen = recording()

        @registry.tool()
        async def search(query: str, limit: int = 5, note: str | None = None) -> None:
            seen.append({"query": query, "limit": limit, "note": note})

        await execute(registry, "search", {"query": "cats", "note": None})
        assert seen == [{"query": "cats", "limit": 5, "note": None}]

    async def test_a_whole_number_for_a_float_arrives_as_a_float(self) -> None:
        """JSON has one number type: `3` for a float parameter is `3.0`."""
        registry, seen = recording()

        @registry.tool()
        async def scale(factor: float) -> None:
            seen.append({"factor": factor})

        await execute(registry, "scale", {"factor": 3})
        assert seen == [{"factor": 3.0}] and isinstance(seen[0]["factor"], float)

    async def test_tool_call_parameter_receives_the_call_and_is_not_in_the_schema(self) -> None:
        """A parameter annotated `ToolCall`, whatever its name, gets the call."""
        registry, seen = recording()

        @registry.tool()
        async def search(query: str, ctx: ToolCall) -> JsonObject:
            await ctx.notify(f"searching {query}")
            seen.append({"name": ctx.name})
            return {"hits": 1}

        assert list(registry.specs(CUSTOM)[0].parameters["properties"]) == ["query"]
        result = await execute(registry, "search", {"query": "cats"})
        assert result == ToolResult(success=True, data={"hits": 1})
        assert seen == [{"name": "search"}]

    async def test_positional_only_parameters_are_passed_by_position(self) -> None:
        """`def f(a, /, b)` is called as `f(a, b=...)`."""
        registry, seen = recording()

        @registry.tool()
        async def pair(a: int, /, b: int = 2) -> None:
            seen.append({"a": a, "b": b})

        await execute(registry, "pair", {"a": 1})
        assert seen == [{"a": 1, "b": 2}]

    async def test_an_object_with_an_async_call_is_a_typed_tool(self) -> None:
        """A callable object whose `__call__` is `async def` is typed by that signature."""
        seen: list[int] = []

        class Counter:
            async def __call__(self, step: int) -> None:
                seen.append(step)

        registry = ToolRegistry()
        registry.register(Counter(), name="count")
        await execute(registry, "count", {"step": 3})
        assert seen == [3]

    async def test_the_decorator_returns_the_typed_function_itself(self) -> None:
        """A decorated tool stays a plain typed function the author can call."""
        registry = ToolRegistry()

        @registry.tool()
        async def double(n: int) -> JsonObject:
            return {"n": 2 * n}

        assert await double(4) == {"n": 8}


class TestSchemaFailures:
    async def test_wrong_type_from_the_model_is_the_schema_failure(self) -> None:
        """A string for an integer is refused by the schema with its path; the code never runs."""
        registry, seen = recording()

        @registry.tool()
        async def search(query: str, limit: int = 5) -> None:
            seen.append({})

        result = await execute(registry, "search", {"query": "cats", "limit": "3"})
        assert result.error == (
            'invalid arguments for tool "search": $.limit: must be of type integer (rule: type)'
        )
        assert seen == []
        assert registry.recent()[-1].ran is False

    async def test_wrong_type_inside_a_nested_object_names_its_path(self) -> None:
        """The failure names the nested field, as for a hand-written schema."""
        registry, _ = recording()

        @registry.tool()
        async def forecast(place: Place, unit: Unit = Unit.CELSIUS) -> None: ...

        result = await execute(registry, "forecast", {"place": {"city": 7}, "unit": "kelvin"})
        assert result.error == (
            'invalid arguments for tool "forecast": '
            "$.place.city: must be of type string (rule: type); "
            '$.unit: must be one of ["celsius", "fahrenheit"] (rule: enum)'
        )

    async def test_an_argument_the_function_does_not_take_is_refused(self) -> None:
        """No other keys: an unknown argument is a failure the model reads."""
        registry, _ = recording()

        @registry.tool()
        async def search(query: str) -> None: ...

        result = await execute(registry, "search", {"query": "x", "page": 2})
        assert result.error == (
            'invalid arguments for tool "search": $: has keys that are not allowed '
            '(allowed: "query") (rule: additionalProperties)'
        )


class TestSecrets:
    def test_secret_is_write_only_in_the_schema(self) -> None:
        """`Annotated[str, Secret]` is a writeOnly string, optional or not."""

        async def t(
            key: Annotated[str, Secret], backup: Annotated[str, Secret] | None = None
        ) -> None: ...

        properties = parameters(t)["properties"]
        assert properties["key"] == {"type": "string", "writeOnly": True}
        assert properties["backup"]["writeOnly"] is True

    async def test_secrets_are_redacted_by_the_registry(self) -> None:
        """Top-level, optional and nested secrets never reach `recent()`; the tool gets them."""

        @attrs.frozen
        class Account:
            token: Annotated[str, Secret]
            id: int

        registry, seen = recording()

        @registry.tool()
        async def login(
            user: str,
            password: Annotated[str, Secret],
            account: Account,
            backup: Annotated[str, Secret] | None = None,
        ) -> None:
            seen.append({"password": password, "token": account.token, "backup": backup})

        args = {"user": "ana", "password": "hunter2", "account": {"token": "t0k", "id": 3}}
        await execute(registry, "login", {**args, "backup": "b4ck"})
        assert registry.recent()[-1].args == {
            "user": "ana",
            "password": REDACTED,
            "account": {"token": REDACTED, "id": 3},
            "backup": REDACTED,
        }
        assert seen == [{"password": "hunter2", "token": "t0k", "backup": "b4ck"}]


class TestUntypedForms:
    async def test_explicit_parameters_keep_the_dict_form(self) -> None:
        """With `parameters=`, the schema is as given and the function gets the args dict."""
        registry = ToolRegistry()
        seen: list[JsonObject] = []
        schema = {"type": "object", "properties": {"q": {"type": "string"}}}

        @registry.tool(parameters=schema)
        async def search(args: JsonObject, call: ToolCall) -> None:
            seen.append(args)

        assert registry.specs(CUSTOM)[0].parameters is schema
        await execute(registry, "search", {"q": "x"})
        assert seen == [{"q": "x"}]

    async def test_args_and_call_without_parameters_is_the_empty_dict_form(self) -> None:
        """`(args, call)` without a schema is still an object without properties."""
        registry = ToolRegistry()
        seen: list[JsonObject] = []

        @registry.tool()
        async def ping(args: JsonObject, call: ToolCall) -> None:
            seen.append(args)

        assert registry.specs(CUSTOM)[0].parameters == {"type": "object", "properties": {}}
        await execute(registry, "ping")
        assert seen == [{}]


class TestThroughTheLoop:
    async def test_a_typed_tool_runs_in_a_real_turn(self, server: OpenAIServer) -> None:
        """Over real HTTP: the model is sent the inferred schema, calls the tool with JSON, the
        function gets typed arguments, and its answer reaches the model's next turn."""
        registry, seen = recording()

        @registry.tool()
        async def forecast(place: Place, unit: Unit = Unit.CELSIUS) -> JsonObject:
            """Forecast the weather."""
            seen.append({"place": place, "unit": unit})
            return {"sky": "clear", "city": place.city}

        server.script(
            tool_call_reply("forecast", {"place": {"city": "Kyoto"}, "unit": "fahrenheit"}),
            text_reply("Clear skies over Kyoto."),
        )
        provider = OpenAICompatProvider(base_url=server.base_url, model="m")
        channel = RecordingChannel()
        try:
            result = await run_tool_loop(
                turn=TurnSettings(context=(ContextItem(author="ana", content="Kyoto?"),)),
                config=LoopConfig(),
                provider=provider,
                registry=registry,
                channel=channel,
                control=MemoryTurnControl(),
            )
        finally:
            await provider.aclose()
        assert result.status is TurnStatus.COMPLETED
        assert channel.text == "Clear skies over Kyoto."
        assert seen == [{"place": Place(city="Kyoto"), "unit": Unit.FAHRENHEIT}]
        (tool,) = server.requests[0].body["tools"]
        assert tool["function"]["parameters"] == registry.specs(CUSTOM)[0].parameters
        assert tool["function"]["description"] == "Forecast the weather."
        answer = server.requests[1].body["messages"][-1]
        assert (answer["role"], json.loads(answer["content"])) == (
            "tool",
            {"sky": "clear", "city": "Kyoto"},
        )
