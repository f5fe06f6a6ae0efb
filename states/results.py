"""The result of one generation attempt (SPEC section 8)."""

from __future__ import annotations

import enum

import attrs

from toolloop.states.calls import JsonObject, StreamError, StreamResult, TokenUsage
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
    ended_by: str | None = None
    """The move of the machine that ended the attempt (`completed`, `ceiling_reached`,
    `stream_failed`, `tool_error_loop`, ... as docs/diagrams.md draws them): a
    `timeout` status is the iteration ceiling or a silent stream, and this says which.
    Set by `step` on the move that finishes; None on a result built by hand."""

    @property
    def usage(self) -> TokenUsage | None:
        """The tokens the attempt cost: the sum over its streams that reported usage; None
        when none did (a provider that does not report it, or no stream at all)."""
        reported = [result.usage for result in self.stream_results if result.usage is not None]
        return sum(reported[1:], reported[0]) if reported else None

    @property
    def error(self) -> StreamError | None:
        """What failed, when the attempt ended on a failed or timed-out stream: its last
        stream's error (what failed, where, the server's words, a hint); else None."""
        last = self.stream_results[-1] if self.stream_results else None
        if last is not None and isinstance(last.data, StreamError):
            return last.data
        return None

    @property
    def reason(self) -> str:
        """Why the attempt ended, in one line: its status, the move, and the error if any."""
        said = self.status.value + ("" if self.ended_by is None else f" ({self.ended_by})")
        error = self.error
        return said if error is None else f"{said}: {error.message}"
