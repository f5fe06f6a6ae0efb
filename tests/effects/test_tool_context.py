"""What a running tool is told (SPEC 6 step 3): the live stream and the live context.

The live context items are the engine's (`ToolContext.context_items`); the
stream the call came from is the interpreter's (`ToolInvocation.streaming`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.effects.harness import (
    BACKENDS,
    Backend,
    Host,
    Script,
    ScriptProvider,
    calling,
    completed,
    run_on,
)
from toolloop.effects.ports import StreamingContext
from toolloop.effects.registry import ToolCall
from toolloop.states import (
    ApiFamily,
    ContextItem,
    GenerationTurnResult,
    JsonObject,
    ProviderDescriptor,
    ToolContext,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

BASE = (ContextItem(author="alice", content="What is in this video?"),)
ITEM = {"text": "a transcript"}
NOVELAI = ProviderDescriptor(name="novelai", api_family=ApiFamily.NOVELAI)


class Recorder:
    """A `search` tool that records the context of each run and plays its results in turn."""

    def __init__(self, *results: ToolResult) -> None:
        self.results = results
        self.seen: list[ToolContext] = []
        self.streams: list[StreamingContext | None] = []

    async def __call__(self, args: JsonObject, call: ToolCall) -> ToolResult:
        self.seen.append(call.context)
        self.streams.append(call.invocation.streaming)
        return self.results[min(len(self.seen), len(self.results)) - 1]

    def run(self, backend: Backend, *scripts: Script, **host: Any) -> GenerationTurnResult:
        """Run an attempt whose model plays `scripts`, with this tool registered."""
        attempt = Host(provider=ScriptProvider(*scripts), **host)
        attempt.registry.register(self, name="search")
        result: GenerationTurnResult = run_on(backend, attempt.run)
        return result


OK = ToolResult(success=True, data={"hits": 3})


@pytest.mark.parametrize("backend", BACKENDS)
class TestToolContext:
    def test_the_tool_sees_the_stream_it_came_from(self, backend: Backend) -> None:
        """Reply target, identity, the text said before the call and whether it was shown."""
        tool = Recorder(OK)
        scripts = (calling("search", text="Let me look."), completed())
        result = tool.run(backend, *scripts, reply_to="trigger-7")
        assert result.status is TurnStatus.COMPLETED
        assert tool.streams[0] == StreamingContext(
            reply_to="trigger-7",
            identity="Tomo",
            pre_tool_text="Let me look.",
            text_suppressed=False,
        )

    def test_a_suppressed_streams_text_is_reported_as_not_shown(self, backend: Backend) -> None:
        """On a NovelAI retry the tool knows its stream's text never reached the channel."""
        tool = Recorder(ToolResult(success=False, error="upstream 503"), OK)
        scripts = (calling("search", text="Sure."), calling("search", text="Again."), completed())
        tool.run(backend, *scripts, turn=TurnSettings(provider=NOVELAI))
        assert [(s.pre_tool_text, s.text_suppressed) for s in tool.streams if s] == [
            ("Sure.", False),
            ("Again.", True),
        ]

    def test_the_tool_sees_the_context_as_restarts_changed_it(self, backend: Backend) -> None:
        """After an enrichment restart, the next tool's context items include the item."""
        restart = {"type": "context_restart_youtube", "enhanced_context_item": ITEM}
        tool = Recorder(ToolResult(success=True, data=restart), OK)
        scripts = (calling("search"), calling("search"), completed())
        tool.run(backend, *scripts, turn=TurnSettings(context=BASE))
        assert [c.context_items for c in tool.seen] == [
            BASE,
            (*BASE, ContextItem(kind="enrichment", content=ITEM)),
        ]
