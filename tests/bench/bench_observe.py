"""What watching costs: OpenTelemetry tracing per iteration, and the inspector over 1,000 turns.

* Tracing: bench_loop's turn (100 tool calls through `run_tool_loop`, an
  in-memory provider: the loop's own cost, about 40 µs an iteration), and the
  demo conversation over loopback HTTP (the real adapter against the demo
  model's server, no delay), each with no hooks, with `Telemetry` on the
  global no-op providers (the API installed, no SDK), and with `Telemetry` on
  a configured SDK (a `TracerProvider` whose `SimpleSpanProcessor` exports
  every span at its end to an in-memory exporter, a `MeterProvider` with an
  in-memory reader). A fourth side splits the SDK's cost from toolloop's: its
  tracer's spans record (so every hook runs and builds every attribute) but
  each of their methods does nothing, and its meters are the API's no-ops.
  CPU µs per iteration (in memory: a provider call and a tool call; over HTTP:
  a provider call), the sides alternating in one run, best of several rounds
  (of many short ones over HTTP), the load average printed beside them; goal:
  at most 20% added.
* The headline, stable run to run: the same sides' instructions per iteration, each
  side in a process of its own under valgrind (`tests/bench/tracing_counts.py`),
  and the SDK alone making a traced turn's calls. A side that does nothing reads
  within about 0.5% of none, where the CPU times below move by +-25%.
* Where the SDK's time goes: the recorded turn below replayed into a
  `TurnTrace` on the bare tracer (toolloop's share), into the SDK, and the SDK
  alone making the very calls that `TurnTrace` made (`tests/bench/sdk_calls.py`
  logs them once and makes them again with no toolloop code): the floor any
  instrumentation of that shape pays.
* The hooks alone, the figure least moved by a busy machine: a recorded
  100-call turn's steps replayed into `host_events`, a `TurnTrace` on the
  bare tracer (host events included) and an inspector's `TurnView`, with no
  loop around them. CPU µs per iteration, best of many rounds.
* Inspector: 1,000 concurrent 10-iteration turns, started and ended all
  through the run (`steady`): unwatched, unwatched again (the control: what
  the machine alone moves a figure by), watched by an `Inspector` served on
  loopback with no page open, and watched by one served with one page (an
  SSE client in a process of its own, as a browser tab is) following
  `/api/events`; both servers run throughout, so a side pays only for what
  differs. Each side's instructions per iteration under valgrind, round by
  round (`tests/bench/inspector_counts.py`). Then process CPU per iteration
  (the servers' threads included), `INSPECTOR_ROUNDS` rounds, each side
  after each other side as often (`balanced`): each round's figure against the same round's
  unwatched one (median and quartiles of these paired ratios), and best
  against best; goal: at most 10% added. The same sides over loopback HTTP on
  asyncio, each turn's provider calls going to a model in a process of its
  own (`HttpModel`), as a bot's do. And the page's update rate: pushes,
  bytes and turns a push while the turns ran; the hook timed where it runs,
  among the 1,000 turns (`in_place`); and the memory the inspector holds for
  1,000 finished turns it keeps (tracemalloc).
"""

from __future__ import annotations

import gc
import itertools
import os
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.bench import inspector_counts, model_process, tracing_counts
from tests.bench.bench_loop import REGISTRY, TURN, Scripted
from tests.bench.instructions import have_valgrind
from tests.bench.sdk_calls import EVENTS, POINTS, SPANS, SdkCalls
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.inspect import Inspector, serve_in_thread
from toolloop.effects.inspect.board import STEP_ITEMS
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.observe import host_events
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.telemetry import Telemetry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import LoopConfig, TurnStatus
from toolloop.testing.model_server import ModelServer
from toolloop.tools import demo_model
from toolloop.tools.demo import demo_registry

CALLS = 100
ROUNDS = 5
HTTP_TURNS, HTTP_ROUNDS = 4, 15
"""Short windows, many of them: the best of 15 is the round a busy machine disturbed least."""
SDK_TRACED = "TurnTrace into the SDK, in-memory exporter"
SDK_ALONE = "the SDK alone, making the same calls with no toolloop code"
TURNS, TURN_CALLS = 1_000, 9
INSPECTOR_ROUNDS, RUNS, HTTP_INSPECTOR_ROUNDS = 12, 2, 4
"""A side's figure is `RUNS` turns' worth of iterations of each of `TURNS` concurrent workers
(`steady`), a second or two: many short rounds, so that a load that comes and goes meets
every side, and the median of a dozen paired ratios is not one noisy round's. Over HTTP a
side's turns take about twenty seconds: one balanced square of rounds."""


def balanced(names: list[str], rounds: int) -> list[list[str]]:
    """`rounds` orders of `names` in which each name follows each other name as often.

    A side's figure carries what the side before it left (the heap, the collector's
    counts, the caches), so no side may always come after the same one: turning one order
    round after round keeps every side's predecessor. These are the rows of a Williams
    square (its mirror too, for an odd number of names), taken in turn.
    """
    count = len(names)
    first = [0] + [(step + 1) // 2 if step % 2 else count - step // 2 for step in range(1, count)]
    rows = [[(at + shift) % count for at in first] for shift in range(count)]
    if count % 2:
        rows += [row[::-1] for row in rows]
    return [[names[at] for at in rows[round_ % len(rows)]] for round_ in range(rounds)]


Watch = Callable[[], AbstractContextManager[Any]]
"""A side of a comparison: what it hands the loop (`observer`, `on_event` where it has one)."""


Providers = Callable[[int, int], Any]
"""The provider of a worker's turn of `calls` tool calls: `providers(worker, calls)`."""


def scripted(worker: int, calls: int) -> Scripted:
    """bench_loop's in-memory provider, asking for `calls` tool calls."""
    return Scripted(calls)


async def turn(calls: int, watch: Watch, provider: Any = None) -> None:
    """bench_loop's turn: `calls` tool calls, from `provider` (else the in-memory one)."""
    with watch() as hooks:
        result = await run_tool_loop(
            turn=TURN,
            config=LoopConfig(max_function_call_iterations=calls + 1),
            provider=Scripted(calls) if provider is None else provider,
            registry=REGISTRY,
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
            observer=getattr(hooks, "observer", None),
            on_event=getattr(hooks, "on_event", None),
        )
    assert result.status is TurnStatus.COMPLETED, result.status


async def steady(watch: Watch, runs: int = RUNS, providers: Providers = scripted) -> None:
    """`TURNS` turns running at every moment, `runs` turns' worth of iterations each.

    Each of `TURNS` workers runs `runs * (TURN_CALLS + 1)` iterations in turns of
    `TURN_CALLS + 1`, its first turn cut short by its number and its last making up the
    rest: turns start and end all through the run, so the heap holds a steady mix of
    young and old turns, as a busy bot's does. In waves of turns that start together and
    end together, the heap swells and empties at once, and a side's figure moved by
    whether the collector's full collections fell at a wave's peak (about 150,000
    tracked objects) or between waves (60,000): 5 in three waves either way, but 889,000
    objects walked on the watched side against 578,000 unwatched, with allocation rates
    1% apart.
    """
    async with anyio.create_task_group() as group:
        for worker in range(TURNS):
            group.start_soon(_worker, worker, runs, watch, providers)


async def _worker(worker: int, runs: int, watch: Watch, providers: Providers) -> None:
    """A turn of `first` iterations (1 to `TURN_CALLS + 1`, by the worker's number),
    `runs - 1` whole turns, and a turn of the rest."""
    first = worker % (TURN_CALLS + 1) + 1
    await turn(first - 1, watch, providers(worker, first - 1))
    for _ in range(runs - 1):
        await turn(TURN_CALLS, watch, providers(worker, TURN_CALLS))
    if first <= TURN_CALLS:
        await turn(TURN_CALLS - first, watch, providers(worker, TURN_CALLS - first))


class HttpModel:
    """bench_loop's script over loopback HTTP, from a model in a process of its own
    (`tests.bench.model_process`), as a bot's model is; `HttpModel()(worker, calls)` is
    a worker's provider.

    Each worker has its own client, as a bot with a provider per conversation has: one
    httpx pool shared by every turn walks all its connections on each request (httpcore's
    `_assign_requests_to_connections`, encode/httpcore#1035): with 100 turns on one client
    with no connection limit, an iteration cost 5.6 ms of CPU instead of 1.1 ms.
    """

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.model_process", str(TURN_CALLS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.base_url = self._process.stdout.readline().strip()
        self._workers: dict[int, tuple[httpx.AsyncClient, list[OpenAICompatProvider]]] = {}

    def __call__(self, worker: int, calls: int) -> OpenAICompatProvider:
        if worker not in self._workers:
            client = httpx.AsyncClient()
            self._workers[worker] = (
                client,
                [
                    OpenAICompatProvider(
                        base_url=self.base_url,
                        model=model_process.MODEL,
                        client=client,
                        extra_body={"calls": asked},
                    )
                    for asked in range(TURN_CALLS + 1)
                ],
            )
        return self._workers[worker][1][calls]

    async def aclose(self) -> None:
        """Close the workers' clients (in the event loop that used them)."""
        for client, _ in self._workers.values():
            await client.aclose()
        self._workers.clear()

    def __enter__(self) -> HttpModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """End the model's process."""
        self._process.terminate()
        self._process.wait()


async def http_turn(provider: OpenAICompatProvider, watch: Watch) -> None:
    """The demo conversation over loopback HTTP: 3 provider calls, 2 tools."""
    with watch() as hooks:
        result = await run_generation_turn(
            turn=TURN,
            attempts=[Attempt(provider=provider, config=LoopConfig())],
            registry=demo_registry(),
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
            observer=getattr(hooks, "observer", None),
            on_event=getattr(hooks, "on_event", None),
        )
    assert result.status is TurnStatus.COMPLETED, result.status


class BareSpan(trace.NonRecordingSpan):
    """A span that says it records, so toolloop builds all it would give an SDK; it keeps none."""

    def is_recording(self) -> bool:
        return True


class BareTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return BareSpan(trace.INVALID_SPAN_CONTEXT)


class BareTracerProvider(trace.NoOpTracerProvider):
    """toolloop's share alone: every hook runs, the tracer behind them does nothing."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return BareTracer()


def sdk_telemetry() -> tuple[Telemetry, InMemorySpanExporter]:
    """`Telemetry` into an SDK: each span exported at its end to memory, an in-memory reader."""
    exported = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exported))
    sdk = Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
    )
    return sdk, exported


def tracers() -> tuple[dict[str, Watch], InMemorySpanExporter]:
    """The sides: untraced, `Telemetry` on the API's no-ops, on a bare tracer, into an SDK."""
    sdk, exported = sdk_telemetry()
    no_sdk = Telemetry()
    bare = Telemetry(tracer_provider=BareTracerProvider())
    sides: dict[str, Watch] = {
        "untraced": nullcontext,
        "API only, no SDK": lambda: no_sdk.turn(TURN),
        "toolloop's hooks, a tracer that keeps nothing": lambda: bare.turn(TURN),
        "SDK, in-memory exporter": lambda: sdk.turn(TURN),
    }
    return sides, exported


def tracing(backend: str) -> dict[str, float]:
    """Best CPU µs per iteration of the in-memory turn on each side, alternating."""
    sides, exported = tracers()

    async def rounds() -> dict[str, float]:
        best = dict.fromkeys(sides, float("inf"))
        for watch in sides.values():
            await turn(CALLS, watch)
        for _ in range(ROUNDS):
            for name, watch in sides.items():
                started = time.process_time()
                for _ in range(10):
                    await turn(CALLS, watch)
                best[name] = min(best[name], (time.process_time() - started) / (10 * (CALLS + 1)))
                exported.clear()
        return {name: seconds * 1e6 for name, seconds in best.items()}

    result: dict[str, float] = anyio.run(rounds, backend=backend)
    return result


def tracing_http(backend: str) -> dict[str, float]:
    """Best CPU µs (the model server's thread included) per iteration of the HTTP turn."""
    sides, exported = tracers()

    async def rounds() -> dict[str, float]:
        best = dict.fromkeys(sides, float("inf"))
        with ModelServer(demo_model.chunks, delay=0) as server:
            provider = OpenAICompatProvider(base_url=server.base_url, model=demo_model.MODEL)
            async with provider:
                for watch in sides.values():
                    await http_turn(provider, watch)
                for _ in range(HTTP_ROUNDS):
                    for name, watch in sides.items():
                        started = time.process_time()
                        for _ in range(HTTP_TURNS):
                            await http_turn(provider, watch)
                        spent = (time.process_time() - started) / (HTTP_TURNS * 3)
                        best[name] = min(best[name], spent)
                        exported.clear()
        return {name: seconds * 1e6 for name, seconds in best.items()}

    result: dict[str, float] = anyio.run(rounds, backend=backend)
    return result


class Page:
    """A page following `/api/events` from a process of its own (`tests.bench.sse_page`), as a
    browser tab is: the bot's process pays for serving it, not for a tab's parsing."""

    def __init__(self, url: str) -> None:
        self.pushes: list[tuple[float, int, int]] = []
        """(monotonic time, turns in the push, bytes of its data) of each `turns` event."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.sse_page", url],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        """Each push the page printed, as it prints it: a line a push, about ten a second."""
        assert self._process.stdout is not None
        for line in self._process.stdout:
            at, turns, size = line.split()
            self.pushes.append((float(at), int(turns), int(size)))

    def close(self) -> None:
        self._process.terminate()
        self._process.wait()
        self._thread.join()


def inspector(backend: str, model: HttpModel | None = None) -> dict[str, Any]:
    """1,000 concurrent turns unwatched (twice), watched with no page, with one page: CPU, wall.

    In memory (`scripted`), `INSPECTOR_ROUNDS` rounds of `RUNS` turns' worth a worker; over
    HTTP (`model`), whose iterations cost twenty times more, `HTTP_INSPECTOR_ROUNDS` of one.

    Both inspectors are served (each its own uvicorn thread), one with a page following
    it, for the whole run: a side pays only for what differs. Per side, the CPU µs an
    iteration of each round, to be set against the same round's unwatched one: a round's
    sides ran within seconds of each other, so a load that comes and goes moves them
    together. The heap is not collected between sides: a collection resets the
    collector's counts, so every side would start its full collections at the same point
    and a side's figure would hang on whether its allocations, a percent apart, put one
    more full collection (of up to 150,000 objects) inside its run; unreset, where they
    fall moves from round to round and evens out.
    """
    followed, unfollowed = Inspector(), Inspector()  # each keeps 200 finished, as a bot's
    served = [serve_in_thread(followed, port=0), serve_in_thread(unfollowed, port=0)]
    page = Page(served[0].url)
    time.sleep(0.5)
    sides: dict[str, Watch] = {
        "unwatched": nullcontext,
        "unwatched again": nullcontext,
        "watched, no page": lambda: unfollowed.watch(TURN),
        "watched, one page": lambda: followed.watch(TURN),
    }
    windows: list[tuple[float, float]] = []
    providers: Providers = scripted if model is None else model
    count, each = (INSPECTOR_ROUNDS, RUNS) if model is None else (HTTP_INSPECTOR_ROUNDS, 1)

    async def rounds() -> dict[str, list[tuple[float, float]]]:
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        try:
            for watch in sides.values():
                await steady(watch, each, providers)
            for order in balanced(list(sides), count):
                for name in order:
                    cpu, wall = time.process_time(), time.monotonic()
                    await steady(sides[name], each, providers)
                    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                    if name == "watched, one page":
                        windows.append((time.monotonic() - wall, time.monotonic()))
                    runs[name].append((cpu / (each * TURNS * (TURN_CALLS + 1)) * 1e6, wall))
        finally:
            if model is not None:
                await model.aclose()
        return runs

    try:
        runs = anyio.run(rounds, backend=backend)
        time.sleep(0.3)
    finally:
        page.close()
        for running in served:
            running.stop()
    during = [
        (count, size)
        for at, count, size in page.pushes
        if any(start <= at <= end + 0.15 for start, end in windows)
    ]
    watched_time = sum(end - start for start, end in windows)
    return {
        "runs": runs,
        "pushes per second": len(during) / watched_time if watched_time else 0.0,
        "bytes per second": sum(size for _, size in during) / watched_time if watched_time else 0.0,
        "turns per push": sum(count for count, _ in during) / len(during) if during else 0.0,
    }


def held() -> tuple[float, float]:
    """Bytes the inspector holds per finished turn it keeps (1,000 kept), and per step."""
    watcher = Inspector(keep_finished=TURNS)

    async def together() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(TURNS):
                group.start_soon(turn, TURN_CALLS, lambda: watcher.watch(TURN))

    anyio.run(together)  # the first run's caches (moves' texts, imports) are not the turns'
    watcher = Inspector(keep_finished=TURNS)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        anyio.run(together)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    steps = sum(len(view.timeline) // STEP_ITEMS for view in watcher.turns())
    return kept / TURNS, kept / steps


def in_place(rounds: int = 3) -> tuple[float, float, tuple[int, int]]:
    """The inspector's hook timed where it runs: its median ns a step, the timing's own, and
    the steps timed (the hook's, the no-op's).

    Replayed alone (`hooks_alone`) the hook finds its code and data in the caches; among
    `TURNS` turns it does not. In `steady` runs every other turn is watched, so the hook and
    a no-op (on the other turns) meet the same heap and the same load; each call is timed
    with `perf_counter_ns`, and the no-op's median is what the timing itself costs.
    """
    watcher, turns, clock = Inspector(), itertools.count(), time.perf_counter_ns
    timed: tuple[list[int], list[int]] = ([], [])

    def noop(state: Any, event: Any, out: Any) -> None:
        """What an unwatched turn's step would call."""

    @contextmanager
    def alternate() -> Iterator[Any]:
        watched = next(turns) % 2
        samples = timed[watched]
        with watcher.watch(TURN) if watched else nullcontext() as view:
            inner = view.observer if view is not None else noop

            def observer(state: Any, event: Any, out: Any) -> None:
                started = clock()
                inner(state, event, out)
                samples.append(clock() - started)

            yield SimpleNamespace(observer=observer)

    async def run() -> None:
        await steady(alternate, 1)  # warm: the hook's texts made, the heap grown
        for samples in timed:
            samples.clear()
        for _ in range(rounds):
            await steady(alternate, 1)

    anyio.run(run)
    noop_ns, hook_ns = (statistics.median(samples) for samples in timed)
    return hook_ns - noop_ns, noop_ns, (len(timed[1]), len(timed[0]))


def recorded_steps() -> list[Any]:
    """The (state, event, step) of every step of bench_loop's turn, for replaying into hooks."""
    steps: list[Any] = []
    recorder = SimpleNamespace(observer=lambda state, event, out: steps.append((state, event, out)))
    anyio.run(turn, CALLS, lambda: nullcontext(recorder))
    return steps


def replaying(telemetry: Telemetry, steps: list[Any]) -> Callable[[], None]:
    """A turn's recorded steps (and their host events) fed to a `TurnTrace`, with no loop."""
    redact = REGISTRY.redact

    def replay() -> None:
        with telemetry.turn(TURN) as hooks:
            observer, on_event = hooks.observer, hooks.on_event
            assert observer is not None and on_event is not None
            for state, event, out in steps:
                observer(state, event, out)
                for shown in host_events(0, state, event, out, redact):
                    on_event(shown)

    return replay


def best_replays(sides: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Best CPU µs per iteration of each side's replay of the recorded turn, alternating."""

    async def rounds() -> dict[str, float]:  # in a loop: the inspector reads its clock
        best = dict.fromkeys(sides, float("inf"))
        for _ in range(ROUNDS * 6):
            for name, replay in sides.items():
                started = time.process_time()
                for _ in range(10):
                    replay()
                spent = (time.process_time() - started) / (10 * (CALLS + 1))
                best[name] = min(best[name], spent * 1e6)
        return best

    result: dict[str, float] = anyio.run(rounds)
    return result


def hooks_alone() -> dict[str, float]:
    """CPU µs per iteration of each observer over a recorded turn's steps, with no loop."""
    steps = recorded_steps()
    bare, watcher, redact = (
        Telemetry(tracer_provider=BareTracerProvider()),
        Inspector(),
        REGISTRY.redact,
    )

    def host() -> None:
        for state, event, out in steps:
            for _ in host_events(0, state, event, out, redact):
                pass

    def watched() -> None:
        with watcher.watch(TURN) as view:
            for state, event, out in steps:
                view.observer(state, event, out)

    sides = {
        "host events": host,
        "TurnTrace on the bare tracer, host events included": replaying(bare, steps),
        "inspector TurnView": watched,
    }

    return best_replays(sides)


def sdk_share() -> tuple[dict[str, float], dict[str, float]]:
    """CPU µs per iteration of a recorded turn replayed into a `TurnTrace`, and the SDK's part.

    And what the SDK alone spends on each span (its start, attributes, end and
    export), each step event and each measurement: its figure for those alone,
    by how many of them an iteration asks for.

    The sides: the `TurnTrace` on the bare tracer (toolloop's share), into the SDK,
    and the SDK alone making the very calls that `TurnTrace` made into it (logged
    once by `SdkCalls`, made again with no toolloop code around them).
    """
    steps = recorded_steps()
    sdk, exported = sdk_telemetry()
    calls = SdkCalls()
    replaying(Telemetry(tracer_provider=calls, meter_provider=calls), steps)()
    bare = replaying(Telemetry(tracer_provider=BareTracerProvider()), steps)
    traced = replaying(sdk, steps)

    def cleared(replay: Callable[[], None]) -> Callable[[], None]:
        def then_clear() -> None:
            replay()
            exported.clear()

        return then_clear

    sides = {"TurnTrace on the bare tracer (toolloop's share)": bare}
    sides |= {SDK_TRACED: cleared(traced), SDK_ALONE: cleared(calls.replay(sdk))}
    for what in (SPANS, EVENTS, POINTS):
        sides[f"{SDK_ALONE}, its {what} only"] = cleared(calls.replay(sdk, frozenset({what})))

    result = best_replays(sides)
    each = {
        what: result[f"{SDK_ALONE}, its {what} only"] * (CALLS + 1) / calls.count(what)
        for what in (SPANS, EVENTS, POINTS)
    }
    return result, each


def load() -> str:
    """The machine's load average (1, 5, 15 minutes): every figure here moves with it."""
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def tracing_figures() -> None:
    """The tracing figures: instructions, the SDK's share of a replayed turn, then CPU times."""
    if have_valgrind():
        for line in tracing_counts.lines(tracing_counts.figures()):
            print(line, flush=True)
    else:
        print("tracing instructions: valgrind is not installed, no figure")
    print(f"tracing, {load()}")
    share, each = sdk_share()
    for name, micros in share.items():
        print(f"tracing, a recorded {CALLS}-call turn replayed, {name}: {micros:.1f} µs/iteration")
    traced, alone = share[SDK_TRACED], share[SDK_ALONE]
    print(f"tracing, the SDK's own part of a traced iteration: {alone / traced * 100:.0f}%")
    for what, micros in each.items():
        print(f"tracing, the SDK alone, one of its {what}: {micros:.1f} µs")
    for backend in ("asyncio", "trio"):
        for workload, measure, per in (
            ("in-memory", tracing, "iteration (a provider call and a tool call)"),
            ("loopback HTTP", tracing_http, "iteration (a provider call over HTTP)"),
        ):
            figures = measure(backend)
            base = figures["untraced"]
            for name, micros in figures.items():
                added = f" ({(micros / base - 1) * 100:+.0f}%)" if name != "untraced" else ""
                print(
                    f"tracing {backend}, {workload} turn, {name}: "
                    f"{micros:.1f} µs CPU per {per}{added}"
                )
            print(f"tracing {backend}, {workload} turn measured, {load()}")


def main() -> None:
    for name, micros in hooks_alone().items():
        print(
            f"hooks alone, a recorded {CALLS}-call turn replayed, {name}: {micros:.1f} µs/iteration"
        )
    tracing_figures()
    inspector_figures()


MEMORY, HTTP = "in memory", "over loopback HTTP"


def inspector_figures() -> None:
    """The inspector's figures: instructions; CPU per side in memory on both backends and over
    loopback HTTP on asyncio, with the page's updates; the hook in place; memory."""
    if have_valgrind():
        inspector_counts.report()
    else:
        print("inspector instructions: valgrind is not installed, no figure")
    print(f"inspector, {load()}")
    for backend, workload in (("asyncio", MEMORY), ("trio", MEMORY), ("asyncio", HTTP)):
        with HttpModel() if workload == HTTP else nullcontext() as model:
            measured = inspector(backend, model)
        base = [cpu for cpu, _ in measured["runs"]["unwatched"]]
        for name, runs in measured["runs"].items():
            cpu = [figure for figure, _ in runs]
            added = ""
            if name != "unwatched":
                paired = [(mine / theirs - 1) * 100 for mine, theirs in zip(cpu, base, strict=True)]
                low, middle, high = statistics.quantiles(paired, n=4)
                added = (
                    f" (paired by round: median {middle:+.1f}%, quartiles {low:+.1f}% to"
                    f" {high:+.1f}%; {(min(cpu) / min(base) - 1) * 100:+.1f}% best against best)"
                )
            print(
                f"inspector {backend}, {TURNS:,} concurrent turns {workload}, {name}: "
                f"{min(cpu):.1f} µs/iteration (CPU, all threads; best of {len(cpu)}), "
                f"{min(wall for _, wall in runs):.2f} s wall{added}"
            )
        print(
            f"inspector {backend}, {workload}, page updates while the turns ran: "
            f"{measured['pushes per second']:.1f} pushes/s, "
            f"{measured['bytes per second'] / 1000:.0f} kB/s, "
            f"{measured['turns per push']:.0f} turns a push"
        )
    hook_ns, timing_ns, _ = in_place()
    print(
        f"inspector, the hook where it runs, among {TURNS:,} turns: {hook_ns:.0f} ns a step "
        f"(median; the timing itself, taken off: {timing_ns:.0f} ns)"
    )
    per_turn, per_step = held()
    print(
        f"inspector, memory held for {TURNS:,} finished turns kept: "
        f"{per_turn / 1000:.1f} kB a turn, {per_step:.0f} bytes a step"
    )
    print(f"inspector measured, {load()}")


if __name__ == "__main__":
    main()
