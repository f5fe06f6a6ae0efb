"""A worker process for the benchmark: `python -m tests.temporal.bench_worker TARGET QUEUE`.

It serves turns with bench_interpreter's trivial ports (one chunk, a tool that
answers at once) until it is killed, and prints `ready` once it polls.
"""

from __future__ import annotations

import asyncio
import sys

from tests.bench.bench_interpreter import Channel, Provider, Registry
from toolloop.durable import TurnPorts
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.temporal import connect, turn_worker


def ports(channel_id: str) -> TurnPorts:
    return TurnPorts(
        provider=Provider(), registry=Registry(), channel=Channel(), control=MemoryTurnControl()
    )


async def main(target: str, queue: str) -> None:
    client = await connect(target)
    async with turn_worker(client, ports, task_queue=queue):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
