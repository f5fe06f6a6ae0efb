"""Observing a running turn: typed host events (`events`), a trace written as it runs.

A host reads a turn through these, never through the engine's effects;
`telemetry/` and `inspect/` are observers of their own rooms, one per extra.
"""

from toolloop.effects.observe.events import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalWithdrawn,
    HostEvent,
    HostObserver,
    MoveMemo,
    NoticeShown,
    StreamFinished,
    StreamFirstChunk,
    StreamStarted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    approval_ended,
    host_events,
    move_rules,
    settled_name,
)
from toolloop.effects.observe.trace_file import TraceWriter, trace_file

__all__ = [
    "ApprovalAnswered",
    "ApprovalAsked",
    "ApprovalEvent",
    "ApprovalExpired",
    "ApprovalWithdrawn",
    "HostEvent",
    "HostObserver",
    "MoveMemo",
    "NoticeShown",
    "StreamFinished",
    "StreamFirstChunk",
    "StreamStarted",
    "ToolFinished",
    "ToolStarted",
    "TraceWriter",
    "TurnFinished",
    "approval_ended",
    "host_events",
    "move_rules",
    "settled_name",
    "trace_file",
]
