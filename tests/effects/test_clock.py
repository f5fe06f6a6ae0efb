"""`loop_clock`: the clock `anyio.current_time` reads, found once."""

from __future__ import annotations

import asyncio
import time

import anyio
import trio
import trio.testing

from toolloop.effects.clock import loop_clock


def test_under_asyncio_it_is_the_clock_of_asyncios_own_loop_time_even_with_trio_imported() -> None:
    """Trio imported but not running: `time.monotonic`, which asyncio's `loop.time` reads."""

    async def main() -> tuple[bool, float, float, float]:
        before = asyncio.get_running_loop().time()
        now = loop_clock()()
        return loop_clock() is time.monotonic, before, now, asyncio.get_running_loop().time()

    is_monotonic, before, now, after = asyncio.run(main())
    assert is_monotonic and before <= now <= after


class ShiftedLoop(asyncio.SelectorEventLoop):
    """A loop with a clock of its own, as a test's mocked loop has."""

    def time(self) -> float:
        return 1_000.0 + super().time()


def test_under_an_asyncio_loop_with_its_own_clock_it_is_that_loops_time() -> None:
    """A loop that overrides `time`: its clock, which anyio reads too, not `time.monotonic`."""

    async def main() -> tuple[float, float]:
        return loop_clock()(), anyio.current_time()

    loop = ShiftedLoop()
    try:
        now, anyio_now = loop.run_until_complete(main())
    finally:
        loop.close()
    assert 1_000.0 + time.monotonic() - 60 < now <= anyio_now


def test_under_trio_it_is_trios_clock_mocked_or_not() -> None:
    """In a trio run, trio's clock: a MockClock's virtual time, as `anyio.current_time` reads it."""

    async def main() -> tuple[float, float]:
        await trio.sleep(5)
        return loop_clock()(), anyio.current_time()

    now, anyio_now = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert now == anyio_now == 5.0


def test_in_a_trio_guest_run_on_asyncio_it_is_trios_clock() -> None:
    """Trio as a guest of asyncio's loop: trio's clock, as anyio (through sniffio) sees it."""
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def in_trio() -> tuple[float, float]:
        await trio.sleep(7)
        return loop_clock()(), anyio.current_time()

    async def host() -> tuple[float, float]:
        loop, done = asyncio.get_running_loop(), asyncio.get_running_loop().create_future()
        trio.lowlevel.start_guest_run(
            in_trio,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=lambda outcome: done.set_result(outcome.unwrap()),
            clock=clock,
        )
        result: tuple[float, float] = await done
        return result

    assert asyncio.run(host()) == (7.0, 7.0)
