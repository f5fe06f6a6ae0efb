"""bench_observe's inspector harness: the steady mix of turns, and the page in its own process."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.bench import bench_observe as bench
from tests.bench.bench_loop import TURN
from toolloop.effects.inspect import Inspector, serve_in_thread
from toolloop.engine.events import StreamEnded


def counting_calls(turns: list[list[int]]) -> bench.Watch:
    """A side that appends to `turns` each turn's count of provider calls, as it makes them."""

    @contextmanager
    def counting() -> Iterator[Any]:
        calls = [0]
        turns.append(calls)

        def observer(state: Any, event: Any, out: Any) -> None:
            calls[0] += type(event) is StreamEnded

        yield SimpleNamespace(observer=observer)

    return counting


def test_steady_runs_every_worker_through_the_same_iterations_in_staggered_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker makes `runs` whole turns' provider calls; its first turn is cut by its
    number, so the workers' turns end at every iteration, not all at once."""
    monkeypatch.setattr(bench, "TURNS", 25)
    turns: list[list[int]] = []
    counting = counting_calls(turns)

    anyio.run(bench.steady, counting, 3)
    whole = bench.TURN_CALLS + 1
    lengths = sorted(calls for (calls,) in turns)
    firsts = [worker % whole + 1 for worker in range(25)]  # 1 to 10, 1 to 10, 1 to 5
    cut = sorted([first for first in firsts if first < whole] + [whole - f for f in firsts])
    assert lengths == sorted([length for length in cut if length] + [whole] * (25 * 2 + 2))
    assert sum(lengths) == 25 * 3 * whole


def test_the_page_follows_the_event_stream_from_a_process_of_its_own() -> None:
    """A watched turn's row reaches the page's process, which reports each push; closing it
    ends that process."""
    inspector = Inspector()
    served = serve_in_thread(inspector, port=0)
    page = bench.Page(served.url)
    try:
        with inspector.watch(TURN):
            deadline = time.monotonic() + 30
            while not page.pushes and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        page.close()
        served.stop()
    at, turns, size = page.pushes[0]
    assert turns == 1 and size > 0 and at <= time.monotonic()
    assert page._process.returncode is not None


@given(st.integers(min_value=2, max_value=9))
def test_balanced_orders_put_each_side_after_each_other_side_equally_often(count: int) -> None:
    """Invariant: over a whole cycle of `balanced`'s rounds (a Williams square, mirrored for an
    odd count), every round runs each side once and each side comes right after each other
    side as often as after any other."""
    names = [f"side {number}" for number in range(count)]
    cycle = count if count % 2 == 0 else 2 * count
    rounds = bench.balanced(names, cycle)
    assert all(sorted(order) == sorted(names) for order in rounds)
    after = Counter((order[at], order[at + 1]) for order in rounds for at in range(count - 1))
    assert len(after) == count * (count - 1) and len(set(after.values())) == 1
    assert bench.balanced(names, 2 * cycle) == rounds + rounds


def test_in_place_times_the_hook_on_every_other_turn_of_the_same_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every step of the timed run is timed once, by the hook on watched turns and by the
    no-op on the others, and both have some (the medians' size is the benchmark's to report,
    not this test's)."""
    monkeypatch.setattr(bench, "TURNS", 20)
    _, _, (hooked, unhooked) = bench.in_place(rounds=1)
    # A turn of n tool calls takes 2n + 2 steps, so each worker's run of `TURN_CALLS + 1`
    # iterations (in two turns, or one) takes 2 * (TURN_CALLS + 1).
    assert hooked + unhooked == 20 * 2 * (bench.TURN_CALLS + 1)
    assert hooked > 0 and unhooked > 0


def test_steady_over_http_makes_every_call_against_the_models_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over HTTP each worker's turns make all their provider calls against the model's
    process, through a client of the worker's own; leaving its `with` ends that process."""
    turns: list[list[int]] = []
    counting = counting_calls(turns)

    clients: list[int] = []

    async def run(model: bench.HttpModel) -> None:
        try:
            await bench.steady(counting, 2, model)
            clients.append(len(model._workers))
        finally:
            await model.aclose()

    monkeypatch.setattr(bench, "TURNS", 4)
    with bench.HttpModel() as model:
        anyio.run(run, model)
    assert sum(calls for (calls,) in turns) == 4 * 2 * (bench.TURN_CALLS + 1)
    assert clients == [4] and model._process.returncode is not None
