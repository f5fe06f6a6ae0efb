"""The soak: thousands of turns through the real interpreter, with everything going wrong.

Usage: ``python -m tests.reliability.soak [--turns 10000] [--backend trio|asyncio|both]
[--plot docs/reliability.md]``.

Each turn runs `run_tool_loop` on virtual time (trio's mock clock; asyncio on
`looptime`'s time-compacting loop), so a five-minute tool timeout costs
nothing. The provider and the tools are drawn at random from a seeded
generator: replies that complete, fail, raise, stall until the inactivity
timeout, or call tools that succeed, fail, raise, hang until the tool timeout,
or ignore cancellation for a while; a concurrent "user" kills the turn, asks
it to stop or sends a follow-up at a random moment. Four channels keep their
`MemoryTurnControl` for the whole soak, as a bot keeps one per channel.

After every turn the soak checks that nothing is left behind: no kill handle
registered, every registration paired, no task running but the soak's own.
Every `sample_every` turns it records the memory Python has allocated
(`tracemalloc`, after a collection), so a leak shows as a rising line.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import looptime
import trio.testing

from tests.effects.harness import (
    BACKENDS,
    Backend,
    ProviderBroke,
    ScriptProvider,
    calling,
    completed,
    failing,
    raising,
    registrations,
    silent,
)
from tests.reliability.chart import line_chart
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import ImpersonationAborted, run_tool_loop
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.specs.invariants import registrations_cleaned_up
from toolloop.states import JsonObject, LoopConfig, ProviderDescriptor, TurnSettings

CHANNELS = 4
CONFIG = LoopConfig(max_function_call_iterations=6, max_consecutive_tool_errors=3)
"""SPEC's timeouts (virtual time makes them free); a low ceiling and error cap, to reach both."""
MiB = 1024 * 1024


def soak_registry() -> ToolRegistry:
    """Tools for every way a tool can end: success, failure, exception, hang, a shielded wait."""
    registry = ToolRegistry()

    @registry.tool(parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    async def count(args: JsonObject, call: ToolCall) -> JsonObject:
        await anyio.sleep(0.01)
        return {"n": args.get("n", 0) + 1}

    @registry.tool()
    async def flaky(args: JsonObject, call: ToolCall) -> JsonObject:
        raise RuntimeError("flaky tool failed")

    @registry.tool()
    async def hang(args: JsonObject, call: ToolCall) -> JsonObject:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    @registry.tool()
    async def stubborn(args: JsonObject, call: ToolCall) -> JsonObject:
        with anyio.CancelScope(shield=True):  # ignores the kill and the timeout for a while
            await anyio.sleep(2)
        return {"done": True}

    return registry


SCRIPTS = (
    lambda: completed("All done."),
    lambda: calling("count", {"n": 1}, text="Counting."),
    lambda: calling("count", {"n": "one"}),  # fails the schema
    lambda: calling("flaky"),
    lambda: calling("hang", text="Waiting."),
    lambda: calling("stubborn"),
    lambda: calling("ghost"),  # unknown tool
    lambda: silent("half a sen"),  # inactivity timeout
    lambda: failing("HTTP 503"),
    lambda: raising("connection refused"),
)
USER_ACTIONS = ("none", "none", "kill", "stop", "follow_up")


@attrs.frozen(kw_only=True)
class Sample:
    """Memory after `turns` turns."""

    turns: int
    bytes: int


@attrs.define
class Soak:
    """One backend's soak: its turns, what each ended as, its memory samples and any leak."""

    backend: Backend
    seed: int
    statuses: dict[str, int] = attrs.field(factory=dict)
    samples: list[Sample] = attrs.field(factory=list)
    leaks: list[str] = attrs.field(factory=list)

    async def run(self, turns: int, sample_every: int) -> None:
        rng = random.Random(self.seed)
        registry = soak_registry()
        controls = [MemoryTurnControl(record_registrations=True) for _ in range(CHANNELS)]
        own_tasks = len(anyio.get_running_tasks())
        for number in range(1, turns + 1):
            control = controls[number % CHANNELS]
            control.new_turn()
            await self._turn(rng, registry, control, number)
            self._check_clean(control, number, own_tasks)
            if number % sample_every == 0:
                self.samples.append(Sample(turns=number, bytes=_allocated()))

    async def _turn(
        self, rng: random.Random, registry: ToolRegistry, control: MemoryTurnControl, number: int
    ) -> None:
        scripts = [rng.choice(SCRIPTS)() for _ in range(rng.randint(1, 5))]
        provider = ScriptProvider(*scripts, descriptor=ProviderDescriptor())
        action, delay = rng.choice(USER_ACTIONS), rng.uniform(0, 3)
        async with anyio.create_task_group() as users:
            users.start_soon(_act, control, action, delay)
            try:
                result = await run_tool_loop(
                    turn=TurnSettings(),
                    config=CONFIG,
                    provider=provider,
                    registry=registry,
                    channel=RecordingChannel(),
                    control=control,
                )
                status = result.status.value
            except (ProviderBroke, ImpersonationAborted) as error:
                status = f"raised {type(error).__name__}"
            users.cancel_scope.cancel()
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def _check_clean(self, control: MemoryTurnControl, number: int, own_tasks: int) -> None:
        if control.kill_handles:
            self.leaks.append(f"turn {number}: {len(control.kill_handles)} kill handles left")
        problems = registrations_cleaned_up(registrations(control))
        self.leaks.extend(f"turn {number}: {problem}" for problem in problems)
        tasks = len(anyio.get_running_tasks())
        if tasks != own_tasks:
            self.leaks.append(f"turn {number}: {tasks - own_tasks} tasks left running")

    def growth_after(self, turns: int) -> int:
        """Bytes allocated at the end beyond the sample at `turns` (the plateau's rise)."""
        base = next(s.bytes for s in self.samples if s.turns >= turns)
        return max(s.bytes for s in self.samples if s.turns >= turns) - base


async def _act(control: MemoryTurnControl, action: str, delay: float) -> None:
    """The user: after `delay` virtual seconds, kill, stop or follow up (or nothing)."""
    await anyio.sleep(delay)
    if action == "kill":
        control.kill()
    elif action == "stop":
        control.request_stop()
    elif action == "follow_up":
        control.request_follow_up()


def _allocated() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def run_soak(backend: Backend, turns: int, *, seed: int = 0, sample_every: int = 100) -> Soak:
    """Run `turns` turns on `backend` on virtual time; tracemalloc traces the whole run."""
    soak = Soak(backend=backend, seed=seed)
    main: Callable[[], Awaitable[None]] = lambda: soak.run(turns, sample_every)  # noqa: E731
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        _run_virtual(backend, main)
    finally:
        if not started:
            tracemalloc.stop()
    return soak


def _run_virtual(backend: Backend, main: Callable[[], Awaitable[Any]]) -> Any:
    if backend == "trio":
        clock = trio.testing.MockClock(autojump_threshold=0)
        return anyio.run(main, backend="trio", backend_options={"clock": clock})
    factory = lambda: looptime.new_event_loop(start=0)  # noqa: E731
    return anyio.run(main, backend="asyncio", backend_options={"loop_factory": factory})


def memory_chart(soaks: list[Soak]) -> str:
    """The memory samples of each soak as an inline SVG line chart (MiB against turns)."""
    return line_chart(
        f"Memory allocated against turns ({', '.join(s.backend for s in soaks)})",
        "turns",
        [s.turns for s in soaks[0].samples],
        "MiB",
        {soak.backend: [s.bytes / MiB for s in soak.samples] for soak in soaks},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.soak")
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--backend", choices=[*BACKENDS, "both"], default="both")
    parser.add_argument("--plot", type=Path, help="rewrite the soak plot in this Markdown file")
    args = parser.parse_args(argv)
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    every = max(args.turns // 20, 1)
    soaks = [run_soak(backend, args.turns, sample_every=every) for backend in backends]
    plateau = min(1000, args.turns // 2)
    for soak in soaks:
        growth = soak.growth_after(plateau)
        print(
            f"{soak.backend}: {args.turns} turns, {len(soak.leaks)} leaks, "
            f"memory {soak.samples[-1].bytes / MiB:.2f} MiB, "
            f"growth after turn {plateau}: {growth / 1024:.1f} KiB"
        )
        print("  ends:", ", ".join(f"{k} {v}" for k, v in sorted(soak.statuses.items())))
        for leak in soak.leaks[:10]:
            print("  LEAK", leak)
    if args.plot:
        _rewrite_plot(args.plot, memory_chart(soaks))
    return 1 if any(soak.leaks for soak in soaks) else 0


def _rewrite_plot(path: Path, plot: str) -> None:
    begin, end = "<!-- soak:begin -->", "<!-- soak:end -->"
    text = path.read_text()
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{begin}\n{plot}\n{end}{tail}")


if __name__ == "__main__":
    sys.exit(main())
