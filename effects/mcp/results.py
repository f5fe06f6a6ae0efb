"""What an MCP tool result becomes for the model: a `ToolResult`.

Structured content, when the server gives it, is the data; otherwise the
content blocks in order, text as it is and everything else described in one
line (an image's type and size, a resource's URI), so nothing the server sent
goes unmentioned. `isError` is a failure whose error is that same text. Data
longer than the registry's bound is cut there, as any tool's.
"""

from __future__ import annotations

import base64
import binascii

import mcp_types as types

from toolloop.states import ToolResult


def tool_result(server: str, tool: str, result: types.CallToolResult) -> ToolResult:
    """The loop's result for one `tools/call` answer of `server`'s `tool`."""
    text = "\n".join(describe(block) for block in result.content)
    if result.is_error:
        return ToolResult(
            success=False, error=f'MCP tool "{tool}" of server "{server}" failed: {text}'
        )
    if result.structured_content is not None:
        return ToolResult(success=True, data=result.structured_content)
    return ToolResult(success=True, data=text)


def describe(block: types.ContentBlock) -> str:
    """One content block as text: text verbatim, anything else named with what it holds."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, types.ResourceLink):
        about = f": {block.description}" if block.description else ""
        return f"[resource link {block.name} at {block.uri}{about}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        kind = f", {resource.mime_type}" if resource.mime_type else ""
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}{kind}]\n{resource.text}"
        return f"[resource {resource.uri}{kind}, {_size(resource.blob)}]"
    return f"[{block.type} content]"


def _size(data: str) -> str:
    """The decoded size of base64 `data`, or that it is not base64."""
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} characters that are not base64"
