"""Fault injection (issue 12): a fault at every chunk position of a turn, through the real loop.

One tool-calling turn over real HTTP: the first stream says "Let me look. " and
calls `get_weather`, the tool runs, the second stream answers. Each case puts
one fault at one position of one stream (the connection drops, a malformed SSE
line, the server stalls) or answers a stream with an HTTP error, and runs
`run_tool_loop` with the real adapter, registry, `MemoryTurnControl` and
`RecordingChannel`. Every case checks the SPEC outcome (a fault before the
stream's finish reason ends the turn `error` or `timeout`; one after it changes
nothing), that every text the channel got is in the result's stream results,
and that nothing is left: no kill handle, no task, no request the server is
still serving (a connection the client never closed would keep it serving).
"""

from __future__ import annotations

import anyio
import attrs
import pytest
from anyio import wait_all_tasks_blocked

from tests.openai_server import (
    Disconnect,
    Frame,
    OpenAIServer,
    Reply,
    Stall,
    error_reply,
    raw_reply,
    text_reply,
    tool_call_reply,
)
from tests.providers.conftest import WEATHER
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    ContextItem,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    StreamStatus,
    TurnSettings,
)

pytestmark = pytest.mark.anyio

#: For a stall before the finish reason: a rolling timeout that ends the test soon, yet
#: long enough that a healthy stream on a loaded machine never trips it.
STALLING = LoopConfig(stream_sdk_call_timeout_ms=1_000, stream_abandoned_settle_timeout_ms=0)
#: For every other case, where no timeout is due; it must outlast the drain of a stream
#: after its finish reason (DRAIN_SECONDS), as it does anywhere (its minimum is 10 s).
PATIENT = attrs.evolve(STALLING, stream_sdk_call_timeout_ms=30_000)
STREAMS = (
    tool_call_reply("get_weather", {"city": "Paris"}, text="Let me look. "),
    text_reply("It is ", "sunny."),
)
#: Where each stream's finish chunk is (the frames are role, deltas, finish, [DONE]).
FINISH = tuple(len(reply.frames) - 2 for reply in STREAMS)
MALFORMED = b"data: {oops\n\n"


@attrs.frozen
class Fault:
    """One fault: `kind` at frame `position` of stream `stream` (0 or 1)."""

    kind: str
    stream: int
    position: int = 0

    def replies(self) -> tuple[Reply, ...]:
        """The two streams' replies with this fault in place (no reply after an ending fault)."""
        replies = list(STREAMS)
        frames: list[Frame] = list(replies[self.stream].frames)
        if self.kind == "http_500":
            replies[self.stream] = error_reply(500, "the model is overloaded", "server_error")
        elif self.kind == "http_401":
            replies[self.stream] = error_reply(401, "invalid API key")
        else:
            fault = {"disconnect": Disconnect(), "stall": Stall(), "malformed": MALFORMED}
            frames.insert(self.position, fault[self.kind])
            if self.kind != "malformed":
                del frames[self.position + 1 :]
            replies[self.stream] = raw_reply(*frames)
        return tuple(replies[: self.stream + 1] if self.ends_turn else replies)

    @property
    def ends_turn(self) -> bool:
        """A fault before the stream's finish reason ends it; after, the reply is complete."""
        return self.kind.startswith("http") or self.position <= FINISH[self.stream]

    @property
    def config(self) -> LoopConfig:
        return STALLING if self.kind == "stall" and self.ends_turn else PATIENT

    @property
    def outcome(self) -> StreamStatus:
        if not self.ends_turn:
            return StreamStatus.COMPLETED
        return StreamStatus.TIMEOUT if self.kind == "stall" else StreamStatus.ERROR


FAULTS = [
    Fault(kind, stream, position)
    for kind in ("disconnect", "malformed", "stall")
    for stream, reply in enumerate(STREAMS)
    for position in range(len(reply.frames) + 1)
] + [Fault(kind, stream) for kind in ("http_500", "http_401") for stream in (0, 1)]


@attrs.define
class Turn:
    """The turn's ports, and what was left behind."""

    server: OpenAIServer
    channel: RecordingChannel = attrs.field(factory=RecordingChannel)
    control: MemoryTurnControl = attrs.field(factory=MemoryTurnControl)
    ran: list[JsonObject] = attrs.field(factory=list)

    async def run(self, config: LoopConfig) -> GenerationTurnResult:
        registry = ToolRegistry()

        async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
            self.ran.append(args)
            return {"sky": "sunny"}

        registry.register(get_weather, parameters=WEATHER.parameters)
        context = (ContextItem(author="alice", content="Weather in Paris?"),)
        async with OpenAICompatProvider(base_url=self.server.base_url, model="m") as provider:
            return await run_tool_loop(
                turn=TurnSettings(context=context),
                config=config,
                provider=provider,
                registry=registry,
                channel=self.channel,
                control=self.control,
            )


def case_id(fault: Fault) -> str:
    return f"{fault.kind}-stream{fault.stream}-at{fault.position}"


@pytest.mark.parametrize("fault", FAULTS, ids=[case_id(f) for f in FAULTS])
async def test_a_fault_ends_the_turn_as_spec_says_keeping_every_delivered_text(
    server: OpenAIServer, fault: Fault
) -> None:
    """The SPEC outcome; every text the channel got is in the result; nothing left running."""
    server.script(*fault.replies())
    turn = Turn(server)
    tasks_before = len(anyio.get_running_tasks())
    result = await turn.run(fault.config)

    assert result.status.value == fault.outcome.value, result
    statuses = [r.status for r in result.stream_results]
    ended_at = fault.stream if fault.ends_turn else 1
    assert statuses == [StreamStatus.FUNCTION_CALL] * ended_at + [fault.outcome]
    assert turn.ran == ([] if fault.ends_turn and fault.stream == 0 else [{"city": "Paris"}])
    assert turn.channel.text == "".join(r.accumulated_text for r in result.stream_results)
    await assert_nothing_left(turn, tasks_before)


async def assert_nothing_left(turn: Turn, tasks_before: int) -> None:
    """No kill handle registered, no task running once all settle, no request still served.

    Settling lets the event loop finalize the async generators of a body left
    mid-read (httpx nests them; a malformed chunk leaves them suspended).
    """
    assert turn.control.kill_handles == []
    await wait_all_tasks_blocked()
    assert len(anyio.get_running_tasks()) == tasks_before
    for request in turn.server.requests:
        finished = await anyio.to_thread.run_sync(request.finished.wait, 10)
        assert finished, f"the server still serves {request.path}"
