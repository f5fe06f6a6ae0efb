"""The tool registry: its gates and their order, the schema, failures, follow-up, secrets, ring."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from toolloop.effects.ports import ToolInvocation
from toolloop.effects.registry.tool_registry import (
    REDACTED,
    RING_SIZE,
    ToolCall,
    ToolExecution,
    ToolRegistry,
    ToolSchemaError,
)
from toolloop.states import (
    ApiFamily,
    FunctionCall,
    JsonObject,
    ProviderDescriptor,
    ToolContext,
    ToolResult,
    ToolSpec,
)

pytestmark = pytest.mark.anyio

CUSTOM = ProviderDescriptor(name="local", api_family=ApiFamily.CUSTOM)
NOVELAI = ProviderDescriptor(name="nai", api_family=ApiFamily.NOVELAI)
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1}, "limit": {"type": "integer"}},
    "required": ["query"],
}
LOGIN = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "password": {"type": "string", "writeOnly": True},
        "account": {
            "type": "object",
            "properties": {
                "token": {"type": "string", "writeOnly": True},
                "id": {"type": "integer"},
            },
        },
        "keys": {"type": "array", "items": {"type": "string", "writeOnly": True}},
    },
}


def context(**changes: Any) -> ToolContext:
    base = ToolContext(
        channel_id="c",
        user_id="u",
        guild_id=None,
        locale="en",
        provider=ProviderDescriptor(name="local"),
        persona_name="Tomo",
        user_impersonation=False,
        iteration=0,
        suppress_progress_notices=False,
        show_kill_hint=False,
    )
    return attrs.evolve(base, **changes)


class Notices:
    """A progress-notice recorder standing in for the interpreter's notify."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def __call__(self, text: str) -> None:
        self.sent.append(text)


def invocation(kill: anyio.Event | None = None) -> ToolInvocation:
    return ToolInvocation(killed=anyio.Event() if kill is None else kill, notify=Notices())


async def execute(
    registry: ToolRegistry, name: str, args: JsonObject | None = None, **changes: Any
) -> ToolResult:
    call = FunctionCall(name=name, args=args)
    return await registry.execute(call, context(**changes), invocation())


def search_registry(**options: Any) -> tuple[ToolRegistry, list[JsonObject]]:
    """A registry with one `web_search` tool that records the arguments it ran with."""
    registry = ToolRegistry()
    runs: list[JsonObject] = []

    @registry.tool(name="web_search", parameters=SEARCH, **options)
    async def search(args: JsonObject, call: ToolCall) -> JsonObject:
        runs.append(args)
        return {"hits": 3}

    return registry, runs


class TestGates:
    async def test_unknown_tool_is_a_failure_naming_the_tools(self) -> None:
        """An unknown name is refused with the names the model may use."""
        registry, _ = search_registry()
        result = await execute(registry, "web_serch", {"query": "x"})
        assert result == ToolResult(
            success=False, error='unknown tool "web_serch"; the available tools are: web_search'
        )

    async def test_provider_gate_refuses_with_the_provider_name(self) -> None:
        """Static provider support: "not available for provider X", and the tool never runs."""
        registry, runs = search_registry(providers=[ApiFamily.NOVELAI])
        result = await execute(registry, "web_search", {"query": "x"})
        assert result.error == 'tool "web_search" is not available for provider local'
        assert runs == []

    async def test_turn_gate_refuses_for_the_current_turn(self) -> None:
        """Live turn state: the predicate over the tool context refuses it for this turn."""
        registry, runs = search_registry(available=lambda ctx: ctx.iteration < 3)
        result = await execute(registry, "web_search", {"query": "x"}, iteration=3)
        assert result.error == (
            'tool "web_search" is not available for the current turn, do not retry it this turn'
        )
        assert runs == []

    async def test_unavailable_for_turn_refuses_like_the_turn_gate(self) -> None:
        """The engine's short-term-memory guard arrives as `unavailable_for_turn`."""
        registry, runs = search_registry()
        result = await execute(
            registry, "web_search", {"query": "x"}, unavailable_for_turn=frozenset({"web_search"})
        )
        assert result.error == (
            'tool "web_search" is not available for the current turn, do not retry it this turn'
        )
        assert runs == []

    async def test_provider_gate_comes_before_turn_gate_and_schema(self) -> None:
        """With every gate failing, the provider gate is the one reported."""
        registry, _ = search_registry(providers=lambda p: False, available=lambda ctx: False)
        result = await execute(registry, "web_search", {"query": 7})
        assert result.error is not None and "not available for provider" in result.error

    async def test_turn_gate_comes_before_schema(self) -> None:
        """Bad arguments to a tool forbidden this turn get the turn refusal."""
        registry, _ = search_registry(available=lambda ctx: False)
        result = await execute(registry, "web_search", {"query": 7})
        assert result.error is not None and "not available for the current turn" in result.error

    async def test_provider_gate_reads_the_api_family_of_the_streaming_provider(self) -> None:
        """The family of the context's provider decides, as in a real turn."""
        registry, runs = search_registry(providers=[ApiFamily.NOVELAI])
        assert [spec.name for spec in registry.specs(NOVELAI)] == ["web_search"]
        assert (await execute(registry, "web_search", {"query": "x"}, provider=NOVELAI)).success
        assert runs == [{"query": "x"}]


class TestSchema:
    async def test_wrong_type_names_argument_and_rule(self) -> None:
        """The failure gives the argument's JSON path and the rule it broke."""
        registry, runs = search_registry()
        result = await execute(registry, "web_search", {"query": "x", "limit": "ten"})
        assert result.error == (
            'invalid arguments for tool "web_search": $.limit: must be of type integer (rule: type)'
        )
        assert runs == []

    async def test_missing_argument_is_named(self) -> None:
        """A `required` failure names the missing argument, not its parent object."""
        registry, _ = search_registry()
        result = await execute(registry, "web_search", {"limit": 1})
        assert result.error == (
            'invalid arguments for tool "web_search": $.query: is required (rule: required)'
        )

    async def test_absent_arguments_are_checked_as_empty_object(self) -> None:
        """No arguments at all are validated as `{}`."""
        registry, _ = search_registry()
        result = await execute(registry, "web_search", None)
        assert result.error is not None and "$.query: is required" in result.error

    async def test_absent_arguments_run_as_empty_object(self) -> None:
        """A tool without required arguments runs with `{}` when none were sent."""
        registry = ToolRegistry()
        seen: list[JsonObject] = []

        @registry.tool(name="ping")
        async def ping(args: JsonObject, call: ToolCall) -> None:
            seen.append(args)

        assert await execute(registry, "ping", None) == ToolResult(success=True)
        assert seen == [{}]

    async def test_every_broken_rule_is_listed(self) -> None:
        """Several problems are reported together, each with its path."""
        registry, _ = search_registry()
        result = await execute(registry, "web_search", {"query": "", "limit": 1.5})
        assert result.error == (
            'invalid arguments for tool "web_search": '
            "$.limit: must be of type integer (rule: type); "
            "$.query: must be at least 1 character long (rule: minLength)"
        )

    async def test_nested_argument_path(self) -> None:
        """Paths go into nested objects and arrays."""
        registry = ToolRegistry()
        schema = {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "object", "required": ["id"]}}
            },
        }
        registry.register(_noop, name="bulk", parameters=schema)
        result = await execute(registry, "bulk", {"items": [{"id": 1}, {}]})
        assert result.error == (
            'invalid arguments for tool "bulk": $.items[1].id: is required (rule: required)'
        )


class TestRegistration:
    def test_invalid_schema_names_tool_and_keyword(self) -> None:
        """A schema that breaks the meta-schema is refused at registration."""
        bad = {"type": "object", "properties": {"query": {"type": "strin"}}}
        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(_noop, name="web_search", parameters=bad)
        assert caught.value.tool == "web_search"
        assert caught.value.where == "parameters.properties.query.type"
        assert str(caught.value) == (
            'tool "web_search": parameters.properties.query.type: '
            "'strin' is not valid under any of the given schemas (rule: anyOf)"
        )

    def test_non_object_schema_is_refused(self) -> None:
        """Parameters must be an object schema."""
        with pytest.raises(ToolSchemaError) as caught:
            ToolRegistry().register(_noop, name="t", parameters={"type": "string"})
        assert str(caught.value) == (
            'tool "t": parameters: "type" is "string", '
            'but parameters must be an object schema ("type": "object")'
        )

    def test_duplicate_name_is_refused(self) -> None:
        """Two tools cannot share a name."""
        registry = ToolRegistry()
        registry.register(_noop, name="t")
        with pytest.raises(ToolSchemaError, match=r'^tool "t": name: is already registered$'):
            registry.register(_noop, name="t")

    def test_name_providers_refuse_is_refused(self) -> None:
        """A name with a space is not a valid function name for providers."""
        with pytest.raises(ToolSchemaError, match=r"must be 1 to 64 letters"):
            ToolRegistry().register(_noop, name="web search")

    def test_defaults_come_from_the_function(self) -> None:
        """Name and description default to the function's name and docstring."""
        registry = ToolRegistry()
        registry.register(_noop)
        assert registry.specs(CUSTOM) == (
            ToolSpec(
                name="_noop",
                description="Do nothing.",
                parameters={"type": "object", "properties": {}},
            ),
        )

    def test_specs_follow_provider_support_in_order(self) -> None:
        """`specs` lists the tools the provider supports, in registration order."""
        registry = ToolRegistry()
        registry.register(_noop, name="b")
        registry.register(_noop, name="nai_only", providers=[ApiFamily.NOVELAI])
        registry.register(_noop, name="a")
        assert [spec.name for spec in registry.specs(CUSTOM)] == ["b", "a"]
        assert [spec.name for spec in registry.specs(NOVELAI)] == ["b", "nai_only", "a"]

    def test_specs_include_a_tool_registered_after_they_were_asked(self) -> None:
        """A tool registered after `specs` was answered is in the next answer for that provider."""
        registry = ToolRegistry()
        registry.register(_noop, name="a")
        assert [spec.name for spec in registry.specs(CUSTOM)] == ["a"]
        registry.register(_noop, name="b")
        assert [spec.name for spec in registry.specs(CUSTOM)] == ["a", "b"]


class TestRunning:
    async def test_plain_dict_return_is_success_data(self) -> None:
        """A dict returned by the tool is its data."""
        registry, runs = search_registry()
        result = await execute(registry, "web_search", {"query": "cats"})
        assert result == ToolResult(success=True, data={"hits": 3})
        assert runs == [{"query": "cats"}]

    async def test_tool_result_is_returned_as_is(self) -> None:
        """A ToolResult, failure included, is passed through unchanged."""
        registry = ToolRegistry()
        answer = ToolResult(success=False, error="upstream 503", end_turn=True)

        @registry.tool(name="t")
        async def t(args: JsonObject, call: ToolCall) -> ToolResult:
            return answer

        assert await execute(registry, "t") is answer

    async def test_exception_becomes_failure_with_type_and_message(self) -> None:
        """What a tool raises is a failure the model reads, never a crash."""
        registry = ToolRegistry()

        @registry.tool(name="boom")
        async def boom(args: JsonObject, call: ToolCall) -> None:
            raise LookupError("no such city")

        result = await execute(registry, "boom")
        assert result == ToolResult(
            success=False, error='tool "boom" raised LookupError: no such city'
        )

    async def test_wrong_return_type_is_a_failure(self) -> None:
        """A tool returning something else than a result, a dict or None fails clearly."""
        registry = ToolRegistry()

        @registry.tool(name="t")
        async def t(args: JsonObject, call: ToolCall) -> Any:
            return ["not", "a", "dict"]

        result = await execute(registry, "t")
        assert result.error == 'tool "t" returned a list, expected a ToolResult, a dict or None'

    async def test_cancellation_propagates(self) -> None:
        """Cancelling `execute` cancels the tool; it is not turned into a result."""
        registry = ToolRegistry()

        @registry.tool(name="hang")
        async def hang(args: JsonObject, call: ToolCall) -> None:
            await anyio.sleep_forever()

        with anyio.move_on_after(0.01) as scope:
            await execute(registry, "hang")
        assert scope.cancelled_caught
        assert registry.recent()[-1].error == "cancelled"

    async def test_tool_sees_the_kill_signal(self) -> None:
        """The turn's kill signal reaches the tool, which can end its own I/O on it."""
        registry = ToolRegistry()
        kill = anyio.Event()

        @registry.tool(name="wait_for_kill")
        async def wait_for_kill(args: JsonObject, call: ToolCall) -> JsonObject:
            await call.killed.wait()
            return {"stopped": True}

        async with anyio.create_task_group() as group:
            call = FunctionCall(name="wait_for_kill", args={})
            group.start_soon(_set_soon, kill)
            result = await registry.execute(call, context(), invocation(kill))
        assert result.data == {"stopped": True}

    async def test_tool_sends_progress_notices_through_the_invocation(self) -> None:
        """`call.notify` is the interpreter's progress notice."""
        registry = ToolRegistry()

        @registry.tool(name="slow")
        async def slow(args: JsonObject, call: ToolCall) -> None:
            await call.notify("Still searching...")

        notices = Notices()
        await registry.execute(
            FunctionCall(name="slow"),
            context(),
            ToolInvocation(killed=anyio.Event(), notify=notices),
        )
        assert notices.sent == ["Still searching..."]

    async def test_tool_receives_its_context(self) -> None:
        """The tool is told its name and the turn's context."""
        registry = ToolRegistry()
        seen: list[ToolCall] = []

        @registry.tool(name="t")
        async def t(args: JsonObject, call: ToolCall) -> None:
            seen.append(call)

        await execute(registry, "t", locale="fr")
        assert (seen[0].name, seen[0].context.locale) == ("t", "fr")


class TestFollowUp:
    def test_flag(self) -> None:
        """A flag answers for every provider and server."""
        registry, _ = search_registry(requires_follow_up=True)
        assert registry.requires_follow_up("web_search", NOVELAI, None)

    def test_default_is_false(self) -> None:
        """Without a flag, a tool does not require follow-up."""
        registry, _ = search_registry()
        assert not registry.requires_follow_up("web_search", NOVELAI, "mcp")

    def test_predicate_gets_provider_and_server(self) -> None:
        """A predicate decides per provider and server."""
        registry, _ = search_registry(requires_follow_up=lambda p, server: server == "mcp")
        assert registry.requires_follow_up("web_search", NOVELAI, "mcp")
        assert not registry.requires_follow_up("web_search", NOVELAI, None)

    def test_unknown_tool_does_not_require_follow_up(self) -> None:
        """An unknown tool is answered, not an error."""
        assert not ToolRegistry().requires_follow_up("nope", CUSTOM, None)


class TestSecrets:
    def test_write_only_parameters_are_redacted_at_any_depth(self) -> None:
        """`writeOnly` values are replaced in objects and arrays; others are kept."""
        registry = ToolRegistry()
        registry.register(_noop, name="login", parameters=LOGIN)
        args = {
            "user": "ana",
            "password": "hunter2",
            "account": {"token": "t0k", "id": 3},
            "keys": ["k1", "k2"],
        }
        assert registry.redact("login", args) == {
            "user": "ana",
            "password": REDACTED,
            "account": {"token": REDACTED, "id": 3},
            "keys": [REDACTED, REDACTED],
        }
        assert args["password"] == "hunter2"

    @pytest.mark.parametrize(
        ("parameters", "args", "shown"),
        [
            (
                {"properties": {"a": {"properties": {"s": {"writeOnly": True}}}}},
                {"a": {"s": "x", "t": 1}},
                {"a": {"s": REDACTED, "t": 1}},
            ),
            ({"additionalProperties": {"writeOnly": True}}, {"k": "x"}, {"k": REDACTED}),
            (
                {"properties": {"l": {"items": {"properties": {"s": {"writeOnly": True}}}}}},
                {"l": [{"s": "x"}]},
                {"l": [{"s": REDACTED}]},
            ),
            (
                {"additionalProperties": {"items": {"writeOnly": True}}},
                {"k": ["x", "y"]},
                {"k": [REDACTED, REDACTED]},
            ),
        ],
    )
    def test_a_single_deep_secret_is_redacted(
        self, parameters: JsonObject, args: JsonObject, shown: JsonObject
    ) -> None:
        """A schema whose only `writeOnly` sits deep (properties, extras, items) redacts it."""
        registry = ToolRegistry()
        registry.register(_noop, name="t", parameters={"type": "object", **parameters})
        assert registry.redact("t", args) == shown

    def test_unknown_tool_and_absent_args_pass_through(self) -> None:
        """Nothing to redact without a schema or without arguments."""
        registry = ToolRegistry()
        registry.register(_noop, name="login", parameters=LOGIN)
        assert registry.redact("other", {"password": "x"}) == {"password": "x"}
        assert registry.redact("login", None) is None

    async def test_recent_executions_are_redacted(self) -> None:
        """The ring never holds a secret."""
        registry = ToolRegistry()
        registry.register(_noop, name="login", parameters=LOGIN)
        await execute(registry, "login", {"password": "hunter2"})
        assert registry.recent()[-1].args == {"password": REDACTED}


class TestRecent:
    async def test_records_success_and_refusal(self) -> None:
        """Each call is recorded: whether its code ran, how it ended."""
        registry, _ = search_registry()
        await execute(registry, "web_search", {"query": "x"})
        await execute(registry, "web_search", {})
        ran, refused = registry.recent()
        assert (ran.tool, ran.args, ran.ran, ran.success, ran.error) == (
            "web_search", {"query": "x"}, True, True, None,
        )  # fmt: skip
        assert (refused.ran, refused.success) == (False, False)
        assert refused.error is not None and "is required" in refused.error

    async def test_ring_keeps_the_last_thousand(self) -> None:
        """After 1001 calls the oldest is gone and 1000 remain, oldest first."""
        registry, _ = search_registry()
        for index in range(RING_SIZE + 1):
            await execute(registry, "web_search", {"query": str(index)})
        recent = registry.recent()
        assert len(recent) == RING_SIZE == 1000
        assert [r.args for r in (recent[0], recent[-1])] == [{"query": "1"}, {"query": "1000"}]

    async def test_duration_is_measured_on_the_anyio_clock(self) -> None:
        """The duration is a non-negative number of seconds."""
        registry, _ = search_registry()
        await execute(registry, "web_search", {"query": "x"})
        (record,) = registry.recent()
        assert isinstance(record, ToolExecution) and record.duration >= 0


async def _noop(args: JsonObject, call: ToolCall) -> None:
    """Do nothing."""


async def _set_soon(event: anyio.Event) -> None:
    await anyio.sleep(0)
    event.set()
