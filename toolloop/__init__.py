"""toolloop: the tool loop of an LLM chat bot, as a pure state machine with an anyio interpreter.

Everything a bot author builds or reads is importable from here::

    from toolloop import MemoryTurnControl, RecordingChannel, ToolRegistry, run_tool_loop

The subpackages (`toolloop.states`, `toolloop.engine`, `toolloop.effects`,
`toolloop.specs`, `toolloop.tools`) are the architecture; what is not named in
`__all__` below is internal and may change. Importing this package loads
neither trio nor rich: an asyncio bot pays only for anyio, httpx, attrs,
cattrs and jsonschema.
"""

from toolloop.effects.config import load_config
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import ImpersonationAborted, Observer, run_tool_loop
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.ports import (
    Channel,
    KillHandle,
    KillSignal,
    Notice,
    Provider,
    StreamRequest,
    StreamSink,
    StreamSpan,
    ToolInvocation,
    ToolRegistryPort,
    TurnControl,
)
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolExecution, ToolRegistry, ToolSchemaError
from toolloop.effects.signature import Secret
from toolloop.effects.stash import ContextStash
from toolloop.effects.turn import Attempt, RetryableError, run_generation_turn
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
from toolloop.engine.config import LoadedConfig
from toolloop.engine.events import (
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.step import InvalidEvent, Step, initial_state, step
from toolloop.engine.trace import Trace, TraceError, TraceStep, dump_lines, load_lines, replay
from toolloop.engine.verbatim import VerbatimCall, VerbatimToolCallParser
from toolloop.states import (
    ApiFamily,
    ConfigWarning,
    ContextItem,
    DeliberateMode,
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    JsonObject,
    LoopConfig,
    Persona,
    PersonaResponse,
    Phase,
    ProviderDescriptor,
    Sticker,
    StreamError,
    StreamResult,
    StreamStatus,
    ThoughtLogOwner,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
    ToolSpec,
    Trigger,
    TurnSettings,
    TurnStatus,
)
from toolloop.states.errors import ToolloopError
from toolloop.tools.model_server import ModelServer

__all__ = [
    # the data a host builds or reads
    "ApiFamily",
    # the loop and the generation turn
    "Attempt",
    "AwaitTools",
    # the ports, and the in-memory ones
    "Channel",
    "ClearStopRequest",
    # configuration
    "ConfigWarning",
    "ContextItem",
    "ContextStash",
    "CountToolUsage",
    "DeliberateMode",
    "DispatchTool",
    "Effect",
    "ErrorKind",
    "Event",
    "Finish",
    "FunctionCall",
    "GenerationTurnResult",
    "ImpersonationAborted",
    "IncrementFollowUpCount",
    # the pure core: step, its state, events, effects
    "InvalidEvent",
    "IterationState",
    "JsonObject",
    "KillHandle",
    "KillSignal",
    "Level",
    "LoadedConfig",
    "Log",
    "LoopConfig",
    "MarkToolChainActive",
    "MemoryTurnControl",
    # the OpenAI-compatible provider, and the loopback model server for tests and demos
    "ModelServer",
    "Notice",
    "NoticeCatalog",
    "NoticeKey",
    "Observer",
    "OpenAICompatProvider",
    "Persona",
    "PersonaResponse",
    "Phase",
    "Provider",
    "ProviderDescriptor",
    "QueueStopResponse",
    "RaiseError",
    "RecordingChannel",
    "ResetFollowUpCount",
    "RetainAffordance",
    "RetryableError",
    "Secret",
    "SendNotice",
    "SetTextSuppression",
    "StartTool",
    "StashTaken",
    "Step",
    "Sticker",
    "StopRequest",
    "StreamEnded",
    "StreamError",
    "StreamOnce",
    "StreamRequest",
    "StreamResult",
    "StreamSink",
    "StreamSpan",
    "StreamStatus",
    "TakeStashedContext",
    "ThoughtLogOwner",
    # the tool registry and its decorator (`@registry.tool`)
    "ToolCall",
    "ToolContext",
    "ToolExecution",
    "ToolHistoryEntry",
    "ToolInvocation",
    "ToolRegistry",
    "ToolRegistryPort",
    "ToolResult",
    "ToolSchemaError",
    "ToolSettled",
    "ToolSpec",
    "ToolloopError",
    # traces
    "Trace",
    "TraceError",
    "TraceStep",
    "Trigger",
    "TurnControl",
    "TurnSettings",
    "TurnStarted",
    "TurnStatus",
    "VerbatimCall",
    "VerbatimToolCallParser",
    "dump_lines",
    "initial_state",
    "load_config",
    "load_lines",
    "replay",
    "run_generation_turn",
    "run_tool_loop",
    "step",
]
