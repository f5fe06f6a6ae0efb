"""The guards: the facts of one event's `Context` that select the rows of the table.

A fact is a `bool` attribute of `Context`, declared there once with its
docstring (`FACTS` lists them). The `Context` computes the facts once, when
the event arrives, from the event and the state it arrives in (the refusal of
a call, the outcome of a settled tool, a count against its cap); the rows of
`toolloop.engine.table` name them as guards, checked against `FACTS` on
import, and `step` takes the first row of the (phase, event type) whose
guards hold. A count is made once, here (`Context.errors`,
`Context.novelai_failures`): the facts compare it with its cap and the
actions write it into the next state.

Facts about an outcome (a failure, the error cap, a NovelAI failure) hold for
both kinds of outcome: a call that stage 02 refused when the stream ended
(`StreamEnded`) and a tool that settled (`ToolSettled`).
"""

import enum
from collections.abc import Callable, Sequence

import attrs

from toolloop.engine import batch as batches
from toolloop.engine import restart, tool_call
from toolloop.engine.events import (
    ApprovalDecided,
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
)
from toolloop.engine.policy import is_novelai, is_visible, should_end_after_pre_tool_text
from toolloop.states import (
    ApprovalStatus,
    BatchCall,
    FunctionCall,
    IterationState,
    StreamResult,
    StreamStatus,
    ToolResult,
    Verdict,
    args_digest,
)

# Read on every event, so module names: a member read off its Enum class is a
# class attribute lookup, several times slower on CPython 3.11.
_STOP, _FUNCTION_CALL = StopRequest.STOP, StreamStatus.FUNCTION_CALL


class Refusal(enum.Enum):
    """Why stage 02 refuses a well-formed call without running it."""

    #: SPEC 6.4: the provider cut the arguments short; checked first.
    TRUNCATED = "truncated"
    #: SPEC 6.5: deliberate mode's allowlist does not expose the tool.
    BLOCKED = "blocked"
    #: SPEC 6c: a person denied it, or nobody approved it in time.
    DENIED = "denied"


class Context:
    """One event's facts, computed once when it arrives; the rows test them, the actions read them.

    An event with facts of its own gets the subclass of its type (`CONTEXTS`).
    Every `bool` attribute declared below is a fact (`FACTS`): a row of
    `toolloop.engine.table` names it as a guard, and `step` reads it. A fact
    that does not apply to the event (the error cap of a success, the exit
    policy of a failure) keeps its class default, False, and is not computed.
    """

    # Defaults on the class: an event sets only what it has.
    stop = StopRequest.NONE
    call: FunctionCall | None = None
    """The call of a well-formed `function_call` stream, or of the pending call."""
    name: str | None = None
    """Its trimmed name."""
    refusal: Refusal | None = None
    result: ToolResult | None = None
    restart: str | None = None
    """The restart type a successful tool asked for (SPEC 6a)."""
    restart_data: object = None
    """The data of the successful tool that asked for the restart."""
    batch: tuple[BatchCall, ...] = ()
    """A batch of two or more calls as this event leaves it (SPEC 6b); empty for one call."""
    pre_tool_text = ""
    """The text of the stream that asked for the call."""
    errors = 0
    """`consecutive_tool_errors` once this outcome's entries are counted (SPEC 4, history
    step 1; a batch's in the model's order, 6b item 6): computed here, written by the actions."""
    novelai_failures_kept = 0
    """`nai_consecutive_tool_failures` once the entries are counted (a success resets it)."""
    novelai_failures = 0
    """... and once a NovelAI failure after visible text adds one, once per batch (history
    step 3, 6b item 6): what the rows that count it write."""

    # The facts.
    stream_completed: bool = False
    """The model finished its reply."""
    stream_failed: bool = False
    """The provider call ended in `error` or `timeout`."""
    stream_went_silent: bool = False
    """... in `timeout` because the loop's rolling inactivity timeout fired (SPEC 5)."""
    stream_empty: bool = False
    """The model produced nothing at all."""
    stream_stopped: bool = False
    """A genuine stop ended the stream."""
    stream_interrupted: bool = False
    """A follow-up message interrupted the stream."""
    call_malformed: bool = False
    """The model asked for a tool without call data or with a blank name (SPEC 6.1)."""
    stop_requested: bool = False
    """A genuine stop was pending at the check this event carries (SPEC 6.2 and 6.7)."""
    call_refused: bool = False
    """Stage 02 refused the call without dispatching it (SPEC 6.4, 6.5): a failure in history."""
    tool_succeeded: bool = False
    """The tool ran and succeeded (every call of a batch did)."""
    outcome_failed: bool = False
    """The call's outcome is a failure kept in history: a refusal or a failed tool."""
    restart_requested: bool = False
    """A successful tool asked for an enhanced-context restart (SPEC 6a)."""
    batch_restart_requested: bool = False
    """A call of a finished batch of two or more asked for a restart (SPEC 6b item 7)."""
    has_stash_key: bool = False
    """The restart's enrichment item waits in the stash under a key."""
    error_cap_reached: bool = False
    """This outcome makes `MAX_CONSECUTIVE_TOOL_ERRORS` in a row (SPEC 4, history step 1)."""
    under_impersonation: bool = False
    """The turn of a failure speaks as the user: the error loop raises instead."""
    end_turn_requested: bool = False
    """The tool asked to end the turn (honoured on a failure too, after the cap check)."""
    novelai_text: bool = False
    """A NovelAI turn whose call came after visible text (SPEC 4, history steps 3 and 5)."""
    novelai_failure_after_text: bool = False
    """A NovelAI call failed after visible pre-tool text (SPEC 4, history step 3)."""
    novelai_retries_exhausted: bool = False
    """This NovelAI failure reaches `NAI_TOOL_FAILURE_RETRY_THRESHOLD`."""
    exit_policy_ends: bool = False
    """The exit policy ends the turn after this success's pre-tool text (SPEC 7)."""
    batch_goes_on: bool = False
    """A call of a batch settled or was decided, and others still run or wait (SPEC 6b item 3)."""
    decision_refused: bool = False
    """A decision came for other arguments than the call's (its digest differs): refused (6c)."""
    ceiling_reached: bool = False
    """The iteration this event would start is `MAX_FUNCTION_CALL_ITERATIONS` (SPEC 4.4)."""

    def __init__(self, state: IterationState, event: Event) -> None:
        self.state, self.event = state, event

    def _outcome(self, state: IterationState, successes: Sequence[bool]) -> None:
        """The facts and counts of an outcome kept in history: one call's, or a whole batch's.

        Its entries count in the model's order: a success resets both counters,
        a failure adds one error, and the cap is reached if the count reaches it
        after any entry; then a NovelAI failure after visible text counts once
        (SPEC 4, history steps 1 and 3; 6b item 6). Each count is made here,
        once: the guards compare it with its cap, the actions write it. When
        every entry succeeded both counts are 0, the class defaults, and the
        facts of a failure stay False: the usual outcome counts nothing.
        """
        text = self.pre_tool_text
        self.novelai_text = novelai = is_novelai(state.turn.provider) and is_visible(text)
        self.ceiling_reached = _next_reaches_ceiling(state)
        if all(successes):
            self.tool_succeeded = True
            return
        self.outcome_failed = True
        config = state.config
        errors, novelai_failures = (
            state.consecutive_tool_errors,
            state.nai_consecutive_tool_failures,
        )
        capped = False
        for success in successes:
            if success:
                errors = novelai_failures = 0
            else:
                errors += 1
                capped = capped or errors >= config.max_consecutive_tool_errors
        self.errors, self.error_cap_reached = errors, capped
        self.novelai_failures_kept = novelai_failures
        self.under_impersonation = state.turn.user_impersonation
        if novelai:
            self.novelai_failure_after_text = True
            self.novelai_failures = novelai_failures = novelai_failures + 1
            threshold = config.nai_tool_failure_retry_threshold
            self.novelai_retries_exhausted = novelai_failures >= threshold

    def _batch_done(self, state: IterationState, batch: tuple[BatchCall, ...]) -> None:
        """The facts of a batch whose every call is done (SPEC 6b item 6).

        A restart asked for in a batch of two or more takes effect after it (6b.7);
        a single call that waited for approval restarts as any single call (6a).
        """
        text = self.pre_tool_text
        self.end_turn_requested = any(
            call.result is not None and call.result.end_turn for call in batch
        )
        successes = [batches.succeeded(call) for call in batch]
        provider = state.turn.provider
        self.exit_policy_ends = all(successes) and all(
            should_end_after_pre_tool_text(provider, call.call.name, call.requires_follow_up, text)
            for call in batch
        )
        for call in batch:
            data = None if call.result is None or not call.result.success else call.result.data
            kind = restart.restart_type(data)
            if kind is not None and isinstance(data, dict):  # the first one asked for (6b.7)
                if len(batch) == 1:
                    self.restart_requested = True
                else:
                    self.batch_restart_requested = True
                self.restart, self.restart_data = kind, data
                self.has_stash_key = restart.pending_context_key(data) is not None
                break
        self._outcome(state, successes)


FACTS: tuple[str, ...] = tuple(
    name for name, kind in Context.__annotations__.items() if kind is bool
)
"""The facts a row may name as guards: every `bool` attribute of `Context`, declared once."""


def _next_reaches_ceiling(state: IterationState) -> bool:
    """The iteration an outcome or a stash would start is past the last allowed (SPEC 4.4)."""
    return state.iteration + 1 >= state.config.max_function_call_iterations


class StreamEndedContext(Context):
    """A stream's facts: its status and, for a well-formed call, its name and refusal."""

    def __init__(self, state: IterationState, event: StreamEnded) -> None:
        self.state, self.event = state, event
        self.stop = stop = event.stop
        self.stop_requested = stop is _STOP
        stream = event.result
        status = stream.status
        if status is not _FUNCTION_CALL:
            self.stream_completed = status is StreamStatus.COMPLETED
            timed_out = status is StreamStatus.TIMEOUT
            self.stream_failed = timed_out or status is StreamStatus.ERROR
            self.stream_went_silent = timed_out and event.went_silent
            self.stream_empty = status is StreamStatus.EMPTY_RESPONSE
            self.stream_stopped = status is StreamStatus.STOPPED_BY_USER
            self.stream_interrupted = status is StreamStatus.FOLLOW_UP_INTERRUPT
            return
        if len(stream.calls) > 1 or True in event.approval:
            self._batch(state, event, stream)  # a call that needs approval waits as one
            return
        self.name = name = tool_call.valid_name(stream)
        if name is None:
            self.call_malformed = True
            return
        call = stream.data
        assert isinstance(call, FunctionCall), "a valid name comes with its call"
        self.call = call
        if call.arguments_truncated:  # SPEC 6.4 comes before the allowlist gate of 6.5
            self.refusal = Refusal.TRUNCATED
        elif tool_call.is_blocked(state.turn, name):
            self.refusal = Refusal.BLOCKED
        self.pre_tool_text = stream.accumulated_text
        if self.refusal is not None:  # a failure kept now; a dispatched call's outcome
            self.call_refused = True  # is its ToolSettled's, and no row here reads one
            self._outcome(state, (False,))

    def _batch(self, state: IterationState, event: StreamEnded, stream: StreamResult) -> None:
        """A batch's facts: malformed if any call is; refused if every call is (SPEC 6b 1-2)."""
        calls_made = stream.batch
        names = [batches.call_name(call) for call in calls_made]
        if None in names:
            self.call_malformed = True
            return
        exclusive = event.exclusive or (False,) * len(names)
        approval = event.approval or (False,) * len(names)
        calls = []
        for call, name, alone, asked in zip(calls_made, names, exclusive, approval, strict=True):
            assert name is not None
            refusal = None
            if call.arguments_truncated:
                refusal = Refusal.TRUNCATED.value
            elif tool_call.is_blocked(state.turn, name):
                refusal = Refusal.BLOCKED.value
            waits = asked and refusal is None  # a refused call is never asked about (6c)
            calls.append(
                BatchCall(
                    call=tool_call.renamed(call, name),
                    exclusive=batches.is_exclusive(name, alone),
                    refusal=refusal,
                    approval=ApprovalStatus.WAITING if waits else None,
                    digest=args_digest(call.args) if waits else "",
                )
            )
        self.batch = tuple(calls)
        self.call, self.name = self.batch[0].call, names[0]
        self.pre_tool_text = stream.accumulated_text
        if all(call.refusal is not None for call in calls):
            self.call_refused = True
            self._outcome(state, [False] * len(calls))


class ToolSettledContext(Context):
    """A settled tool's facts: its outcome, and the call and text it answers."""

    def __init__(self, state: IterationState, event: ToolSettled) -> None:
        self.state, self.event = state, event
        self.stop = stop = event.stop
        self.stop_requested = stop is _STOP
        pending = state.pending
        assert pending is not None, "DISPATCHING always holds the call"
        if pending.batch:
            self._batch(state, event, pending.batch)
            return
        call = pending.stream.data
        assert isinstance(call, FunctionCall), "a dispatched call came from a valid stream"
        name = pending.name
        self.call, self.name = call, name
        self.result = result = event.result
        self.end_turn_requested = result.end_turn
        self.pre_tool_text = text = pending.stream.accumulated_text
        if result.success:
            self.tool_succeeded = True
            self.restart = kind = restart.restart_type(result.data)
            if kind is not None:
                self.restart_requested = True
                self.restart_data = result.data
                self.has_stash_key = restart.pending_context_key(result.data) is not None
            provider, follow_up = state.turn.provider, event.requires_follow_up
            self.exit_policy_ends = should_end_after_pre_tool_text(provider, name, follow_up, text)
        self._outcome(state, (result.success,))

    def _batch(
        self, state: IterationState, event: ToolSettled, batch: tuple[BatchCall, ...]
    ) -> None:
        """A call of a batch settled: the batch goes on, or its facts as a whole (SPEC 6b)."""
        pending = state.pending
        assert pending is not None
        result = event.result
        self.batch = batch = batches.settled(batch, event.index, result, event.requires_follow_up)
        settled = batch[event.index]
        self.call, self.name, self.result = settled.call, settled.call.name, result
        self.pre_tool_text = pending.stream.accumulated_text
        if self.stop_requested:  # the stop check is made once, after the batch (6b.4)
            if any(call.running or call.waiting for call in batch):
                self.batch_goes_on = True  # a kill ends the others at once; none starts
                return
        elif not all(call.done for call in batch):
            self.batch_goes_on = True
            return
        self._batch_done(state, batch)


class ApprovalDecidedContext(Context):
    """A call's approval wait ended: the decision's facts, then the batch's (SPEC 6c)."""

    def __init__(self, state: IterationState, event: ApprovalDecided) -> None:
        self.state, self.event = state, event
        self.stop = stop = event.stop
        self.stop_requested = stop is _STOP
        pending = state.pending
        assert pending is not None and pending.batch, "only a waiting batch is asked about"
        batch, at = pending.batch, event.index
        waited = batch[at]
        self.call, self.name = waited.call, waited.call.name
        self.pre_tool_text = pending.stream.accumulated_text
        decision = event.decision
        if self.stop_requested:  # a kill while waiting withdraws the request: never run
            reason = tool_call.WITHDRAWN_REASON
            self.batch = _refused(batch, at, ApprovalStatus.WITHDRAWN, reason)
            self.batch_goes_on = any(call.running or call.waiting for call in self.batch)
            return
        if decision is not None and decision.digest != waited.digest:
            self.batch, self.decision_refused = batch, True  # meant for other arguments
            return
        if decision is not None and decision.verdict is Verdict.APPROVE:
            approved = attrs.evolve(waited, approval=ApprovalStatus.APPROVED)
            self.batch = (*batch[:at], approved, *batch[at + 1 :])
            self.batch_goes_on = True  # it runs next
            return
        if decision is None:
            status = ApprovalStatus.TIMED_OUT
            reason = tool_call.unanswered_reason(state.config.tool_approval_timeout_ms)
        else:
            status, reason = ApprovalStatus.DENIED, tool_call.denied_reason(decision.reason)
        self.result = ToolResult(success=False, error=reason)
        self.batch = batch = _refused(batch, at, status, reason)
        if not all(call.done for call in batch):
            self.batch_goes_on = True
            return
        self._batch_done(state, batch)


def _refused(
    batch: tuple[BatchCall, ...], at: int, status: ApprovalStatus, reason: str
) -> tuple[BatchCall, ...]:
    """The batch with the call at `at` never to run: its approval refused for `reason`."""
    call = attrs.evolve(batch[at], approval=status, refusal=Refusal.DENIED.value, denial=reason)
    return (*batch[:at], call, *batch[at + 1 :])


class StashTakenContext(Context):
    """A taken stash's fact: whether the restarted iteration would reach the ceiling."""

    def __init__(self, state: IterationState, event: StashTaken) -> None:
        self.state, self.event = state, event
        self.ceiling_reached = _next_reaches_ceiling(state)


CONTEXTS: dict[type[Event], Callable[..., Context]] = {
    StreamEnded: StreamEndedContext,
    ToolSettled: ToolSettledContext,
    ApprovalDecided: ApprovalDecidedContext,
    StashTaken: StashTakenContext,
}
"""The context class of each event type that has facts of its own (others: `Context`)."""


def context(state: IterationState, event: Event) -> Context:
    """The context of `event` arriving in `state`, with the facts of its kind."""
    return CONTEXTS.get(type(event), Context)(state, event)
