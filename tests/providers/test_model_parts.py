"""Model parts (SPEC 3, 6 step 15): what the model said comes back to it as its own turn.

Against the loopback server: every result reports the stream's visible text as
one text part, and parts handed to the next call end its request body as the
model's own `assistant` turn, so after a context restart the model knows what
it already said.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.openai_server import OpenAIServer, Reply, text_reply, tool_call_reply
from tests.providers.conftest import RecordingSink, make_provider, make_request
from toolloop.effects.ports import StreamRequest
from toolloop.states import ContextItem, StreamResult, StreamStatus

pytestmark = pytest.mark.anyio


async def run(server: OpenAIServer, *replies: Reply, request: StreamRequest) -> StreamResult:
    """Stream the request once against the scripted replies."""
    server.script(*replies)
    async with make_provider(server) as provider:
        return await provider.stream(request, RecordingSink())


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


class TestReportedParts:
    @pytest.mark.parametrize(
        ("reply", "status"),
        [
            (text_reply("Hel", "lo, ", "world. "), StreamStatus.COMPLETED),
            (tool_call_reply("get_weather", {"city": "Paris"}, text="Hello, world. "), None),
            (text_reply("Hello, world. ").disconnected_after(2), StreamStatus.ERROR),
        ],
        ids=["completed", "function_call", "error"],
    )
    async def test_the_visible_text_is_one_text_part_as_streamed(
        self, server: OpenAIServer, reply: Reply, status: StreamStatus | None
    ) -> None:
        """However the stream ends, its text (untrimmed) is its one text part."""
        result = await run(server, reply, request=make_request())
        assert result.status is (status or StreamStatus.FUNCTION_CALL)
        assert result.model_parts == (text_part("Hello, world. "),)

    @pytest.mark.parametrize(
        "reply",
        [text_reply(" \n "), tool_call_reply("get_weather", {"city": "Paris"})],
        ids=["blank-text", "call-without-text"],
    )
    async def test_a_blank_stream_has_no_parts(self, server: OpenAIServer, reply: Reply) -> None:
        """Blank or no visible text reports no part at all."""
        result = await run(server, reply, request=make_request())
        assert result.model_parts == ()


class TestPartsSentBack:
    async def test_a_restarted_streams_parts_end_the_next_request_as_the_models_turn(
        self, server: OpenAIServer
    ) -> None:
        """The parts of a stream handed to the next call reach the server as the last message."""
        first = await run(
            server,
            tool_call_reply("get_weather", {"city": "Paris"}, text="Let me look that up. "),
            request=make_request(),
        )
        enriched = (
            ContextItem(author="alice", content="Weather in Paris?"),
            ContextItem(kind="weather_page", content="Paris: 21 C"),
        )
        await run(
            server,
            text_reply("It is 21 C."),
            request=make_request(context=enriched, parts=first.model_parts),
        )
        assert server.requests[1].body["messages"] == [
            {"role": "user", "content": "alice: Weather in Paris?"},
            {"role": "system", "content": "[weather_page]\nParis: 21 C"},
            {"role": "assistant", "content": "Let me look that up. "},
        ]

    async def test_parts_of_several_streams_are_one_turn_in_order(
        self, server: OpenAIServer
    ) -> None:
        """Text parts of successive restarted streams are joined, in order, into one turn."""
        parts = (text_part("One moment. "), text_part("Still looking. "))
        await run(server, text_reply("Found it."), request=make_request(context=(), parts=parts))
        assert server.requests[0].body["messages"] == [
            {"role": "assistant", "content": "One moment. Still looking. "}
        ]

    async def test_no_turn_is_sent_for_blank_or_foreign_parts(self, server: OpenAIServer) -> None:
        """Blank text and parts that are not text (another provider's) add no message."""
        parts = (text_part("  "), {"type": "thought", "signature": "c2ln"}, {"type": "text"})
        await run(server, text_reply("Hi."), request=make_request(context=(), parts=parts))
        assert server.requests[0].body["messages"] == []
