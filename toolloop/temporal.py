"""Turns as Temporal workflows, over any number of worker processes (extra `temporal`).

    from toolloop.temporal import TurnInput, connect, start_turn, turn_worker

The workflow drives `step`; provider calls, tools and notices are activities
that the workers carry out against the host's ports (`toolloop.durable.TurnPorts`).
See docs/durable.md.
"""

from toolloop.effects.temporal.activities import Ports, TurnActivities
from toolloop.effects.temporal.convert import ForeignPayload, data_converter
from toolloop.effects.temporal.messages import (
    HISTORY_BYTES,
    HISTORY_EVENTS,
    RESULT_LIMIT,
    Decision,
    TurnInput,
    Waiting,
)
from toolloop.effects.temporal.worker import TASK_QUEUE, connect, start_turn, turn_worker
from toolloop.effects.temporal.workflow import TurnWorkflow

__all__ = [
    "HISTORY_BYTES",
    "HISTORY_EVENTS",
    "RESULT_LIMIT",
    "TASK_QUEUE",
    "Decision",
    "ForeignPayload",
    "Ports",
    "TurnActivities",
    "TurnInput",
    "TurnWorkflow",
    "Waiting",
    "connect",
    "data_converter",
    "start_turn",
    "turn_worker",
]
