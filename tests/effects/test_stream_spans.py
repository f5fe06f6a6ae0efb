"""Stream boundaries on the channel port and the typed host events (`toolloop.effects.observe`).

A chat adapter gives each stream its own message from `stream_started` /
`stream_ended`, and a host shows streams, tools and notices from the typed
events, without reading the engine's effects.
"""

from __future__ import annotations

import anyio
import pytest

from tests.effects.harness import (
    BACKENDS,
    Backend,
    Host,
    Script,
    ScriptProvider,
    calling,
    completed,
    failing,
    run_on,
    silent,
)
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.observe import (
    HostEvent,
    NoticeShown,
    StreamFinished,
    StreamFirstChunk,
    StreamStarted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from toolloop.effects.ports import StreamSpan
from toolloop.effects.registry import ToolCall, ToolFunction, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import (
    ApiFamily,
    GenerationTurnResult,
    JsonObject,
    ProviderDescriptor,
    StreamStatus,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

SECRET_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
}


def span(iteration: int, attempt: int = 0) -> StreamSpan:
    return StreamSpan(attempt=attempt, iteration=iteration)


async def _search(args: JsonObject, call: ToolCall) -> JsonObject:
    await anyio.sleep(2)
    return {"hits": 1}


def tool_host(*scripts: Script, tool: ToolFunction = _search) -> Host:
    """A host whose provider plays `scripts` and whose `search` tool is `tool`."""
    host = Host(provider=ScriptProvider(*scripts))
    host.registry.register(tool, name="search", parameters=SECRET_SCHEMA)
    return host


class TestStreamBoundaries:
    """`stream_started` and `stream_ended` frame each stream's text, on every path."""

    def test_each_stream_gets_its_own_text_between_its_boundaries(self) -> None:
        """A tool chain's two streams are recorded apart, each opened and closed once."""
        host = tool_host(calling("search", {"query": "x"}, text="Let me look."), completed("Done."))
        run_on("trio", host.run)
        assert host.channel.streams == {span(0): "Let me look.", span(1): "Done."}
        assert host.channel.ended == [span(0), span(1)]

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_a_killed_stream_is_ended_too(self, backend: Backend) -> None:
        """A kill mid-stream (the supervisor takes the call) still ends the stream once."""
        host = Host(provider=ScriptProvider(silent("so far")))

        async def main() -> GenerationTurnResult:
            point = anyio.Event()
            host.provider = ScriptProvider(silent("so far", started=point))
            async with anyio.create_task_group() as group:

                async def kill() -> None:
                    await point.wait()
                    host.control.kill()

                group.start_soon(kill)
                return await host.run()

        assert run_on(backend, main).status is TurnStatus.STOPPED_BY_USER
        assert (host.channel.streams, host.channel.ended) == ({span(0): "so far"}, [span(0)])

    def test_a_suppressed_stream_says_so_and_delivers_nothing(self) -> None:
        """After a NovelAI tool failure the retry's span is suppressed and gets no text."""

        async def broken(args: JsonObject, call: ToolCall) -> ToolResult:
            return ToolResult(success=False, error="nope")

        nai = ProviderDescriptor(name="nai", api_family=ApiFamily.NOVELAI)
        host = tool_host(calling("search", text="Hi."), completed("Retried."), tool=broken)
        host.turn = TurnSettings(provider=nai)
        run_on("trio", host.run)
        retry = StreamSpan(attempt=0, iteration=1, suppressed=True)
        assert host.channel.streams == {span(0): "Hi.", retry: ""}

    def test_the_generation_turn_numbers_each_attempts_streams(self) -> None:
        """A superseded attempt's stream is attempt 0, the fallback's is attempt 1."""
        channel = RecordingChannel()

        async def main() -> GenerationTurnResult:
            return await run_generation_turn(
                turn=TurnSettings(),
                attempts=[
                    Attempt(provider=ScriptProvider(failing())),
                    Attempt(provider=ScriptProvider(completed("Fallback."))),
                ],
                registry=ToolRegistry(),
                channel=channel,
                control=MemoryTurnControl(),
                reply_to="42",
            )

        assert run_on("trio", main).status is TurnStatus.COMPLETED
        first = StreamSpan(attempt=0, iteration=0, reply_to="42")
        second = StreamSpan(attempt=1, iteration=0, reply_to="42")
        assert channel.streams == {first: "", second: "Fallback."}
        assert channel.ended == [first, second]


class TestHostEvents:
    """`on_event` sees what a host shows: streams, tools (redacted, timed), notices, the finish."""

    def run(self, host: Host) -> tuple[GenerationTurnResult, list[HostEvent]]:
        events: list[HostEvent] = []

        async def main() -> GenerationTurnResult:
            return await run_generation_turn(
                turn=host.turn,
                attempts=[Attempt(provider=host.provider)],
                registry=host.registry,
                channel=host.channel,
                control=host.control,
                on_event=events.append,
            )

        return run_on("trio", main), events

    def test_a_tool_chain_is_reported_in_order_with_redacted_arguments_and_duration(self) -> None:
        """Stream (its first chunk), tool (secret redacted, 2 s virtual), stream, finish."""
        host = tool_host(
            calling("search", {"query": "cats", "token": "hunter2"}, text="Looking."),
            completed("Found one."),
        )
        result, events = self.run(host)
        assert events == [
            StreamStarted(attempt=0, iteration=0),
            StreamFirstChunk(attempt=0, iteration=0),
            StreamFinished(
                attempt=0, iteration=0, status=StreamStatus.FUNCTION_CALL, text="Looking."
            ),
            ToolStarted(
                attempt=0,
                iteration=0,
                name="search",
                args={"query": "cats", "token": "[redacted]"},
            ),
            ToolFinished(
                attempt=0, iteration=0, name="search", success=True, error=None, duration_ms=2000
            ),
            StreamStarted(attempt=0, iteration=1),
            StreamFirstChunk(attempt=0, iteration=1),
            StreamFinished(
                attempt=0, iteration=1, status=StreamStatus.COMPLETED, text="Found one."
            ),
            TurnFinished(attempt=0, result=result),
        ]

    def test_a_sent_notice_is_reported_with_its_text(self) -> None:
        """The hidden failed-tool notice is reported after it reached the thought log."""

        async def broken(args: JsonObject, call: ToolCall) -> ToolResult:
            return ToolResult(success=False, error="nope")

        host = tool_host(calling("search", {"query": "cats"}), completed(), tool=broken)
        _, events = self.run(host)
        shown = [event.notice for event in events if isinstance(event, NoticeShown)]
        assert shown == host.channel.thoughts
        assert [(n.key, n.hidden) for n in shown] == [("tool_call_failed", True)]
