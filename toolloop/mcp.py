"""`toolloop.mcp`: MCP servers as a tool source (extra `toolloop-engine[mcp]`; docs/mcp.md)."""

from toolloop.effects.mcp import (
    HttpServer,
    McpServer,
    McpServerError,
    McpToolSource,
    StdioServer,
)

__all__ = ["HttpServer", "McpServer", "McpServerError", "McpToolSource", "StdioServer"]
