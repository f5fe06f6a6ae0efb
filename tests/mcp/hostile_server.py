"""The tests' own MCP server (the `mcp` package's MCPServer, once FastMCP) for the hostile cases.

Run as `python -m tests.mcp.hostile_server [--garbage]` (stdio). What it saw
is appended, one line each, to the file named by `HOSTILE_LOG`: `started PID`
when it starts, `started hang` when a `hang` call begins and `cancelled hang`
when one was cancelled (the client's `notifications/cancelled` arrived).
`--garbage` prints lines that are not JSON-RPC on stdout before it serves.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, WithJsonSchema

server = MCPServer("hostile")
STDOUT = 1
"""The protocol's stream (while it serves, the `mcp` package sends `print` to stderr)."""


def _note(line: str) -> None:
    with open(os.environ["HOSTILE_LOG"], "a", encoding="utf-8") as log:
        log.write(line + "\n")


@server.tool()
async def hang(seconds: float) -> str:
    """Waits `seconds` (past any timeout), noting its start and a cancellation."""
    _note("started hang")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _note("cancelled hang")
        raise
    return "woke up"


@server.tool()
async def block(seconds: float) -> str:
    """Blocks the server's event loop for `seconds`: it answers nothing, cancellation included."""
    time.sleep(seconds)
    return "unblocked"


@server.tool()
def die() -> str:
    """Exits the process in the middle of the call."""
    os._exit(3)


@server.tool()
def huge(characters: int) -> str:
    """A text result of `characters` characters."""
    return "x" * characters


@server.tool()
def pid() -> int:
    """The server's process id (a restart shows as a new one)."""
    return os.getpid()


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Reports `count` progress steps."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step}")
    return f"{count} steps"


class Point(BaseModel):
    x: int
    y: int


@server.tool()
def distance(start: Point, end: Point) -> float:
    """Manhattan distance; its schema refers to `Point` through `$ref`."""
    return abs(start.x - end.x) + abs(start.y - end.y)


@server.tool()
def lookahead(
    text: Annotated[str, WithJsonSchema({"type": "string", "pattern": "^(?=a)a+$"})],
) -> str:
    """A pattern with a lookahead, which RE2 (the registry's regex engine) refuses."""
    return text


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client its tool list changed."""

    def grown() -> str:
        """A tool added while the client was connected."""
        return "grown"

    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()
    return "grew"


if __name__ == "__main__":
    _note(f"started {os.getpid()}")
    if "--garbage" in sys.argv:
        os.write(STDOUT, b"garbage before the handshake\n{not json either\n")
    server.run("stdio")
