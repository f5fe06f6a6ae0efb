"""The interpreter runs a batch of calls (SPEC 6b) and per-tool timeouts, on both backends.

The tools here really run side by side: each records when it starts and ends
(on the anyio clock: trio's virtual one, asyncio's real one), so the tests see
how many ran at once, whether an exclusive one overlapped another, and what a
kill left running.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.effects.harness import BACKENDS, Backend, Host, ScriptProvider, completed, run_on
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.observe import HostEvent, ToolFinished, ToolStarted
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolSchemaError
from toolloop.engine.events import ToolSettled
from toolloop.states import (
    FunctionCall,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnStatus,
)

NAP_S = 0.05
"""How long each tool of these tests works: short on asyncio's real clock."""


def several(*names: str) -> Any:
    """A stream asking for each named tool once, in this order, with ids c0, c1, ..."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        calls = tuple(
            FunctionCall(name=name, args={}, call_id=f"c{position}")
            for position, name in enumerate(names)
        )
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=calls[0], calls=calls)

    return play


class Log:
    """What the tools did: the calls running now, the most at once, who overlapped whom."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most = 0
        self.overlaps: list[tuple[str, frozenset[str]]] = []
        """(exclusive tool, the others running) each time an exclusive one saw company."""
        self.cancelled: list[str] = []
        self.finished: list[str] = []

    def tool(self, name: str, nap: float = NAP_S, *, exclusive: bool = False) -> Any:
        async def work(args: JsonObject, call: ToolCall) -> ToolResult:
            self.running.add(name)
            self.most = max(self.most, len(self.running))
            try:
                for _ in range(2):  # looked at twice: when it starts and half way through
                    if exclusive and len(self.running) > 1:
                        self.overlaps.append((name, frozenset(self.running - {name})))
                    await anyio.sleep(nap / 2)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(name)
                raise
            finally:
                self.running.discard(name)
            self.finished.append(name)
            return ToolResult(success=True, data={"tool": name})

        return work


def batch_host(log: Log, names: list[str], config: LoopConfig, **exclusive: bool) -> Host:
    host = Host(provider=ScriptProvider(several(*names), completed()), config=config)
    for name in dict.fromkeys(names):
        alone = exclusive.get(name, False)
        host.registry.register(log.tool(name, exclusive=alone), name=name, exclusive=alone)
    return host


@pytest.mark.parametrize("backend", BACKENDS)
class TestBatch:
    """Every call of a reply runs, side by side within the limit, answered in the model's order."""

    def test_four_calls_run_at_once_and_are_answered_in_the_models_order(
        self, backend: Backend
    ) -> None:
        """Default limit: the four run together; history holds c0..c3 in order."""
        log = Log()
        names = ["a", "b", "c", "d"]
        host = batch_host(log, names, LoopConfig())
        result = run_on(backend, host.run)
        assert result.status is TurnStatus.COMPLETED
        assert log.most == 4
        history = host.provider.requests[1].once.function_history
        assert [e.function_call.call_id for e in history] == ["c0", "c1", "c2", "c3"]
        assert [e.response for e in history] == [{"tool": n} for n in names]
        assert host.leftovers() == []

    def test_the_parallel_limit_caps_how_many_run_at_once(self, backend: Backend) -> None:
        """TOOL_PARALLEL_LIMIT=2: never more than two of five run at once, all five answered."""
        log = Log()
        host = batch_host(log, ["a", "b", "c", "d", "e"], LoopConfig(tool_parallel_limit=2))
        run_on(backend, host.run)
        assert log.most == 2
        assert sorted(log.finished) == ["a", "b", "c", "d", "e"]
        assert len(host.provider.requests[1].once.function_history) == 5

    def test_an_exclusive_tool_never_runs_beside_another(self, backend: Backend) -> None:
        """The exclusive call waits for the ones before it; the ones after wait for it."""
        log = Log()
        host = batch_host(log, ["a", "b", "alone", "c"], LoopConfig(), alone=True)
        run_on(backend, host.run)
        assert log.overlaps == []
        assert log.finished.index("alone") > max(log.finished.index("a"), log.finished.index("b"))
        assert log.finished[-1] == "c"

    def test_a_kill_ends_every_running_call_and_adds_nothing(self, backend: Backend) -> None:
        """A kill while three calls run cancels all three; the turn stops, no entry is kept."""
        log = Log()
        host = batch_host(log, ["a", "b", "c"], LoopConfig())

        async def main() -> Any:
            async with anyio.create_task_group() as group:
                group.start_soon(kill_when_running, host, log, 3)
                result = await host.run()
                group.cancel_scope.cancel()
            return result

        result = run_on(backend, main)
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert sorted(log.cancelled) == ["a", "b", "c"] and log.running == set()
        assert len(host.provider.requests) == 1  # the model never saw a result
        assert host.last_state is not None and host.last_state.function_history == ()
        assert host.leftovers() == []

    def test_one_calls_timeout_cancels_no_other(self, backend: Backend) -> None:
        """A call past its own timeout fails; the slower one beside it still succeeds."""
        log = Log()
        host = Host(provider=ScriptProvider(several("quick", "slow"), completed()))
        host.registry.register(log.tool("quick", nap=10), name="quick", timeout=NAP_S)
        host.registry.register(log.tool("slow", nap=2 * NAP_S), name="slow")
        run_on(backend, host.run)
        quick, slow = host.provider.requests[1].once.function_history
        assert quick.response["reason"] == "Tool quick timed out after 0.05 s"
        assert slow.response == {"tool": "slow"}
        assert log.cancelled == ["quick"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_host_sees_each_call_of_a_batch_as_its_own_tool_event(backend: Backend) -> None:
    """Observers get a ToolStarted and a ToolFinished per call, named by its call id and its
    place in the batch."""
    log = Log()
    host = batch_host(log, ["a", "b", "c"], LoopConfig())
    seen: list[HostEvent] = []

    async def main() -> None:
        await run_tool_loop(
            turn=host.turn,
            config=host.config,
            provider=host.provider,
            registry=host.registry,
            channel=host.channel,
            control=host.control,
            on_event=seen.append,
        )

    run_on(backend, main)
    started = [(e.name, e.call_id, e.index) for e in seen if isinstance(e, ToolStarted)]
    finished = [e for e in seen if isinstance(e, ToolFinished)]
    assert started == [("a", "c0", 0), ("b", "c1", 1), ("c", "c2", 2)]
    assert sorted((e.name, e.call_id, e.index, e.success) for e in finished) == [
        ("a", "c0", 0, True),
        ("b", "c1", 1, True),
        ("c", "c2", 2, True),
    ]
    assert all(e.duration_ms >= 0 for e in finished)


async def kill_when_running(host: Host, log: Log, count: int) -> None:
    while len(log.running) < count:
        await anyio.sleep(NAP_S / 10)
    host.control.kill()


@pytest.mark.parametrize("backend", BACKENDS)
class TestPerToolTimeout:
    """`@registry.tool(timeout=...)` overrides TOOL_EXECUTION_TIMEOUT_MS for that tool."""

    def test_the_tools_own_timeout_ends_it(self, backend: Backend) -> None:
        """A tool registered with timeout=0.05 fails after 0.05 s, not after 300 s."""
        host = Host(provider=ScriptProvider(several("slow"), completed()))

        @host.registry.tool(name="slow", timeout=NAP_S)
        async def slow(args: JsonObject, call: ToolCall) -> ToolResult:
            await anyio.sleep(300)
            return ToolResult(success=True)

        run_on(backend, host.run)
        (settled,) = [e for _, e in host.events if isinstance(e, ToolSettled)]
        assert settled.result.error == "Tool slow timed out after 0.05 s"
        assert settled.duration_ms < 1000

    def test_the_timer_is_fresh_for_each_call(self, backend: Backend) -> None:
        """Two calls of 0.03 s each under a 0.05 s timeout both succeed, one after another."""
        host = Host(
            provider=ScriptProvider(several("nap"), several("nap"), completed()),
        )

        @host.registry.tool(name="nap", timeout=NAP_S)
        async def nap(args: JsonObject, call: ToolCall) -> ToolResult:
            await anyio.sleep(0.03)
            return ToolResult(success=True)

        run_on(backend, host.run)
        results = [e.result for _, e in host.events if isinstance(e, ToolSettled)]
        assert [r.success for r in results] == [True, True]


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [
        (0, 'tool "t": timeout: must be a number of seconds above zero (got 0)'),
        (-1, 'tool "t": timeout: must be a number of seconds above zero (got -1)'),
        ("5", "tool \"t\": timeout: must be a number of seconds above zero (got '5')"),
        (True, 'tool "t": timeout: must be a number of seconds above zero (got True)'),
        (float("inf"), 'tool "t": timeout: must be finite (got inf)'),
    ],
)
def test_a_bad_tool_timeout_is_refused_at_registration(timeout: Any, problem: str) -> None:
    """A timeout that is not a finite number of seconds above zero is refused, named."""
    host = Host(provider=ScriptProvider(completed()))

    async def t(args: JsonObject, call: ToolCall) -> ToolResult:
        return ToolResult(success=True)

    with pytest.raises(ToolSchemaError) as raised:
        host.registry.register(t, timeout=timeout)
    assert str(raised.value) == problem


@pytest.mark.parametrize("backend", BACKENDS)
@given(
    size=st.integers(2, 5),
    limit=st.integers(1, 3),
    kill_after=st.integers(1, 3),
)
@settings(max_examples=15, deadline=None)
def test_a_kill_at_any_point_of_a_batch_leaves_nothing_running_and_nothing_added(
    backend: Backend, size: int, limit: int, kill_after: int
) -> None:
    """Kill invariant: whenever the kill comes, no tool runs on and no entry is kept."""
    log = Log()
    names = [f"t{n}" for n in range(size)]
    host = batch_host(log, names, LoopConfig(tool_parallel_limit=limit))
    killed_at = min(kill_after, limit, size)

    async def main() -> Any:
        async with anyio.create_task_group() as group:
            group.start_soon(kill_when_running, host, log, killed_at)
            result = await host.run()
            group.cancel_scope.cancel()
        return result

    result = run_on(backend, main)
    assert result.status is TurnStatus.STOPPED_BY_USER
    assert log.running == set()
    assert host.last_state is not None and host.last_state.function_history == ()
    assert len(host.provider.requests) == 1
    assert host.leftovers() == []
