"""The tests' own server at its worst: hangs, blocks, dies, prints garbage, floods.

The deadline tests run the whole loop (`run_tool_loop`, a scripted model) on
the real clock, with the tool timeout made short through `LoopConfig`.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import anyio
import pytest

from tests.effects.harness import Host, ScriptProvider, calling, completed
from tests.mcp.conftest import Hostile, call, children, open_descriptors
from toolloop.effects.mcp import HttpServer, McpServerError, McpToolSource, StdioServer
from toolloop.effects.registry import ToolRegistry
from toolloop.effects.registry.tool_registry import MAX_RESULT_CHARS
from toolloop.engine.events import ToolSettled
from toolloop.states import LoopConfig, ToolResult, TurnStatus

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """One backend, except where a test names both."""
    return "asyncio"


def settled(host: Host) -> list[ToolResult]:
    return [event.result for _, event in host.events if isinstance(event, ToolSettled)]


async def pid(registry: ToolRegistry) -> int:
    result = await call(registry, "h_pid", {})
    assert result.success, result.error
    return int(result.data["result"])


async def until_up(registry: ToolRegistry) -> int:
    """The server's pid once a restarted server answers (a hang guard, not a timing check)."""
    with anyio.fail_after(30):
        while not (result := await call(registry, "h_pid", {})).success:
            await anyio.sleep(0.05)
    return int(result.data["result"])


class TestDeadlines:
    """The loop's per-tool timeout and kill reach the server."""

    async def test_a_call_past_the_timeout_sends_the_cancellation_and_the_next_call_works(
        self, hostile: Hostile
    ) -> None:
        """`hang` outlives the 1 s timeout: the loop is told at once, the server sees
        `notifications/cancelled`, and the same server answers the next call."""
        host = Host(
            provider=ScriptProvider(calling("h_hang", {"seconds": 600}), completed()),
            config=LoopConfig(tool_execution_timeout_ms=1000),
        )
        source = McpToolSource(host.registry, hostile.server(), name="h", stop_grace=10)
        async with source:  # a grace no loaded machine runs out of: the server stays the same
            first = await pid(host.registry)
            result = await host.run()
            await hostile.noted("cancelled hang")
            assert await pid(host.registry) == first
        assert result.status is TurnStatus.COMPLETED
        assert settled(host) == [ToolResult(success=False, error="Tool h_hang timed out after 1 s")]

    @pytest.mark.parametrize("anyio_backend", ["trio", "asyncio"])
    async def test_a_kill_during_an_mcp_call_leaves_no_task_process_or_descriptor(
        self, hostile: Hostile
    ) -> None:
        """A kill mid-call: `was killed`, the server told; once the source is closed the
        tasks, the child processes and the open descriptors are what they were before."""
        tasks, processes = len(anyio.get_running_tasks()), children()
        descriptors = open_descriptors()
        host = Host(provider=ScriptProvider(calling("h_hang", {"seconds": 600})))

        async def kill_when_the_call_runs() -> None:
            await hostile.noted("started hang")
            host.control.kill()

        async with McpToolSource(host.registry, hostile.server(), name="h"):
            async with anyio.create_task_group() as group:
                group.start_soon(kill_when_the_call_runs)
                result = await host.run()
            await hostile.noted("cancelled hang")
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert settled(host) == [ToolResult(success=False, error="Tool h_hang was killed")]
        assert host.leftovers() == []
        assert len(anyio.get_running_tasks()) == tasks
        assert children() == processes
        assert open_descriptors() == descriptors

    async def test_a_server_that_ignores_the_cancellation_is_terminated_and_restarted(
        self, hostile: Hostile
    ) -> None:
        """`block` stalls the server's own loop: no ping answer within `stop_grace`, so the
        process is terminated and a fresh one answers later calls."""
        registry = ToolRegistry()
        async with McpToolSource(registry, hostile.server(), name="h", stop_grace=0.5):
            first = await pid(registry)
            with anyio.move_on_after(0.5):
                await call(registry, "h_block", {"seconds": 600})
            second = await until_up(registry)
            assert first not in children()
        assert second != first


class TestRestarts:
    """A server that dies is restarted, within bounds; calls meanwhile say why they fail."""

    async def test_a_server_killed_mid_call_is_a_clear_failure_and_then_restarted(
        self, hostile: Hostile
    ) -> None:
        registry = ToolRegistry()
        async with McpToolSource(registry, hostile.server(), name="h") as source:
            first = await pid(registry)
            died = await call(registry, "h_die", {})
            meanwhile = await call(registry, "h_pid", {})
            second = await until_up(registry)
            assert "h_die" in source.offered
        assert died == ToolResult(
            success=False,
            error='MCP server "h" closed the connection during the call to "die"; '
            "it is being restarted",
        )
        assert meanwhile.error is not None
        assert meanwhile.error.startswith('MCP server "h" is restarting')
        assert meanwhile.error.endswith("; try again later")
        assert second != first

    async def test_restarts_are_bounded(self, hostile: Hostile) -> None:
        """A server that cannot start again: two restarts with backoff, then it stays down."""
        registry = ToolRegistry()
        server = hostile.once()
        async with McpToolSource(
            registry, server, name="h", max_restarts=2, first_backoff=0.01
        ) as source:
            await call(registry, "h_die", {})
            with anyio.fail_after(30):  # a hang guard
                while "stopped" not in ((await call(registry, "h_pid", {})).error or ""):
                    await anyio.sleep(0.05)
            assert "h_pid" in source.offered
            final = await call(registry, "h_pid", {})
        assert final.error == ('MCP server "h" stopped after 2 restarts in a row; try again later')
        assert len([line for line in hostile.lines() if line.startswith("started ")]) == 1


class TestStartup:
    """`async with` fails with one clear error when the server cannot be used."""

    async def test_a_command_that_does_not_exist_raises_oserror(self) -> None:
        with pytest.raises(FileNotFoundError):
            async with McpToolSource(ToolRegistry(), StdioServer(command="no-such-mcp"), name="x"):
                pass

    async def test_a_command_that_does_not_speak_mcp_raises_naming_the_handshake(self) -> None:
        """`sleep` never answers the handshake: `connect_timeout` ends the wait."""
        server = StdioServer(command="sleep", args=("600",))
        with pytest.raises(McpServerError) as raised:
            async with McpToolSource(ToolRegistry(), server, name="x", connect_timeout=0.5):
                pass
        assert str(raised.value) == (
            'MCP server "x" (sleep 600) did not answer the MCP handshake within 0.5 s'
        )

    async def test_an_http_server_that_is_not_there_raises_naming_the_url(self) -> None:
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
        with pytest.raises(McpServerError) as raised:
            async with McpToolSource(ToolRegistry(), HttpServer(url=url), name="x"):
                pass
        assert str(raised.value) == (
            f'MCP server "x" ({url}) could not be reached: '
            "ConnectError: All connection attempts failed"
        )

    async def test_a_command_that_exits_raises_naming_the_handshake(self) -> None:
        server = StdioServer(command="true")
        with pytest.raises(McpServerError) as raised:
            async with McpToolSource(ToolRegistry(), server, name="x"):
                pass
        assert str(raised.value) == (
            'MCP server "x" (true) closed the connection during the MCP handshake: '
            "is it an MCP server?"
        )


class TestOutput:
    """What the server sends beyond a plain answer."""

    async def test_garbage_on_stdout_is_logged_and_the_server_still_works(
        self, hostile: Hostile, caplog: pytest.LogCaptureFixture
    ) -> None:
        registry = ToolRegistry()
        with caplog.at_level(logging.WARNING, logger="toolloop.effects.mcp"):
            async with McpToolSource(registry, hostile.server("--garbage"), name="h"):
                assert (await call(registry, "h_huge", {"characters": 3})).success
        not_mcp = 'MCP server "h" sent what is not MCP: '
        warned = [r.getMessage() for r in caplog.records if not_mcp in r.getMessage()]
        assert len(warned) == 2
        assert "garbage before the handshake" in warned[0]
        assert "{not json either" in warned[1]

    async def test_a_huge_result_is_cut_as_other_tool_data(self, hostile: Hostile) -> None:
        registry = ToolRegistry()
        async with McpToolSource(registry, hostile.server(), name="h"):
            result = await call(registry, "h_huge", {"characters": 3 * MAX_RESULT_CHARS})
        assert result.success
        assert len(result.data) < MAX_RESULT_CHARS + 100
        assert result.data.endswith(f"the first {MAX_RESULT_CHARS} kept]")

    async def test_progress_notifications_become_progress_notices(self, hostile: Hostile) -> None:
        registry = ToolRegistry()
        notices: list[str] = []
        async with McpToolSource(registry, hostile.server(), name="h"):
            result = await call(registry, "h_steps", {"count": 3}, notices)
        assert result.data == {"result": "3 steps"}
        assert notices == [f"h_steps: step {n} ({n}/3)" for n in (1, 2, 3)]

    async def test_tools_list_changed_registers_the_new_tool(self, hostile: Hostile) -> None:
        """`grow` adds `grown` and notifies: the source relists and registers `h_grown`."""
        registry = ToolRegistry()
        async with McpToolSource(registry, hostile.server(), name="h") as source:
            assert "h_grown" not in source.offered
            await call(registry, "h_grow", {})
            with anyio.fail_after(30):  # a hang guard
                while "h_grown" not in source.offered:
                    await anyio.sleep(0.02)
            assert (await call(registry, "h_grown", {})).data == {"result": "grown"}


class TestSchemas:
    """The server's schemas pass the registry's checks, like every tool's."""

    async def test_a_ref_is_resolved_and_a_pattern_re2_cannot_run_is_refused(
        self, hostile: Hostile, caplog: pytest.LogCaptureFixture
    ) -> None:
        """`distance` refers to `Point` by `$ref`: registered, its arguments checked through
        it. `lookahead`'s pattern needs lookaround: left out, the reason logged and kept."""
        registry = ToolRegistry()
        with caplog.at_level(logging.WARNING, logger="toolloop.effects.mcp"):
            async with McpToolSource(registry, hostile.server(), name="h") as source:
                good = {"start": {"x": 1, "y": 2}, "end": {"x": 4, "y": 0}}
                assert (await call(registry, "h_distance", good)).data == {"result": 5.0}
                bad = await call(registry, "h_distance", {"start": {"x": 1}, "end": good["end"]})
        assert bad.error == (
            'invalid arguments for tool "h_distance": $.start.y: is required (rule: required)'
        )
        assert list(source.refused) == ["h_lookahead"]
        reason = source.refused["h_lookahead"]
        assert reason.startswith('tool "h_lookahead": parameters.properties.text.pattern: ')
        assert "not supported by RE2" in reason
        assert [r.getMessage() for r in caplog.records] == [
            f'MCP server "h": tool "lookahead" left out: {reason}'
        ]

    async def test_an_allowlisted_name_the_server_does_not_offer_is_warned_about(
        self, hostile: Hostile, caplog: pytest.LogCaptureFixture
    ) -> None:
        registry = ToolRegistry()
        with caplog.at_level(logging.WARNING, logger="toolloop.effects.mcp"):
            async with McpToolSource(
                registry, hostile.server(), name="h", tools={"pid", "pdi"}
            ) as source:
                assert list(source.offered) == ["h_pid"]
        assert [r.getMessage() for r in caplog.records] == [
            'MCP server "h" offers no tool named pdi'
        ]


class TestOptions:
    """Options that could only fail later are refused when the source is made."""

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (
                {"name": "my server"},
                "McpToolSource: prefix 'my server_' must be letters, digits, '_' or '-' "
                "(it starts every tool's name); give prefix= to choose one",
            ),
            (
                {"name": "s", "connect_timeout": 0},
                "McpToolSource: connect_timeout must be more than 0, got 0",
            ),
            (
                {"name": "s", "stop_grace": -1.0},
                "McpToolSource: stop_grace must be more than 0, got -1.0",
            ),
            (
                {"name": "s", "max_restarts": -1},
                "McpToolSource: max_restarts must be 0 or more, got -1",
            ),
            (
                {"name": "s", "first_backoff": float("nan")},
                "McpToolSource: first_backoff must be 0 or more, got nan",
            ),
        ],
    )
    def test_a_bad_option_is_a_value_error_naming_it(
        self, options: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ValueError) as raised:
            McpToolSource(ToolRegistry(), StdioServer(command="x"), **options)
        assert str(raised.value) == message
