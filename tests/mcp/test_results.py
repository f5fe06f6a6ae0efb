"""An MCP `CallToolResult` as the model reads it: structured content, text, the rest described."""

from __future__ import annotations

import base64

import mcp_types as types

from toolloop.effects.mcp.results import tool_result
from toolloop.states import ToolResult

PNG = base64.b64encode(b"\x89PNG" + bytes(96)).decode()


def result(*content: types.ContentBlock, **fields: object) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), **fields)  # type: ignore[arg-type]


class TestToolResult:
    def test_text_blocks_are_the_data_in_order(self) -> None:
        answer = result(types.TextContent(text="one"), types.TextContent(text="two"))
        assert tool_result("s", "t", answer) == ToolResult(success=True, data="one\ntwo")

    def test_structured_content_is_the_data_when_the_server_gives_it(self) -> None:
        answer = result(types.TextContent(text='{"a": 1}'), structured_content={"a": 1})
        assert tool_result("s", "t", answer) == ToolResult(success=True, data={"a": 1})

    def test_is_error_is_a_failure_naming_the_tool_and_the_server(self) -> None:
        answer = result(types.TextContent(text="no such city"), is_error=True)
        assert tool_result("weather", "forecast", answer) == ToolResult(
            success=False, error='MCP tool "forecast" of server "weather" failed: no such city'
        )

    def test_an_image_is_described_with_its_type_and_size(self) -> None:
        answer = result(
            types.TextContent(text="here:"), types.ImageContent(data=PNG, mime_type="image/png")
        )
        assert tool_result("s", "t", answer).data == "here:\n[image: image/png, 100 bytes]"

    def test_audio_that_is_not_base64_is_described_as_such(self) -> None:
        answer = result(types.AudioContent(data="%%%", mime_type="audio/wav"))
        assert tool_result("s", "t", answer).data == (
            "[audio: audio/wav, 3 characters that are not base64]"
        )

    def test_an_embedded_text_resource_keeps_its_text_under_its_uri(self) -> None:
        resource = types.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="x")
        answer = result(types.EmbeddedResource(resource=resource))
        assert tool_result("s", "t", answer).data == "[resource file:///a.txt, text/plain]\nx"

    def test_an_embedded_blob_resource_is_described_with_its_size(self) -> None:
        resource = types.BlobResourceContents(uri="file:///a.png", blob=PNG)
        answer = result(types.EmbeddedResource(resource=resource))
        assert tool_result("s", "t", answer).data == "[resource file:///a.png, 100 bytes]"

    def test_a_resource_link_is_named_with_its_uri_and_description(self) -> None:
        link = types.ResourceLink(name="notes", uri="file:///notes.md", description="the notes")
        answer = result(link)
        assert tool_result("s", "t", answer).data == (
            "[resource link notes at file:///notes.md: the notes]"
        )
