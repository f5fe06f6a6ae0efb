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

    python -m tests.bench.tracing_counts            # every figure, ~10 min on 2 cores
    python -m tests.bench.tracing_counts run in-memory asyncio untraced 10   # one process
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import anyio

IN_MEMORY, HTTP = "in-memory", "loopback-HTTP"
WORKLOADS = {IN_MEMORY: 101, HTTP: 3}
"""Iterations a turn of each workload runs."""
TURNS = {IN_MEMORY: 10, HTTP: 40}
BACKENDS = ("asyncio", "trio")
UNTRACED, NO_SDK, BARE, SDK = (
    "untraced",
    "API only, no SDK",
    "toolloop's hooks, a tracer that keeps nothing",
    "SDK, in-memory exporter",
)
SIDES = (UNTRACED, NO_SDK, BARE, SDK)
SDK_ALONE = "the SDK alone, the same calls, no toolloop code, no turn"
BASELINE = "baseline"
COUNT = re.compile(r"I\s+refs:\s+([\d,]+)")


class Child:
    """What one counted process has: a turn of each side of its workload to run."""

    def __init__(self, workload: str, server: Any) -> None:
        from tests.bench import bench_observe as bench

        self.workload, self.server = workload, server
        self.sides, self.exported = bench.tracers()
        self.alone: Callable[[], None] | None = None
        if workload == IN_MEMORY:
            steps = bench.recorded_steps()
            sdk, self.alone_exported = bench.sdk_telemetry()
            calls = bench.SdkCalls()
            bench.replaying(bench.Telemetry(tracer_provider=calls, meter_provider=calls), steps)()
            self.alone = calls.replay(sdk)

    async def run(self, side: str, turns: int) -> None:
        """`turns` turns on `side` (the SDK-alone side: its replays); the baseline runs none.

        Over HTTP every run opens (and closes) a provider, the baseline's too.
        """
        from tests.bench import bench_observe as bench
        from toolloop.effects.providers.openai_compat import OpenAICompatProvider
        from toolloop.tools import demo_model

        if self.workload == IN_MEMORY:
            for _ in range(turns):
                if side == SDK_ALONE and self.alone is not None:
                    self.alone()
                    self.alone_exported.clear()
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
        """One turn of every side."""
        for side in SIDES:
            await self.run(side, 1)
        if self.alone is not None:
            await self.run(SDK_ALONE, 1)


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
    found = COUNT.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{' '.join(command[5:])} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def jobs() -> Iterator[tuple[str, str, str]]:
    """(workload, backend, side) of every counted process, a baseline per workload and backend."""
    for backend in BACKENDS:
        for workload in WORKLOADS:
            for side in (BASELINE, *SIDES):
                yield workload, backend, side
    yield IN_MEMORY, "asyncio", SDK_ALONE


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
            per[workload, backend, side] = (total - base) / (TURNS[workload] * WORKLOADS[workload])
    return per


def lines(per: dict[tuple[str, str, str], float]) -> Iterator[str]:
    """The figures as bench lines, each side against its workload's untraced figure."""
    for (workload, backend, side), instructions in per.items():
        base = per[workload, backend, UNTRACED]
        added = "" if side == UNTRACED else f" ({(instructions / base - 1) * 100:+.1f}%)"
        what = "a provider call over HTTP" if workload == HTTP else "a provider and a tool call"
        yield (
            f"tracing instructions {backend}, {workload} turn, {side}: "
            f"{instructions / 1000:,.0f} k instructions per iteration ({what}){added}"
        )


def available() -> bool:
    return shutil.which("valgrind") is not None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        workload, backend, side, turns = sys.argv[2:6]
        child(workload, backend, side, int(turns))
        return
    if not available():
        print("tracing instructions: valgrind is not installed, no figure")
        return
    for line in lines(figures()):
        print(line, flush=True)


if __name__ == "__main__":
    main()
