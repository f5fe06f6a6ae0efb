"""The ports and the data they exchange: what an adapter's author implements and reads.

A provider (`Provider`: `stream(request, sink) -> StreamResult`), a tool
registry (`ToolRegistryPort`), a channel (`Channel`) and a turn control
(`TurnControl`), each a `typing.Protocol`; docs/ports.md has a minimal
adapter of each.
"""

from toolloop.effects.interpreter import Observer
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.ports import (
    ApprovalPort,
    Channel,
    KillHandle,
    KillSignal,
    Notice,
    Provider,
    StreamingContext,
    StreamRequest,
    StreamSink,
    StreamSpan,
    ToolInvocation,
    ToolRegistryPort,
    TurnControl,
)
from toolloop.effects.registry import ToolExecution
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine.events import StopRequest
from toolloop.states import (
    ApiFamily,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
    DeliberateMode,
    FunctionCall,
    JsonObject,
    PersonaResponse,
    ProviderDescriptor,
    Sticker,
    StreamError,
    StreamResult,
    StreamStatus,
    ThoughtLogOwner,
    TokenUsage,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
    ToolSpec,
    Trigger,
)

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    # the provider, and what one stream exchanges
    "Provider",
    "ProviderDescriptor",
    "ApiFamily",
    "StreamRequest",
    "StreamSink",
    "StreamResult",
    "StreamStatus",
    "StreamError",
    "TokenUsage",
    "FunctionCall",
    "JsonObject",
    # the tool registry, and what one call exchanges
    "ToolRegistryPort",
    "ToolSpec",
    "ToolContext",
    "ToolInvocation",
    "StreamingContext",
    "ToolResult",
    "ToolHistoryEntry",
    "ToolExecution",
    "DeliberateMode",
    "Trigger",
    # the channel
    "Channel",
    "StreamSpan",
    "Notice",
    "NoticeCatalog",
    "PersonaResponse",
    "ThoughtLogOwner",
    "Sticker",
    # the turn control
    "TurnControl",
    "StopRequest",
    "KillHandle",
    "KillSignal",
    # approval: a person's decision on a call (SPEC 6c)
    "ApprovalPort",
    "ApprovalRequest",
    "ApprovalDecision",
    "ApprovalStatus",
    # what else a host may hand the loop
    "ContextStash",
    "Observer",
]
