"""The reference server (`@modelcontextprotocol/server-everything`) on stdio and streamable HTTP."""

from __future__ import annotations

import anyio
import pytest

from tests.effects.harness import Host, ScriptProvider, calling
from tests.mcp.conftest import call, children, open_descriptors
from tests.mcp.node.conftest import HttpEverything
from toolloop.effects.mcp import HttpServer, McpServer, McpToolSource
from toolloop.effects.registry import ToolRegistry
from toolloop.engine.events import ToolSettled
from toolloop.states import ToolResult, TurnStatus

pytestmark = pytest.mark.anyio

LONG = "e_trigger-long-running-operation"


async def test_a_long_running_call_reports_its_progress_as_notices(everything: McpServer) -> None:
    registry = ToolRegistry()
    notices: list[str] = []
    async with McpToolSource(registry, everything, name="e"):
        result = await call(registry, LONG, {"duration": 0.2, "steps": 2}, notices)
    assert result.success
    assert result.data.startswith("Long running operation completed.")
    assert notices == [f"{LONG}: 1/2", f"{LONG}: 2/2"]


async def test_a_call_ended_by_the_loop_returns_at_once_and_the_next_call_works(
    everything: McpServer,
) -> None:
    """A 60 s operation cancelled after 0.5 s (as a timeout does): then `echo` answers."""
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e"):
        with anyio.move_on_after(0.5) as scope:
            await call(registry, LONG, {"duration": 60, "steps": 2})
        echoed = await call(registry, "e_echo", {"message": "after"})
    assert scope.cancelled_caught
    assert echoed.data == "Echo: after"


async def test_an_image_is_described_not_dropped(everything: McpServer) -> None:
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e"):
        result = await call(registry, "e_get-tiny-image", {})
    assert result.success
    lines = result.data.splitlines()
    assert lines[0] == "Here's the image you requested:"
    assert lines[1].startswith("[image: image/png, ") and lines[1].endswith(" bytes]")


async def test_structured_content_is_the_data(everything: McpServer) -> None:
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e"):
        result = await call(registry, "e_get-structured-content", {"location": "Chicago"})
    assert sorted(result.data) == ["conditions", "humidity", "temperature"]


async def test_an_embedded_resource_keeps_its_uri_and_text(everything: McpServer) -> None:
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e"):
        result = await call(
            registry, "e_get-resource-reference", {"resourceType": "Text", "resourceId": 1}
        )
    assert "[resource demo://resource/dynamic/text/1, text/plain]\nResource 1: " in result.data


async def test_a_tool_error_is_a_failure_with_the_servers_message(everything: McpServer) -> None:
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e"):
        result = await call(
            registry, "e_gzip-file-as-resource", {"name": "x.gz", "data": "ftp://nowhere"}
        )
    assert not result.success
    assert result.error is not None
    assert result.error.startswith(
        'MCP tool "gzip-file-as-resource" of server "e" failed: Error processing file'
    )


async def test_the_tools_added_after_the_handshake_are_registered(everything: McpServer) -> None:
    """The server adds `simulate-research-query` once initialized and sends `list_changed`:
    whether or not the first listing saw it, the registry ends up holding it."""
    registry = ToolRegistry()
    async with McpToolSource(registry, everything, name="e") as source:
        with anyio.fail_after(30):  # a hang guard
            while "e_simulate-research-query" not in source.offered:
                await anyio.sleep(0.02)
        assert "e_echo" in source.offered


async def test_an_http_server_that_goes_away_is_reconnected_once_it_is_back(
    http_everything: HttpEverything,
) -> None:
    """While the server is gone a call fails saying so; once it listens again, calls work."""
    registry = ToolRegistry()
    server = HttpServer(url=http_everything.url)
    async with McpToolSource(registry, server, name="e", first_backoff=0.05):
        assert (await call(registry, "e_echo", {"message": "1"})).success
        http_everything.stop()
        gone = await call(registry, "e_echo", {"message": "2"})
        await anyio.to_thread.run_sync(http_everything.start)
        with anyio.fail_after(30):  # a hang guard
            while not (back := await call(registry, "e_echo", {"message": "3"})).success:
                await anyio.sleep(0.05)
    assert gone.error is not None and gone.error.startswith('MCP server "e" ')
    assert back.data == "Echo: 3"


@pytest.mark.parametrize("anyio_backend", ["trio", "asyncio"])
async def test_a_kill_during_a_call_leaves_no_task_or_descriptor(everything: McpServer) -> None:
    """A kill once the first progress notice is shown: `was killed`, and once the source is
    closed, the tasks, child processes and open descriptors are what they were before."""
    tasks, processes = len(anyio.get_running_tasks()), children()
    descriptors = open_descriptors()
    call_long = calling(LONG, {"duration": 60, "steps": 60})
    host = Host(provider=ScriptProvider(call_long))

    async def kill_at_the_first_progress() -> None:
        with anyio.fail_after(30):  # a hang guard
            while not host.channel.every_notice:
                await anyio.sleep(0.02)
        host.control.kill()

    async with (
        McpToolSource(host.registry, everything, name="e"),
        anyio.create_task_group() as group,
    ):
        group.start_soon(kill_at_the_first_progress)
        result = await host.run()
    assert result.status is TurnStatus.STOPPED_BY_USER
    assert host.channel.every_notice[0].text == f"{LONG}: 1/60"
    assert [event.result for _, event in host.events if isinstance(event, ToolSettled)] == [
        ToolResult(success=False, error=f"Tool {LONG} was killed")
    ]
    assert len(anyio.get_running_tasks()) == tasks
    assert children() == processes
    assert open_descriptors() == descriptors
