"""A provider that plays a script, for a bot's own tests: no server, no model, real loop.

pydantic-ai's `FunctionModel` and the Agents SDK's fake models serve the same
need. Each call takes the next reply of the script; its text goes through the
sink as a model's would (progress, then delivery), so the interpreter, the
channel and the timeouts see a real stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.states import FunctionCall, ProviderDescriptor, StreamResult, StreamStatus
from toolloop.states.errors import ToolloopError

Reply = str | FunctionCall | StreamResult
"""A reply: text that completes, a tool call, or any stream result (its text is delivered)."""


class ScriptExhausted(ToolloopError, RuntimeError):
    """The loop called the provider more often than the script has replies."""


class ScriptedProvider:
    """The `Provider` port playing `replies` in order, one a call; `requests` keeps each call."""

    def __init__(
        self, replies: Sequence[Reply], *, descriptor: ProviderDescriptor | None = None
    ) -> None:
        self.replies = tuple(replies)
        self.requests: list[StreamRequest] = []
        self._descriptor = descriptor or ProviderDescriptor(name="scripted")

    @property
    def descriptor(self) -> ProviderDescriptor:
        """Which provider this stands for (default: a custom one named `scripted`)."""
        return self._descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """The next reply, its text streamed through `sink`."""
        self.requests.append(request)
        if len(self.requests) > len(self.replies):
            raise ScriptExhausted(
                f"call {len(self.requests)} to the scripted provider, "
                f"but the script has {len(self.replies)} replies"
            )
        result = _result(self.replies[len(self.requests) - 1])
        sink.progress()
        if result.accumulated_text:
            await sink.deliver(result.accumulated_text)
        return result


def _result(reply: Reply) -> StreamResult:
    if isinstance(reply, str):
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text=reply)
    if isinstance(reply, FunctionCall):
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=reply)
    return reply
