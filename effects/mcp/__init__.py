"""MCP servers as a tool source of the registry (`toolloop-engine[mcp]`, the `mcp` package 2.x).

See docs/mcp.md: `McpToolSource` registers a server's tools, over stdio
(`StdioServer`, a subprocess it owns) or streamable HTTP (`HttpServer`).
"""

from toolloop.effects.mcp.servers import HttpServer, McpServer, StdioServer
from toolloop.effects.mcp.source import McpServerError, McpToolSource

__all__ = ["HttpServer", "McpServer", "McpServerError", "McpToolSource", "StdioServer"]
