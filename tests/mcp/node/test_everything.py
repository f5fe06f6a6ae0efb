"""The reference server (`@modelcontextprotocol/server-everything`) on stdio and streamable HTTP."""

from __future__ import annotations

import anyio
import pytest

from tests.mcp.conftest import call
from tests.mcp.node.conftest import HttpEverything
from toolloop.effects.mcp import HttpServer, McpServer, McpToolSource
from toolloop.effects.registry import ToolRegistry

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
