"""The iteration state: what the loop carries from one iteration to the next."""

from __future__ import annotations

import enum

import attrs

from toolloop.states.approval import ApprovalStatus
from toolloop.states.calls import FunctionCall, JsonObject, StreamResult
from toolloop.states.loop_config import LoopConfig
from toolloop.states.results import GenerationTurnResult
from toolloop.states.tools import ToolHistoryEntry, ToolResult
from toolloop.states.turn import ContextItem, Sticker, TurnSettings


class Phase(enum.Enum):
    """Where the loop is: which answer from the interpreter it waits for."""

    #: Not started; waits for `TurnStarted`.
    IDLE = "idle"
    #: A provider call runs; waits for `StreamEnded`.
    STREAMING = "streaming"
    #: The registry runs the tool; waits for `ToolSettled`.
    DISPATCHING = "dispatching"
    #: A restart asked for a stashed context item; waits for `StashTaken`.
    TAKING_STASH = "taking_stash"
    #: The attempt has its result; no event is valid any more.
    FINISHED = "finished"


@attrs.frozen(kw_only=True)
class ContextState:
    """The attempt's context as enhanced-context restarts changed it (SPEC 6a)."""

    items: tuple[ContextItem, ...] = ()
    disabled: frozenset[str] = frozenset()
    """Resources not to fetch again this turn: youtube, image, gif, message_metadata."""
    tail_directives: tuple[str, ...] = ()
    """Instructions appended after the context, e.g. "metadata is revealed"."""


@attrs.frozen(kw_only=True)
class BatchCall:
    """One call of a batch (SPEC 6b): the call under its trimmed name, and how it stands."""

    call: FunctionCall
    exclusive: bool = False
    """The tool runs alone: the calls before it finish first, the calls after wait for it."""
    refusal: str | None = None
    """Why stage 02 refused it without running it (SPEC 6.4, 6.5), or None."""
    running: bool = False
    result: ToolResult | None = None
    """Its result once it settled."""
    requires_follow_up: bool = False
    """The registry's answer for it once it settled (SPEC 7)."""
    approval: ApprovalStatus | None = None
    """None when no approval is needed; else where its approval stands (SPEC 6c)."""
    digest: str = ""
    """The digest of its exact arguments while it needs approval (`args_digest`)."""
    denial: str | None = None
    """The reason its approval was refused (denied or timed out): the model reads it."""

    @property
    def done(self) -> bool:
        """Nothing more will come for it: refused, or settled."""
        return self.refusal is not None or self.result is not None

    @property
    def waiting(self) -> bool:
        """It waits for a person's decision: it may not start yet (SPEC 6c)."""
        return self.approval is ApprovalStatus.WAITING


@attrs.frozen(kw_only=True, slots=False)
class PendingCall:
    """The tool call being handled, between its stream and its outcome."""

    stream: StreamResult
    name: str
    """The trimmed tool name (of the first call of a batch)."""
    restart_type: str | None = None
    """Set while a restart waits for its stashed context item."""
    batch: tuple[BatchCall, ...] = ()
    """A batch of two or more calls, in the model's order (SPEC 6b), or a single call
    that needs approval (SPEC 6c: it waits as a batch of one); else empty."""
    started: int = 0
    """How many calls of the batch, from the first, were started or refused: the next
    one to start is at this position (calls start in the model's order)."""


@attrs.frozen(kw_only=True, slots=False)
class IterationState:
    """Everything `step` decides from; a new one after every event (SPEC 3).

    Frozen but dict-backed, unlike the other states: `step` builds one per event,
    and copying a dict is one C call where a slotted class pays per field.
    """

    config: LoopConfig
    turn: TurnSettings
    phase: Phase = Phase.IDLE
    iteration: int = 0
    stream_results: tuple[StreamResult, ...] = ()
    function_history: tuple[ToolHistoryEntry, ...] = ()
    accumulated_model_parts: tuple[JsonObject, ...] = ()
    final_text: str = ""
    details_text: str = ""
    consecutive_tool_errors: int = 0
    # Invariant: < config.max_consecutive_tool_errors outside FINISHED.
    nai_consecutive_tool_failures: int = 0
    selected_sticker: Sticker | None = None
    thought_log: JsonObject | None = None
    tool_response_delivered: bool = False
    suppress_text_output: bool = False
    short_term_memory_updated: bool = False
    """A successful `update_short_term_memory` ran: a second one is refused."""
    context: ContextState = attrs.field(factory=ContextState)
    pending: PendingCall | None = None
    # Invariant: set exactly in DISPATCHING and TAKING_STASH.
    result: GenerationTurnResult | None = None
    # Invariant: set exactly in FINISHED, unless the attempt raised.
