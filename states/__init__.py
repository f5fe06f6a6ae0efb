"""The data of the tool loop (SPEC section 3): frozen, slotted, keyword-only.

Nothing here imports the rest of toolloop; everything else imports this.
"""

from toolloop.states.approval import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
    Verdict,
    args_digest,
)
from toolloop.states.calls import (
    FunctionCall,
    JsonObject,
    StreamError,
    StreamResult,
    StreamStatus,
    TokenUsage,
)
from toolloop.states.iteration import (
    BatchCall,
    ContextState,
    IterationState,
    PendingCall,
    Phase,
)
from toolloop.states.loop_config import (
    SOFT_WARN_ITERATION_THRESHOLD,
    SUPPRESS_FOLLOW_UP_AFTER_PRE_TOOL_TEXT,
    VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    ConfigWarning,
    LoopConfig,
)
from toolloop.states.results import (
    GenerationTurnResult,
    PersonaResponse,
    ThoughtLogOwner,
    TurnStatus,
)
from toolloop.states.tools import ToolContext, ToolHistoryEntry, ToolResult, ToolSpec
from toolloop.states.turn import (
    ApiFamily,
    ContextItem,
    DeliberateMode,
    Persona,
    ProviderDescriptor,
    Sticker,
    Trigger,
    TurnSettings,
)

__all__ = [
    "SOFT_WARN_ITERATION_THRESHOLD",
    "SUPPRESS_FOLLOW_UP_AFTER_PRE_TOOL_TEXT",
    "VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS",
    "ApiFamily",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalStatus",
    "BatchCall",
    "ConfigWarning",
    "ContextItem",
    "ContextState",
    "DeliberateMode",
    "FunctionCall",
    "GenerationTurnResult",
    "IterationState",
    "JsonObject",
    "LoopConfig",
    "PendingCall",
    "Persona",
    "PersonaResponse",
    "Phase",
    "ProviderDescriptor",
    "Sticker",
    "StreamError",
    "StreamResult",
    "StreamStatus",
    "ThoughtLogOwner",
    "TokenUsage",
    "ToolContext",
    "ToolHistoryEntry",
    "ToolResult",
    "ToolSpec",
    "Trigger",
    "TurnSettings",
    "TurnStatus",
    "Verdict",
    "args_digest",
]
