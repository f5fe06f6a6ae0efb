"""Where an MCP server is: a command the source starts (stdio) or a URL (streamable HTTP).

`open_transport` opens the stream pair the `mcp` package's session runs on.
The stdio transport owns the subprocess: closing it closes the server's stdin,
waits, then terminates the whole process group (the `mcp` package's shutdown,
shielded and bounded), so no process outlives the source.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeAlias

import attrs
import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=None)
"""30 s to connect, write and get a pooled connection; no read timeout.

A call's deadline is the loop's per-tool timeout, however long it is set (a
read timeout, the `mcp` package's 300 s, would end a longer call first); a
server that stops answering is found by the ping after the cancelled call.
"""


@attrs.frozen(kw_only=True)
class StdioServer:
    """A server run as a subprocess speaking MCP on its stdin and stdout."""

    command: str
    """The executable (looked up on `PATH`)."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Variables added to the few the `mcp` package passes on (`HOME`, `PATH`, ...)."""
    cwd: str | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


@attrs.frozen(kw_only=True)
class HttpServer:
    """A server reached over MCP's streamable HTTP transport."""

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)
    """Sent with every request (an `Authorization` header, for one)."""

    def describe(self) -> str:
        return self.url


McpServer: TypeAlias = StdioServer | HttpServer


@contextlib.asynccontextmanager
async def open_transport(server: McpServer) -> AsyncIterator[TransportStreams]:
    """The server's message streams; a stdio server is started here and stopped on exit."""
    if isinstance(server, StdioServer):
        parameters = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=None if server.env is None else dict(server.env),
            cwd=server.cwd,
        )
        async with stdio_client(parameters) as streams:
            yield streams
        return
    client: Any = httpx2.AsyncClient(headers=dict(server.headers), timeout=HTTP_TIMEOUT)
    async with client, streamable_http_client(server.url, http_client=client) as streams:
        yield streams
