"""Fixtures of the provider tests: the loopback server, both anyio backends, a recording sink."""

from __future__ import annotations

from typing import Any

import anyio
import attrs

from tests.openai_server import OpenAIServer
from toolloop.effects.ports import StreamRequest
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.engine.commands import StreamOnce
from toolloop.states import (
    VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    ContextItem,
    JsonObject,
    ToolHistoryEntry,
    ToolSpec,
    TurnSettings,
)

WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)


@attrs.define
class RecordingSink:
    """A StreamSink that records what the provider reported."""

    delivered: list[str] = attrs.field(factory=list)
    progress_calls: int = 0
    first_text: anyio.Event = attrs.field(factory=anyio.Event)

    def progress(self) -> None:
        self.progress_calls += 1

    async def deliver(self, text: str) -> None:
        self.delivered.append(text)
        self.first_text.set()


def make_provider(server: OpenAIServer, **options: Any) -> OpenAICompatProvider:
    """A provider pointed at the loopback server."""
    options.setdefault("model", "loopback-model")
    return OpenAICompatProvider(base_url=server.base_url, **options)


def make_request(
    *,
    tools: tuple[ToolSpec, ...] = (WEATHER,),
    context: tuple[ContextItem, ...] = (ContextItem(author="alice", content="Weather in Paris?"),),
    history: tuple[ToolHistoryEntry, ...] = (),
    parts: tuple[JsonObject, ...] = (),
    tail_directives: tuple[str, ...] = (),
    verbatim: bool = False,
    verbatim_cap: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
) -> StreamRequest:
    """A stream request for iteration 0 unless history says otherwise."""
    once = StreamOnce(
        iteration=len(history),
        function_history=history,
        accumulated_model_parts=parts,
        context=context,
        tail_directives=tail_directives,
        disabled=frozenset(),
        suppress_text_output=False,
    )
    return StreamRequest(
        turn=TurnSettings(),
        once=once,
        tools=tools,
        verbatim=verbatim,
        verbatim_tool_call_max_buffer_chars=verbatim_cap,
    )
