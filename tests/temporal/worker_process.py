"""A worker process for the kill -9 tests: `python -m tests.temporal.worker_process TARGET
QUEUE WORLD BASE_URL`.

It serves the queue until it is killed. What outlives it is in the WORLD folder:
`channel.jsonl` (each piece of text the channel accepted), `charges.jsonl` (each
run of `charge`, which then waits on the bank until the process is killed),
`asked.jsonl` (each approval prompt shown; the person answers through the
workflow's `decide` update), `pays.jsonl` (each run of `pay`, which needs
approval) and `holds.jsonl` (each run of `hold`, idempotent, which then waits until
the process is killed). It prints `ready` once it polls the queue. With the
environment variable `TOOLLOOP_TEST_DIE_AFTER` set, it kills itself right after its channel
took that piece of text (`FileChannel.die_after`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import anyio

from tests.durable.bot import DIE_AFTER, FileChannel
from toolloop.durable import TurnPorts
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import ApprovalDecision, ApprovalRequest, JsonObject
from toolloop.temporal import connect, turn_worker


def append(path: Path, value: object) -> None:
    with path.open("a") as out:
        out.write(json.dumps(value) + "\n")


class FileApprovals:
    """Shows each prompt by writing it down; the decision comes as the `decide` update."""

    def __init__(self, world: Path) -> None:
        self.world = world

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        append(self.world / "asked.jsonl", request.tool)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def withdraw(self, request: ApprovalRequest) -> None:
        append(self.world / "withdrawn.jsonl", request.tool)


def ports(world: Path, provider: OpenAICompatProvider) -> TurnPorts:
    registry = ToolRegistry()

    async def charge(args: JsonObject, call: ToolCall) -> JsonObject:
        append(world / "charges.jsonl", args)
        await anyio.sleep_forever()  # waits for the bank, until the process is killed
        raise AssertionError("unreachable")

    async def pay(args: JsonObject, call: ToolCall) -> JsonObject:
        append(world / "pays.jsonl", args)
        return {"paid": args.get("cents")}

    async def note(args: JsonObject, call: ToolCall) -> JsonObject:
        append(world / "notes.jsonl", args)
        return {"noted": True}

    async def hold(args: JsonObject, call: ToolCall) -> JsonObject:
        append(world / "holds.jsonl", args)
        await anyio.sleep_forever()  # until the process is killed
        raise AssertionError("unreachable")

    registry.register(charge, parameters={"type": "object"})
    registry.register(hold, parameters={"type": "object"}, idempotent=True)
    registry.register(note, parameters={"type": "object"})
    registry.register(pay, parameters={"type": "object"}, requires_approval=True)
    return TurnPorts(
        provider=provider,
        registry=registry,
        channel=FileChannel(world / "channel.jsonl", os.environ.get(DIE_AFTER)),
        control=MemoryTurnControl(),
        approvals=FileApprovals(world),
    )


async def main(target: str, queue: str, world_path: str, base_url: str) -> None:
    world = Path(world_path)
    provider = OpenAICompatProvider(base_url=base_url, model="m")
    client = await connect(target)
    served = ports(world, provider)
    async with turn_worker(client, lambda _: served, task_queue=queue, heartbeat_every=0.2):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
