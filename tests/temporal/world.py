"""The world of a turn served by Temporal workers: a loopback model, a channel, tools.

Each worker builds its ports from the same world, as workers of one bot do
(the chat platform and the tools' effects are shared; the registry and turn
control are the worker's own).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from temporalio.client import Client, WorkflowHandle

from tests.openai_server import OpenAIServer
from toolloop.durable import TurnPorts
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.registry.stash import ContextStash
from toolloop.states import ContextItem, GenerationTurnResult, JsonObject, TurnSettings
from toolloop.temporal import TurnInput, TurnWorkflow, connect, start_turn, turn_worker

TurnHandle = WorkflowHandle[TurnWorkflow, GenerationTurnResult]
CENTS: JsonObject = {"type": "object", "properties": {"cents": {"type": "integer"}}}


class World:
    """A channel and the runs of each tool; `ports` is what a worker gets for a channel."""

    def __init__(self, server: OpenAIServer) -> None:
        self.channel = RecordingChannel()
        self.control = MemoryTurnControl()
        self.runs: list[str] = []
        self.provider = OpenAICompatProvider(base_url=server.base_url, model="m")
        self.started = anyio.Event()
        """Set when a tool starts (the tests kill or wait there)."""
        self.release = anyio.Event()
        self.stash = ContextStash()
        """Shared by the workers, as a bot's stash would be (an external store)."""

    def ports(self, channel_id: str) -> TurnPorts:
        registry = ToolRegistry()

        async def lookup(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs.append("lookup")
            return {"found": args.get("cents")}

        async def slow(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs.append("slow")
            self.started.set()
            await self.release.wait()
            return {"done": True}

        async def charge(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs.append("charge")
            return {"charged": args.get("cents")}

        async def huge(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs.append("huge")
            return {"text": "x" * 100_000}

        async def video(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs.append("video")
            key = self.stash.put(ContextItem(kind="enrichment", content="TRANSCRIPT-7"))
            return {"type": "context_restart_youtube", "pending_context_key": key}

        registry.register(lookup, parameters=CENTS)
        registry.register(video, parameters=CENTS)
        registry.register(slow, parameters=CENTS)
        registry.register(charge, parameters=CENTS, requires_approval=True)
        registry.register(huge, parameters=CENTS)
        registry.register(slow, name="brief", parameters=CENTS, timeout=0.5)
        return TurnPorts(
            provider=self.provider,
            registry=registry,
            channel=self.channel,
            control=self.control,
            stash=self.stash,
        )


@asynccontextmanager
async def serving(target: str, world: World) -> AsyncIterator[tuple[Client, str]]:
    """A client and a worker on a task queue of this test's own."""
    client = await connect(target)
    queue = f"test-{uuid.uuid4()}"
    async with turn_worker(client, world.ports, task_queue=queue, heartbeat_every=0.2):
        yield client, queue
    await world.provider.aclose()


async def start(client: Client, queue: str, given: TurnInput | None = None) -> TurnHandle:
    """Start a turn (default settings) under a fresh id."""
    given = given or TurnInput(turn=TurnSettings())
    return await start_turn(client, f"turn-{uuid.uuid4()}", given, task_queue=queue)


async def run(target: str, world: World, given: TurnInput | None = None) -> GenerationTurnResult:
    """Serve one turn to its result."""
    async with serving(target, world) as (client, queue):
        return await (await start(client, queue, given)).result()


async def history(client: Client, turn_id: str) -> list[tuple[int, int]]:
    """Each run of the turn, first to last: its history's event count and size in bytes."""
    runs: list[tuple[int, int]] = []
    run_id: str | None = None
    while True:
        events = (await client.get_workflow_handle(turn_id, run_id=run_id).fetch_history()).events
        runs.append((len(events), sum(event.ByteSize() for event in events)))
        started = events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return runs[::-1]
        run_id = started.continued_execution_run_id
