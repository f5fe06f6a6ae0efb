"""The pure core: events in, effects out, and `step` between them (SPEC sections 4 to 8).

Nothing here does I/O, reads a clock or knows about trio or asyncio; it
imports only `toolloop.states`. The interpreter in `toolloop.effects` carries
the effects out.

This package is also the facade for whoever drives or inspects the core
(a test, a durable workflow, a trace tool): `from toolloop.engine import
step, IterationState, StreamEnded, Finish, replay`. The names below are
re-exported from the modules of this folder, which stay importable as they
are (`from toolloop.engine.table import TABLE`). One catch: the
attribute `toolloop.engine.step` is the function `step`, as in
`toolloop.step` was; the module is `sys.modules["toolloop.engine.step"]`.
"""

from toolloop.engine.commands import (
    AwaitTools,
    ClearStopRequest,
    CountToolUsage,
    DispatchTool,
    Effect,
    ErrorKind,
    Finish,
    IncrementFollowUpCount,
    Level,
    Log,
    MarkToolChainActive,
    NoticeKey,
    QueueStopResponse,
    RaiseError,
    ResetFollowUpCount,
    RetainAffordance,
    SendNotice,
    SetTextSuppression,
    StartTool,
    StreamOnce,
    TakeStashedContext,
)
from toolloop.engine.config_parsing import LoadedConfig, parse_config
from toolloop.engine.events import (
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.step import InvalidEvent, Step, initial_state, step
from toolloop.engine.table import Move
from toolloop.engine.trace import (
    Trace,
    TraceEncoder,
    TraceError,
    TraceMismatch,
    TraceStep,
    dump_lines,
    load_bytes,
    load_lines,
    replay,
)
from toolloop.engine.verbatim import VerbatimCall, VerbatimToolCallParser
from toolloop.states import ConfigWarning, IterationState, Phase

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    # the transition function and its state
    "step",
    "Step",
    "initial_state",
    "IterationState",
    "Phase",
    "Move",
    "InvalidEvent",
    # events: what happened
    "Event",
    "TurnStarted",
    "StreamEnded",
    "ToolSettled",
    "StashTaken",
    "StopRequest",
    # effects: what to do next
    "Effect",
    "StreamOnce",
    "DispatchTool",
    "StartTool",
    "AwaitTools",
    "TakeStashedContext",
    "SendNotice",
    "NoticeKey",
    "Log",
    "Level",
    "ResetFollowUpCount",
    "IncrementFollowUpCount",
    "QueueStopResponse",
    "ClearStopRequest",
    "MarkToolChainActive",
    "SetTextSuppression",
    "CountToolUsage",
    "RetainAffordance",
    "Finish",
    "RaiseError",
    "ErrorKind",
    # configuration, parsed purely
    "parse_config",
    "LoadedConfig",
    "ConfigWarning",
    # traces
    "Trace",
    "TraceStep",
    "TraceError",
    "TraceMismatch",
    "TraceEncoder",
    "dump_lines",
    "load_lines",
    "load_bytes",
    "replay",
    # the verbatim tool-call parser
    "VerbatimToolCallParser",
    "VerbatimCall",
]
