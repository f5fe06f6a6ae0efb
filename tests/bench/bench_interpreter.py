"""The whole interpreter on a 100-iteration tool chain, its progress path, and its memory.

* Chain: `run_tool_loop` with trivial ports (a provider that reports one chunk
  and asks for the tool, a tool that answers at once) and every timeout armed,
  beside a hand-written anyio loop doing the same awaits under the same cancel
  scopes (a task group for the attempt, `move_on_after` per stream and per
  tool), in the same process: µs per iteration each, and their ratio.
* Chunk: µs per streamed chunk through the sink the interpreter gives a
  provider (`progress()` then `await deliver()` into a no-op channel), and
  `progress()` alone.
* Memory: 1,000 and 10,000 concurrent 10-iteration turns in one process, all
  held in the middle of their chain while tracemalloc measures what they added.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
from anyio.abc import TaskGroup

from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.interpreter.calls import Alarm, Sink
from toolloop.effects.ports import (
    Notice,
    StreamRequest,
    StreamSink,
    StreamSpan,
    ToolInvocation,
)
from toolloop.engine.commands import StreamOnce
from toolloop.states import (
    FunctionCall,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
    ToolSpec,
    TurnSettings,
)

T = TypeVar("T")
ITERATIONS = 100
CALL = FunctionCall(name="web_search", args={"query": "cats"})
CALLING = StreamResult(
    status=StreamStatus.FUNCTION_CALL, accumulated_text="Let me look.", data=CALL
)
RESULT = ToolResult(success=True, data={"hits": 3})
TURN = TurnSettings(surface_user_errors=False)
"""No progress or still-working notices: the hand-written loop sends none either."""
BACKENDS = ("trio", "asyncio")


class Provider:
    """Reports one chunk and asks for the tool; optionally waits at one call for a gate."""

    def __init__(self, gate: Gate | None = None) -> None:
        self.gate = gate

    @property
    def descriptor(self) -> ProviderDescriptor:
        return TURN.provider

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        await sink.deliver("Let me look.")
        if self.gate is not None and request.once.iteration == self.gate.at_iteration:
            await self.gate.wait()
        return CALLING


SPECS = (ToolSpec(name="web_search"),)


class Registry:
    """One tool that answers at once; nothing to refuse, nothing to redact."""

    def specs(self, provider: ProviderDescriptor) -> tuple[ToolSpec, ...]:
        return SPECS  # as the real registry does: the specs made at registration

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        return RESULT

    def requires_follow_up(
        self, tool: str, provider: ProviderDescriptor, server: str | None
    ) -> bool:
        return False

    def redact(self, tool: str, args: JsonObject | None) -> JsonObject | None:
        return args

    def exclusive(self, tool: str) -> bool:
        return False

    def timeout_ms(self, tool: str) -> int | None:
        return None


class Channel:
    """Takes everything and keeps nothing."""

    def stream_started(self, stream: StreamSpan) -> None:
        pass

    def stream_ended(self, stream: StreamSpan) -> None:
        pass

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        pass

    async def send_notice(self, notice: Notice) -> None:
        pass

    async def send_hidden_notice(self, notice: Notice) -> None:
        pass

    def delivered_message_ids(self) -> Sequence[str]:
        return ()

    async def delete_messages(self, ids: Sequence[str]) -> None:
        pass


class Gate:
    """Holds every turn at one iteration until all of them got there."""

    def __init__(self, turns: int, at_iteration: int) -> None:
        self.turns, self.at_iteration = turns, at_iteration
        self.waiting = 0
        self.all_waiting = anyio.Event()
        self.opened = anyio.Event()

    async def wait(self) -> None:
        self.waiting += 1
        if self.waiting == self.turns:
            self.all_waiting.set()
        await self.opened.wait()


async def through_interpreter(
    iterations: int, provider: Provider | None = None, control: MemoryTurnControl | None = None
) -> None:
    await run_tool_loop(
        turn=TURN,
        config=LoopConfig(max_function_call_iterations=iterations),
        provider=provider or Provider(),
        registry=Registry(),
        channel=Channel(),
        control=control or MemoryTurnControl(),
    )


async def hand_written(iterations: int) -> None:
    """The same awaits a bot author would write without the state machine."""
    provider, registry, channel = Provider(), Registry(), Channel()
    sink = PlainSink(channel)
    invocation = ToolInvocation(killed=anyio.Event(), notify=_quiet)
    history: list[ToolHistoryEntry] = []
    async with anyio.create_task_group():
        for iteration in range(iterations):
            request = StreamRequest(turn=TURN, once=_once(iteration, history))
            with anyio.move_on_after(120):
                result = await provider.stream(request, sink)
            call = result.data
            assert isinstance(call, FunctionCall)
            with anyio.move_on_after(300):
                tool = await registry.execute(call, _context(iteration), invocation)
            response = {"name": call.name, "response": {"result": tool.data}}
            history.append(ToolHistoryEntry(function_call=call, function_response=response))


async def hand_written_guarded(iterations: int) -> None:
    """The hand-written loop with the interpreter's guarantees, written by hand.

    Each call runs as a task of the attempt's group (so one that ignores
    cancellation can be abandoned at its deadline or kill) inside its own
    cancel scope, with a kill handle registered around it: the same task,
    scopes and registrations per call as the interpreter, none of its events,
    effects or notices.
    """
    provider, registry, channel = Provider(), Registry(), Channel()
    control, sink = MemoryTurnControl(), PlainSink(channel)
    invocation = ToolInvocation(killed=anyio.Event(), notify=_quiet)
    history: list[ToolHistoryEntry] = []
    async with anyio.create_task_group() as group:
        for iteration in range(iterations):
            request = StreamRequest(turn=TURN, once=_once(iteration, history))
            result = await _guarded(group, control, 120, provider.stream(request, sink))
            call = result.data
            assert isinstance(call, FunctionCall)
            work = registry.execute(call, _context(iteration), invocation)
            tool = await _guarded(group, control, 300, work)
            response = {"name": call.name, "response": {"result": tool.data}}
            history.append(ToolHistoryEntry(function_call=call, function_response=response))


async def _guarded(
    group: TaskGroup, control: MemoryTurnControl, timeout: float, work: Awaitable[T]
) -> T:
    scope, done, box = anyio.CancelScope(), anyio.Event(), list[T]()

    async def run() -> None:
        with scope:
            box.append(await work)
        done.set()

    control.register_kill(scope.cancel)
    try:
        group.start_soon(run, name="call")
        with anyio.move_on_after(timeout):
            await done.wait()
    finally:
        control.deregister_kill(scope.cancel)
    return box[0]


class PlainSink:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def progress(self) -> None:
        pass

    async def deliver(self, text: str) -> None:
        await self.channel.send_text(text, reply_to=None)


async def _quiet(text: str) -> None:
    pass


def _once(iteration: int, history: list[ToolHistoryEntry]) -> StreamOnce:
    return StreamOnce(
        iteration=iteration,
        function_history=tuple(history),
        accumulated_model_parts=(),
        context=(),
        tail_directives=(),
        disabled=frozenset(),
        suppress_text_output=False,
    )


def _context(iteration: int) -> ToolContext:
    return ToolContext(
        channel_id="channel",
        user_id="user",
        guild_id=None,
        locale="en",
        provider=TURN.provider,
        persona_name="Tomo",
        user_impersonation=False,
        iteration=iteration,
        suppress_progress_notices=True,
        show_kill_hint=False,
    )


def per_iteration(backend: str, chain: Callable[[int], Awaitable[None]]) -> float:
    """Best µs per iteration over several rounds of 20 chains."""

    async def rounds() -> float:
        best = float("inf")
        for _ in range(7):
            started = time.perf_counter()
            for _ in range(20):
                await chain(ITERATIONS)
            best = min(best, (time.perf_counter() - started) / (20 * ITERATIONS))
        return best * 1e6

    result: float = anyio.run(rounds, backend=backend)
    return result


def per_chunk(backend: str, deliver: bool) -> float:
    """Best µs per chunk through the interpreter's sink into a no-op channel."""

    async def rounds() -> float:
        best, chunks = float("inf"), 100_000
        for _ in range(5):
            span = StreamSpan(attempt=0, iteration=0)
            sink = Sink(
                _once(0, []), anyio.CancelScope(), Alarm(), Channel(), span, 120.0, None, None
            )
            started = time.perf_counter()
            if deliver:
                for _ in range(chunks):
                    sink.progress()
                    await sink.deliver("tok")
            else:
                for _ in range(chunks):
                    sink.progress()
            best = min(best, (time.perf_counter() - started) / chunks)
        return best * 1e6

    result: float = anyio.run(rounds, backend=backend)
    return result


def memory_added(backend: str, turns: int) -> float:
    """MiB tracemalloc sees added while `turns` 10-iteration turns are all mid-chain."""
    return held_memory(
        backend, turns, lambda gate: through_interpreter(10, Provider(gate), MemoryTurnControl())
    )


def held_memory(
    backend: str, turns: int, turn: Callable[[Gate], Awaitable[None]], at_iteration: int = 5
) -> float:
    """MiB tracemalloc sees added while `turns` runs of `turn` are all held at the gate.

    Read once every task is blocked: a figure read as the last turn arrives also
    counts what the scheduler still owes the others (undelivered cancellations).
    """

    async def measure() -> float:
        gate = Gate(turns, at_iteration)
        await anyio.wait_all_tasks_blocked()  # imports what it needs (trio.testing) unmeasured
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as group:
            for _ in range(turns):
                group.start_soon(turn, gate)
            await gate.all_waiting.wait()
            await anyio.wait_all_tasks_blocked()
            held = tracemalloc.get_traced_memory()[0] - before
            gate.opened.set()
        tracemalloc.stop()
        return held / 2**20

    result: float = anyio.run(measure, backend=backend)
    return result


def main() -> None:
    for backend in BACKENDS:
        engine = per_iteration(backend, through_interpreter)
        baseline = per_iteration(backend, hand_written)
        guarded = per_iteration(backend, hand_written_guarded)
        print(f"interpreter {backend}, 100-iteration tool chain: {engine:.1f} µs/iteration")
        print(f"hand-written anyio loop {backend}, same chain: {baseline:.1f} µs/iteration")
        print(f"ratio interpreter / hand-written {backend}: {engine / baseline:.1f}x")
        print(f"hand-written, task + kill scope per call {backend}: {guarded:.1f} µs/iteration")
        print(f"ratio interpreter / hand-written with tasks {backend}: {engine / guarded:.1f}x")
    for backend in BACKENDS:
        both, alone = per_chunk(backend, deliver=True), per_chunk(backend, deliver=False)
        print(f"chunk via progress()+deliver() {backend}: {both:.2f} µs/chunk")
        print(f"chunk via progress() alone {backend}: {alone:.2f} µs/chunk")
    for backend, turns in (("trio", 1_000), ("asyncio", 1_000), ("trio", 10_000)):
        added = memory_added(backend, turns)
        print(f"memory, {turns} concurrent 10-iteration turns {backend}: {added:.1f} MiB")
        print(f"memory per 1,000 turns at {turns} {backend}: {added * 1000 / turns:.1f} MiB")


if __name__ == "__main__":
    main()
