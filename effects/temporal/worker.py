"""Workers and clients of toolloop's turns: `connect`, `turn_worker`, `start_turn`.

Any number of worker processes serve one task queue: each runs the turn
workflow and the activities against its host's ports, so a turn goes on on
another worker when its worker dies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolloop.effects.temporal.activities import Ports, TurnActivities
from toolloop.effects.temporal.convert import data_converter
from toolloop.effects.temporal.messages import TurnInput
from toolloop.effects.temporal.workflow import TurnWorkflow
from toolloop.states import GenerationTurnResult

#: The task queue of toolloop's turns unless a host names its own.
TASK_QUEUE = "toolloop-turns"


async def connect(target: str = "127.0.0.1:7233", *, namespace: str = "default") -> Client:
    """A client of the Temporal server at `target` that reads and writes toolloop's data."""
    return await Client.connect(target, namespace=namespace, data_converter=data_converter)


@asynccontextmanager
async def turn_worker(
    client: Client,
    ports: Ports,
    *,
    task_queue: str = TASK_QUEUE,
    heartbeat_every: float = 1.0,
) -> AsyncIterator[Worker]:
    """Serve turns from `task_queue` while the block runs; `ports` gives a channel's ports.

    Every activity heartbeats every `heartbeat_every` seconds, and heartbeats reach
    the server as often: a kill reaches a call within about that, and a stream
    whose worker dies is made again after the text its last heartbeat reported.

    The workflow runs in Temporal's sandbox, toolloop's modules passed through
    (`step` is pure: the same modules every run).
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules("toolloop")
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[TurnWorkflow],
        activities=TurnActivities(ports, heartbeat_every=heartbeat_every).all(),
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        max_heartbeat_throttle_interval=timedelta(seconds=heartbeat_every),
        default_heartbeat_throttle_interval=timedelta(seconds=heartbeat_every),
    )
    async with worker:
        yield worker


async def start_turn(
    client: Client, turn_id: str, given: TurnInput, *, task_queue: str = TASK_QUEUE
) -> WorkflowHandle[TurnWorkflow, GenerationTurnResult]:
    """Start the turn `given` as the workflow `turn_id`; `await handle.result()` is its result."""
    return await client.start_workflow(TurnWorkflow.run, given, id=turn_id, task_queue=task_queue)
