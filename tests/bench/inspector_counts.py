"""Instructions per iteration of 1,000 concurrent turns, unwatched and watched by the inspector.

A CPU-time figure of this comparison on a shared machine moved by -2% to +46% from
round to round; an instruction count hardly moves. One process per backend runs
under valgrind's callgrind (every instruction of the process: the servers' threads
too), with `PYTHONHASHSEED` fixed, and runs bench_observe's sides in turn:
unwatched, watched by an `Inspector` served on loopback with no page open, watched
by one served with one page (an SSE client in a process of its own, not counted, as
a browser tab is not) following `/api/events`. Both servers run throughout, so a
side pays only for what differs. Before each side's run (bench_observe's `steady`
run of one turn's worth of iterations for each of `TURNS` workers), the process
calls `os.getppid` (nothing else here does), where callgrind dumps its counters:
each dump is one side's run. A side's figure is its instructions over its
iterations; `ROUNDS` rounds, each side after each other as often, show how far a
figure moves. The heap is not collected between sides (see
`bench_observe.inspector`): where the collector's full collections fall moves from
run to run, and is part of that spread.

The page pushes by the clock, at most `RATE` times a second, and valgrind slows the
process many times over: served at `RATE`, it would push many times more often per
turn than it does at full speed. So the child first times an unwatched run and serves
the pages at `RATE` divided by its slowdown against the same run at full speed
(timed by the parent): the pushes per 1,000 turns are printed beside the figures.

    python -m tests.bench.inspector_counts          # both backends, ~30 min on 2 busy cores
    python -m tests.bench.inspector_counts asyncio  # one
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio

from tests.bench.instructions import have_valgrind

BACKENDS = ("asyncio", "trio")
UNWATCHED, NO_PAGE, ONE_PAGE = "unwatched", "watched, no page", "watched, one page"
SIDES = (UNWATCHED, NO_PAGE, ONE_PAGE)
ROUNDS = 2
WARM_TURNS = 50
"""Turns a watched side runs before it is counted: its first-call work done (valgrind
runs a side of 1,000 turns in about a minute on an idle core, and many on a busy one)."""
RATE = 10.0
"""The pushes a second a page asks for at full speed: `serve_in_thread`'s default."""
IDLE, IDLE_SECONDS = "idle", 20.0
"""A run of no turns: what the servers and the page do by the clock alone, a second."""
MARK = "os_getppid"
"""The C function behind `os.getppid`: callgrind dumps its counters as it is entered."""
SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


async def warm(watch: Any) -> None:
    """`WARM_TURNS` concurrent turns, each watched by `watch`."""
    from tests.bench import bench_observe as bench

    async with anyio.create_task_group() as group:
        for _ in range(WARM_TURNS):
            group.start_soon(bench.turn, bench.TURN_CALLS, watch)


def timed_run(backend: str) -> float:
    """Seconds of wall time one unwatched run of a side takes, warmed, best of two."""
    from tests.bench import bench_observe as bench

    async def timed() -> float:
        await bench.steady(nullcontext, 1)
        best = float("inf")
        for _ in range(2):
            started = time.monotonic()
            await bench.steady(nullcontext, 1)
            best = min(best, time.monotonic() - started)
        return best

    seconds: float = anyio.run(timed, backend=backend)
    return seconds


def order(rounds: int) -> list[str]:
    """The sides in the order they run: every side once a round, each after each other side
    as often (`bench_observe.balanced`)."""
    from tests.bench import bench_observe as bench

    return [side for each in bench.balanced(list(SIDES), rounds) for side in each]


def plan(rounds: int) -> list[str]:
    """What the child runs between its marks: the sides' `order`, an idle run before and after."""
    return [IDLE, *order(rounds), IDLE]


def child(backend: str, full_speed: float, rounds: int) -> None:
    """The counted process: a timed unwatched run, the servers and the page, then the sides.

    Prints (JSON) its slowdown, and the page's pushes and the wall time of each run.
    """
    from tests.bench import bench_observe as bench
    from toolloop.effects.inspect import Inspector, serve_in_thread

    followed, unfollowed = Inspector(), Inspector()
    watches = {
        UNWATCHED: nullcontext,
        NO_PAGE: lambda: unfollowed.watch(bench.TURN),
        ONE_PAGE: lambda: followed.watch(bench.TURN),
    }
    served, pushes, walls = [], [], []

    async def sides() -> float:
        started = time.monotonic()
        await bench.steady(nullcontext, 1)
        slowdown = (time.monotonic() - started) / full_speed
        for inspector in (followed, unfollowed):
            served.append(serve_in_thread(inspector, port=0, rate=RATE / slowdown))
        page = bench.Page(served[0].url)
        for watch in watches.values():  # the watched sides' first-call work, and the page's
            await warm(watch)
        while not page.pushes:
            await anyio.sleep(0.1)
        for side in plan(rounds):
            before, started = len(page.pushes), time.monotonic()
            os.getppid()
            if side == IDLE:
                await anyio.sleep(IDLE_SECONDS)
            else:
                await bench.steady(watches[side], 1)
            walls.append(time.monotonic() - started)
            pushes.append(len(page.pushes) - before)
        os.getppid()
        page.close()
        return slowdown

    try:
        slowdown = anyio.run(sides, backend=backend)
    finally:
        for running in served:
            running.stop()
    print(json.dumps({"slowdown": slowdown, "pushes": pushes, "walls": walls}))


def dumped(folder: Path) -> list[int]:
    """The instructions of each of callgrind's dumps in `folder` (`cg.1`, `cg.2`, ...), in order."""
    numbered = sorted(folder.glob("cg.*"), key=lambda path: int(path.suffix[1:]))
    return [per_dump(path.read_text()) for path in numbered]


def per_dump(text: str) -> int:
    """The instruction total of one callgrind dump (its `summary:` line); none is an error."""
    found = SUMMARY.search(text)
    if found is None:
        raise ValueError(f"no 'summary:' line in callgrind's dump:\n{text[:500]}")
    return int(found.group(1))


def segments(dumps: list[int], sides: list[str]) -> list[int]:
    """Each side's instructions: the dumps after the first (everything before the first mark)."""
    if len(dumps) != len(sides) + 1:
        raise ValueError(
            f"callgrind dumped {len(dumps)} times, not {len(sides) + 1}: something else called "
            f"{MARK}, or the run ended early"
        )
    return dumps[1:]


def counted(backend: str, full_speed: float, rounds: int) -> dict[str, Any]:
    """A child under callgrind: each side's instructions per iteration and pushes, by run."""

    with tempfile.TemporaryDirectory(prefix="toolloop-inspector-counts-") as scratch:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--dump-before={MARK}",
            f"--callgrind-out-file={scratch}/cg",
            sys.executable,
            "-m",
            "tests.bench.inspector_counts",
            "run",
            backend,
            repr(full_speed),
            str(rounds),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[4:])} failed:\n{done.stderr[-2000:]}")
        sides = plan(rounds)
        counts = segments(dumped(Path(scratch)), sides)
    told = json.loads(done.stdout.splitlines()[-1])
    return shared_out(sides, counts, told, full_speed)


def shared_out(
    sides: list[str], counts: list[int], told: dict[str, Any], full_speed: float
) -> dict[str, Any]:
    """Each side's instructions per iteration, the clock's work counted at full speed.

    The servers tick and the page's stream checks its turns by the clock, so under
    valgrind they run `slowdown` times more often per turn than at full speed. The idle
    runs give their instructions a second; a side's run keeps `1 / slowdown` of what
    its wall time made of them, the share its run at full speed would have.
    """
    from tests.bench import bench_observe as bench

    slowdown, walls = told["slowdown"], told["walls"]
    idle = [
        (count, wall)
        for side, count, wall in zip(sides, counts, walls, strict=True)
        if side == IDLE
    ]
    clock = sum(count for count, _ in idle) / sum(wall for _, wall in idle)
    iterations = bench.TURNS * (bench.TURN_CALLS + 1)
    runs: dict[str, list[tuple[float, int]]] = {side: [] for side in SIDES}
    for side, count, wall, pushed in zip(sides, counts, walls, told["pushes"], strict=True):
        if side != IDLE:
            kept = count - clock * wall * (1 - 1 / slowdown)
            runs[side].append((kept / iterations, pushed))
    return {"runs": runs, "slowdown": slowdown, "full speed": full_speed, "clock": clock}


def lines(backend: str, measured: dict[str, Any]) -> Iterator[str]:
    """The figures as bench lines: each run's against the unwatched run of its round."""
    runs = measured["runs"]
    base = [instructions for instructions, _ in runs[UNWATCHED]]
    yield (
        f"inspector instructions {backend}: valgrind ran {measured['slowdown']:.0f} times slower "
        f"than full speed ({measured['full speed']:.2f} s a run of 1,000 turns, so at most "
        f"{RATE * measured['full speed']:.0f} pushes a run); the page served at {RATE:g} "
        f"pushes/s over that; the clock's work (servers' ticks) {measured['clock'] / 1e6:.1f}M "
        "instructions a second, counted at full speed"
    )
    for side in SIDES:
        figures = [instructions for instructions, _ in runs[side]]
        shown = ", ".join(f"{figure / 1000:.1f}k" for figure in figures)
        added = ""
        if side != UNWATCHED:
            paired = [(mine / theirs - 1) * 100 for mine, theirs in zip(figures, base, strict=True)]
            added = " (" + ", ".join(f"{each:+.1f}%" for each in paired) + " added)"
        pushed = ""
        if side == ONE_PAGE:
            pushed = "; the page's pushes a run: " + ", ".join(str(n) for _, n in runs[side])
        yield (
            f"inspector instructions {backend}, 1,000 concurrent turns, {side}: {shown} "
            f"instructions per iteration, round by round{added}{pushed}"
        )


def report(wanted: tuple[str, ...] = BACKENDS) -> None:
    """Print the figures of the `wanted` backends, counted side by side."""
    full_speed = [timed_run(backend) for backend in wanted]  # one at a time: no thread slows it
    with ThreadPoolExecutor(len(wanted)) as pool:
        measured = list(pool.map(counted, wanted, full_speed, [ROUNDS] * len(wanted)))
    for backend, figures in zip(wanted, measured, strict=True):
        for line in lines(backend, figures):
            print(line, flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        child(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
        return
    unknown = [name for name in sys.argv[1:] if name not in BACKENDS]
    if unknown:
        sys.exit(f"inspector_counts: unknown backend {unknown}: choose from {list(BACKENDS)}")
    if not have_valgrind():
        sys.exit("inspector_counts: valgrind is not installed (apt-get install valgrind)")
    report(tuple(sys.argv[1:]) or BACKENDS)


if __name__ == "__main__":
    main()
