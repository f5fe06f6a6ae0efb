"""The result of one generation attempt (SPEC section 8)."""

from __future__ import annotations

import enum

import attrs

from toolloop.states.calls import JsonObject, StreamResult
from toolloop.states.turn import Persona, Sticker


class TurnStatus(enum.Enum):
    """How a generation attempt ended: a stream status, or `skipped` by the caller."""

    COMPLETED = "completed"
    ERROR = "error"
    TIMEOUT = "timeout"
    EMPTY_RESPONSE = "empty_response"
    STOPPED_BY_USER = "stopped_by_user"
    FOLLOW_UP_INTERRUPT = "follow_up_interrupt"
    FUNCTION_CALL = "function_call"
    SKIPPED = "skipped"


@attrs.frozen(kw_only=True)
class PersonaResponse:
    """What one persona said, for short-term memory."""

    persona_name: str
    text: str
    persona_id: int
    persona_lineage_id: int


@attrs.frozen(kw_only=True)
class ThoughtLogOwner:
    """Whose identity the thought log is shown under."""

    type: str
    """`user_impersonation`, `persona` or `default`."""
    username: str | None = None
    avatar_url: str | None = None
    persona: Persona | None = None


@attrs.frozen(kw_only=True)
class GenerationTurnResult:
    """Everything one attempt produced."""

    status: TurnStatus
    stream_results: tuple[StreamResult, ...] = ()
    persona_responses: tuple[PersonaResponse, ...] = ()
    tool_response_delivered: bool | None = None
    """True when a tool delivered the reply itself; None otherwise."""
    thought_log: JsonObject | None = None
    thought_log_owner: ThoughtLogOwner | None = None
    selected_sticker: Sticker | None = None
    """Only on `completed`."""
