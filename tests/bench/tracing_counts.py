"""Instructions per iteration of a turn on each side of bench_observe's tracing comparison.

A CPU-time figure on a shared machine moves by +-25% from one run to the next (a side
that does nothing read +26% and -9%); an instruction count does not. Each figure here
is counted by valgrind (`cachegrind --cache-sim=no`: every instruction of the process,
the model server's thread included) in a process of its own, with `PYTHONHASHSEED`
fixed. Every process imports everything and runs one turn of every side of its
workload on its backend (imports, caches and first-call work are then the same in all
of them), then runs `TURNS` turns of its one side; a process that runs none is the
baseline of its workload and backend. A side's figure is (its count - the baseline) /
the iterations it ran: the turn's own work and its per-turn costs spread over its
iterations. Two runs of a side agree within about 0.5%: what still varies is the
event loops' and the model server's waits, which follow the wall clock.

The workloads are bench_observe's: the in-memory turn (100 tool calls, an iteration
is a provider call and a tool call) and the demo conversation over loopback HTTP (the
real adapter and server; an iteration is a provider call). A last side, in memory,
is the SDK alone making the calls a `TurnTrace` makes into it, with no toolloop code
and no turn (`tests/bench/sdk_calls.py`): the floor of a trace of that shape.

    python -m tests.bench.tracing_counts            # every figure: 24 processes, 2 at once
    python -m tests.bench.tracing_counts run in-memory asyncio untraced 10   # one process
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import anyio

from tests.bench.instructions import have_valgrind, instructions_of, per_iteration

IN_MEMORY, HTTP, REPLAYED = "in-memory", "loopback-HTTP", "replayed"
WORKLOADS = {IN_MEMORY: 101, HTTP: 3, REPLAYED: 101}
"""Iterations a turn of each workload runs."""
TURNS = {IN_MEMORY: 10, HTTP: 40, REPLAYED: 40}
BACKENDS = ("asyncio", "trio")
UNTRACED, NO_SDK, BARE, SDK = (
    "untraced",
    "API only, no SDK",
    "toolloop's hooks, a tracer that keeps nothing",
    "SDK, in-memory exporter",
)
SIDES = (UNTRACED, NO_SDK, BARE, SDK)
SDK_ALONE = "the SDK alone, the same calls, no toolloop code, no turn"
HOST_EVENTS, TRACE_ALONE = "host events", "TurnTrace on the bare tracer, host events included"
BASELINE = "baseline"


class Child:
    """What one counted process has: a turn of each side of its workload to run.

    The replayed workload is bench_observe's hooks alone: a recorded turn's steps fed
    to `host_events` and to a `TurnTrace` on the bare tracer, no loop around them.
    """

    def __init__(self, workload: str, server: Any) -> None:
        from tests.bench import bench_observe as bench

        self.workload, self.server = workload, server
        self.sides, self.exported = bench.tracers()
        self.replays: dict[str, Callable[[], None]] = {}
        if workload != HTTP:
            steps = bench.recorded_steps()
            sdk, alone_exported = bench.sdk_telemetry()
            calls = bench.SdkCalls()
            bench.replaying(bench.Telemetry(tracer_provider=calls, meter_provider=calls), steps)()
            replay = calls.replay(sdk)

            def alone() -> None:
                replay()
                alone_exported.clear()

            def host() -> None:
                for state, event, out in steps:
                    for _ in bench.host_events(0, state, event, out, bench.REGISTRY.redact):
                        pass

            bare = bench.Telemetry(tracer_provider=bench.BareTracerProvider())
            self.replays = {
                SDK_ALONE: alone,
                HOST_EVENTS: host,
                TRACE_ALONE: bench.replaying(bare, steps),
            }

    async def run(self, side: str, turns: int) -> None:
        """`turns` turns on `side` (a replayed side: its replays); the baseline runs none.

        Over HTTP every run opens (and closes) a provider, the baseline's too.
        """
        from tests.bench import bench_observe as bench
        from toolloop.effects.providers.openai_compat import OpenAICompatProvider
        from toolloop.tools import demo_model

        if self.workload != HTTP:
            for _ in range(turns):
                if side in self.replays:
                    self.replays[side]()
                else:
                    await bench.turn(bench.CALLS, self.sides[side])
                    self.exported.clear()
            return
        provider = OpenAICompatProvider(base_url=self.server.base_url, model=demo_model.MODEL)
        async with provider:
            for _ in range(turns):
                await bench.http_turn(provider, self.sides[side])
                self.exported.clear()

    async def warm(self) -> None:
        """One turn of every side, and one replay of each replayed side."""
        for side in (*SIDES, *self.replays):
            await self.run(side, 1)


def child(workload: str, backend: str, side: str, turns: int) -> None:
    """The counted process: every side of its workload warmed, then its one side."""
    from toolloop.testing.model_server import ModelServer
    from toolloop.tools import demo_model

    with ExitStack() as stack:
        server = None
        if workload == HTTP:
            server = stack.enter_context(ModelServer(demo_model.chunks, delay=0))
        run = Child(workload, server)
        anyio.run(run.warm, backend=backend)
        anyio.run(run.run, side, turns, backend=backend)


def counted(workload: str, backend: str, side: str, turns: int) -> int:
    """The instructions valgrind counts in a child process running `turns` turns of a side."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "tests.bench.tracing_counts",
        "run",
        workload,
        backend,
        side,
        str(turns),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    for variable in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED"):
        env.pop(variable, None)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[5:])} failed:\n{done.stderr[-2000:]}")
    return instructions_of(done.stderr)


def jobs() -> Iterator[tuple[str, str, str]]:
    """(workload, backend, side) of every counted process, a baseline per workload and backend."""
    for backend in BACKENDS:
        for workload in (IN_MEMORY, HTTP):
            for side in (BASELINE, *SIDES):
                yield workload, backend, side
    for side in (BASELINE, HOST_EVENTS, TRACE_ALONE, SDK_ALONE):
        yield REPLAYED, "asyncio", side


def figures(parallel: int = 2) -> dict[tuple[str, str, str], float]:
    """Instructions per iteration by (workload, backend, side), `parallel` processes at once."""
    todo = list(jobs())

    def count(job: tuple[str, str, str]) -> int:
        workload, backend, side = job
        return counted(workload, backend, side, 0 if side == BASELINE else TURNS[workload])

    with ThreadPoolExecutor(parallel) as pool:
        totals = dict(zip(todo, pool.map(count, todo), strict=True))
    per: dict[tuple[str, str, str], float] = {}
    for (workload, backend, side), total in totals.items():
        if side != BASELINE:
            base = totals[workload, backend, BASELINE]
            per[workload, backend, side] = per_iteration(
                base, total, TURNS[workload], WORKLOADS[workload]
            )
    return per


def lines(per: dict[tuple[str, str, str], float]) -> Iterator[str]:
    """The figures as bench lines, each side against its workload's untraced figure."""
    for (workload, backend, side), instructions in per.items():
        what = "a provider call over HTTP" if workload == HTTP else "a provider and a tool call"
        if workload == REPLAYED:  # no turn of its own: against the in-memory turn's iteration
            base = per[IN_MEMORY, backend, UNTRACED]
            added = f" ({instructions / base * 100:.1f}% of an untraced in-memory iteration)"
        else:
            base = per[workload, backend, UNTRACED]
            added = "" if side == UNTRACED else f" ({(instructions / base - 1) * 100:+.1f}%)"
        yield (
            f"tracing instructions {backend}, {workload} turn, {side}: "
            f"{instructions / 1000:,.1f} k instructions per iteration ({what}){added}"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        workload, backend, side, turns = sys.argv[2:6]
        child(workload, backend, side, int(turns))
        return
    if not have_valgrind():
        print("tracing instructions: valgrind is not installed, no figure")
        return
    for line in lines(figures()):
        print(line, flush=True)


if __name__ == "__main__":
    main()
