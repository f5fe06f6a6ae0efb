"""A turn as a workflow on the dev server: the same outcome as the in-process interpreter."""

from __future__ import annotations

import pytest

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from tests.temporal.world import World, run
from toolloop.states import GenerationTurnResult, TurnStatus

pytestmark = pytest.mark.anyio


async def test_a_turn_with_a_tool_completes_through_the_workflow(
    temporal: str, server: OpenAIServer
) -> None:
    """The model calls `lookup`, the activity runs it once, the model answers from its result;
    the channel shows both streams' text once and the result is `completed`."""
    server.script(
        tool_call_reply("lookup", {"cents": 5}, text="Looking. "),
        text_reply("Found ", "it."),
    )
    world = World(server)
    result = await run(temporal, world)
    assert isinstance(result, GenerationTurnResult)
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == ["lookup"]
    assert "".join(world.channel.texts) == "Looking. Found it."
    assert len(server.requests) == 2
