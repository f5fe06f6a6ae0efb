"""`mcp-server-time` (PyPI, stdio) as a tool source: registration, calls, gates, closing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.mcp.conftest import CONTEXT, TIME_SERVER, call, children
from toolloop.effects.mcp import McpToolSource
from toolloop.effects.registry import ToolRegistry
from toolloop.states import ApiFamily, ProviderDescriptor

pytestmark = pytest.mark.anyio

NOVELAI = ProviderDescriptor(name="nai", api_family=ApiFamily.NOVELAI)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One backend (these tests are about MCP; the kill tests run on both), for the module:
    the shared source below lives as long."""
    return "asyncio"


@pytest.fixture(scope="module")
async def time_tools() -> AsyncIterator[McpToolSource]:
    """One source named `time`, shared by the tests that only read and call it."""
    async with McpToolSource(ToolRegistry(), TIME_SERVER, name="time") as source:
        yield source


class TestRegistration:
    """What the registry holds while the source is open."""

    async def test_the_tools_are_registered_under_the_prefix_with_the_servers_schema(
        self, time_tools: McpToolSource
    ) -> None:
        """Each tool is `time_<name>`, described, with the server's inputSchema as parameters."""
        specs = {spec.name: spec for spec in time_tools.registry.specs(NOVELAI)}
        assert sorted(specs) == ["time_convert_time", "time_get_current_time"]
        offered = time_tools.offered["time_get_current_time"]
        spec = specs["time_get_current_time"]
        assert spec.parameters == offered.input_schema
        assert spec.parameters["required"] == ["timezone"]
        assert spec.description == "Get current time in a specific timezone"

    async def test_the_allowlist_registers_only_the_named_tools(self) -> None:
        """`tools=` names the server's own tools; the others never reach the registry."""
        registry = ToolRegistry()
        async with McpToolSource(registry, TIME_SERVER, name="t", tools={"convert_time"}):
            assert [spec.name for spec in registry.specs(NOVELAI)] == ["t_convert_time"]

    async def test_two_servers_with_their_own_prefixes_do_not_collide(self) -> None:
        """The same server twice, named apart: four tools, each run by its own server."""
        registry = ToolRegistry()
        async with (
            McpToolSource(registry, TIME_SERVER, name="a"),
            McpToolSource(registry, TIME_SERVER, name="b"),
        ):
            assert len(registry.specs(NOVELAI)) == 4
            for name in ("a_get_current_time", "b_get_current_time"):
                result = await call(registry, name, {"timezone": "Etc/UTC"})
                assert result.success and result.data["timezone"] == "Etc/UTC"

    async def test_a_tool_whose_name_is_taken_is_left_out_and_named_in_refused(self) -> None:
        """A bot's own `t_convert_time` stays; the server's is refused, with the reason."""
        registry = ToolRegistry()

        async def convert_time() -> dict[str, str]:
            """The bot's own."""
            return {"result": "mine"}

        registry.register(convert_time, name="t_convert_time")
        async with McpToolSource(registry, TIME_SERVER, name="t") as source:
            assert list(source.offered) == ["t_get_current_time"]
            assert "already registered" in source.refused["t_convert_time"]
            assert (await call(registry, "t_convert_time", {})).data == {"result": "mine"}

    async def test_closing_unregisters_the_tools_and_stops_the_server(self) -> None:
        """After the block: no tool of the server in the registry, no child process left."""
        registry = ToolRegistry()
        before = children()
        async with McpToolSource(registry, TIME_SERVER, name="time"):
            assert children() - before
        assert registry.specs(NOVELAI) == ()
        assert children() == before


class TestFollowUp:
    """SPEC 7: a server's result is to be presented, unless the bot says otherwise."""

    async def test_follow_up_is_required_by_default(self, time_tools: McpToolSource) -> None:
        assert time_tools.registry.requires_follow_up("time_get_current_time", NOVELAI, None)

    async def test_a_follow_up_rule_is_asked_with_the_servers_name(self) -> None:
        """A callable gets the provider and the source's `name` as the server."""
        asked: list[tuple[str, str | None]] = []

        def rule(provider: ProviderDescriptor, server: str | None) -> bool:
            asked.append((provider.name, server))
            return False

        registry = ToolRegistry()
        async with McpToolSource(registry, TIME_SERVER, name="clock", requires_follow_up=rule):
            assert not registry.requires_follow_up("clock_convert_time", NOVELAI, "other")
        assert asked == [("nai", "clock")]


class TestCalls:
    """What a call of the server's tools gives the model."""

    async def test_a_call_gives_the_servers_structured_content(
        self, time_tools: McpToolSource
    ) -> None:
        args = {"timezone": "Asia/Tokyo"}
        result = await call(time_tools.registry, "time_get_current_time", args)
        assert result.success
        assert sorted(result.data) == ["datetime", "day_of_week", "is_dst", "timezone"]
        assert result.data["datetime"].endswith("+09:00")

    async def test_an_is_error_result_is_a_failure_with_the_servers_text(
        self, time_tools: McpToolSource
    ) -> None:
        args = {"timezone": "Nowhere/Zone"}
        result = await call(time_tools.registry, "time_get_current_time", args)
        assert not result.success
        assert result.error is not None
        assert result.error.startswith('MCP tool "get_current_time" of server "time" failed: ')
        assert "Invalid timezone" in result.error

    async def test_arguments_that_break_the_servers_schema_are_refused_before_the_call(
        self, time_tools: McpToolSource
    ) -> None:
        """The registry's schema gate uses the server's inputSchema: the error names the rule."""
        result = await call(time_tools.registry, "time_get_current_time", {})
        recent = time_tools.registry.recent()[-1]
        assert result.error == (
            'invalid arguments for tool "time_get_current_time": '
            "$.timezone: is required (rule: required)"
        )
        assert (recent.tool, recent.ran) == ("time_get_current_time", False)


def test_the_context_is_a_plain_turn() -> None:
    """The calls above run with a context no gate refuses (a guard on the fixture)."""
    assert not CONTEXT.suppress_progress_notices and Path(TIME_SERVER.command).exists()
