"""A kill closes the stream's sink at once: a provider that keeps writing reaches nobody."""

from __future__ import annotations

import anyio

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolRegistry
from toolloop.states import (
    LoopConfig,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
)


class KillingChannel(RecordingChannel):
    """Kills the turn when the first text arrives, as a `/kill` typed right then would."""

    control: MemoryTurnControl | None = None

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        await super().send_text(text, reply_to=reply_to)
        assert self.control is not None
        self.control.kill()


class Chatterbox:
    """A provider that writes three chunks without a checkpoint between them."""

    descriptor = ProviderDescriptor()

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        for chunk in ("a", "b", "c"):
            await sink.deliver(chunk)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="abc")


def test_text_after_a_kill_never_reaches_the_channel() -> None:
    """Only the chunk delivered before the kill is shown; the result is stopped_by_user."""
    control = MemoryTurnControl()
    channel = KillingChannel()
    channel.control = control

    async def main() -> TurnStatus:
        result = await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=Chatterbox(),
            registry=ToolRegistry(),
            channel=channel,
            control=control,
        )
        return result.status

    assert anyio.run(main) is TurnStatus.STOPPED_BY_USER
    assert channel.texts == ["a"]
