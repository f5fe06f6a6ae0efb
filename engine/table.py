"""The table: every move of the tool loop, as rows that `step` executes.

Theory of operation
-------------------

The loop is in one `Phase` at a time and each phase waits for exactly one
kind of event, the answer to the awaited effect that ended the previous step:

    IDLE          --TurnStarted-->  STREAMING
    STREAMING     --StreamEnded-->  DISPATCHING | STREAMING | FINISHED
    DISPATCHING   --ToolSettled-->  DISPATCHING | STREAMING | TAKING_STASH | FINISHED
    DISPATCHING   --ApprovalDecided-->  (the same)
    TAKING_STASH  --StashTaken-->   STREAMING | FINISHED

A row is (source phase, event type, guards, actions, destination, move, SPEC
rule). For an event, `step` builds the event's `Context` once (the facts the
guards share: the refusal of a call, the outcome of a settled tool), takes the
first row of its (phase, event type) whose guards all hold (`when`) and none
of whose `unless` guards holds, runs its actions in order on a draft of the
next state, and moves to the row's destination under the row's move label.
Nothing else decides: every choice is a row, and every row names the SPEC rule
it implements (`4.3h2` is step 2 of the history branch of SPEC 4, item 3), so
`grep -n 6.4 engine/*.py` finds the row of SPEC 6.4, the fact its guard reads
(`guards.Refusal.TRUNCATED`) and the action that builds its history entry.

Rule 1: everything that decides where the loop goes lives here. The actions
(`toolloop.engine.loop`) only build the next state and the effects; the guards
(`toolloop.engine.guards`) only read the context. The declared machine, its
diagrams, the model-based paths and the move coverage (`toolloop.specs`) are
all derived from `TABLE`; none keeps a copy.

A move label may name several rows of one phase when they share the event and
the destination: the ceiling (SPEC 4.4) ends the loop after whichever outcome
would have started the next iteration, and each such outcome keeps its own
state changes first, so each is its own row, all reported as `ceiling_reached`.

A stream with several calls is one batch (SPEC 6b) and takes the same rows as
one call: its facts are the batch's (malformed if any call is, refused if every
call is; once its last call settles, its entries counted in the model's
order). While the batch runs, DISPATCHING waits for each call's `ToolSettled`:
`call_settled` keeps the result and starts the calls the parallel limit and
exclusivity now allow (`DispatchTool` for a call running alone, `StartTool`
and `AwaitTools` for calls running together); the last call's settle takes the
rows of one settled tool. A stop is checked once, after the batch: a settle
that sees one starts nothing more and waits for the calls still running (a
kill has ended them, and a call ended so is not reported), and the settle
that leaves none running aborts. A restart asked for by a call of the batch
takes effect after the batch's other exits (6b item 7), in rows of its own.

A call that needs a person's approval (SPEC 6c) waits in DISPATCHING as a call
of its batch (a single one is a batch of one): `AskApproval` asks the host, and
each `ApprovalDecided` answers one request. An approval lets the call start as
the batch's limits allow; a denial or an unanswered request makes it a refused
call of the batch; a decision for other arguments is refused and asked again;
a kill withdraws each request as its wait ends. A decision that leaves every
call done takes the rows of a settled batch, generated from them (`_decided`).

Not in the table: a `ceiling_reached` from IDLE. The ceiling is checked when
each later iteration would begin; the smallest configurable ceiling (SPEC 2)
is one iteration, so the first always starts. Every (phase, event) pair
without rows raises `InvalidEvent` and leaves the state as it was.
"""

import enum
from collections.abc import Mapping

import attrs

from toolloop.engine import guards as g
from toolloop.engine import loop as do
from toolloop.engine.events import (
    ApprovalDecided,
    Event,
    StashTaken,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.guards import Guard
from toolloop.engine.loop import Action
from toolloop.states import Phase

IDLE, STREAMING, DISPATCHING, TAKING_STASH, FINISHED = (
    Phase.IDLE,
    Phase.STREAMING,
    Phase.DISPATCHING,
    Phase.TAKING_STASH,
    Phase.FINISHED,
)


class Move(enum.StrEnum):
    """The name a step reports for the move it took (`Step.move`), as traces record it.

    A member is its string: equal to it, written to JSON as it, and shown as it
    (`repr` too), so what a user printed or recorded before reads the same.
    """

    __repr__ = str.__repr__

    STARTED = "started"
    COMPLETED = "completed"
    STREAM_FAILED = "stream_failed"
    EMPTY_RESPONSE = "empty_response"
    STOPPED_BY_USER = "stopped_by_user"
    FOLLOW_UP_INTERRUPT = "follow_up_interrupt"
    CALL_MALFORMED = "call_malformed"
    STOPPED_BEFORE_TOOL = "stopped_before_tool"
    IMPERSONATION_ABORTED = "impersonation_aborted"
    TOOL_ERROR_LOOP = "tool_error_loop"
    NOVELAI_RETRIES_EXHAUSTED = "novelai_retries_exhausted"
    CEILING_REACHED = "ceiling_reached"
    NOVELAI_RETRY = "novelai_retry"
    TOOL_FAILED = "tool_failed"
    DISPATCHED = "dispatched"
    CALL_SETTLED = "call_settled"
    STOPPED_DURING_TOOL = "stopped_during_tool"
    RESTART_TAKES_STASH = "restart_takes_stash"
    END_TURN = "end_turn"
    EXIT_POLICY_ENDED = "exit_policy_ended"
    RESTARTED = "restarted"
    TOOL_SUCCEEDED = "tool_succeeded"
    RESTARTED_WITH_STASH = "restarted_with_stash"
    WITHDRAWN = "withdrawn"
    RESUMED = "resumed"
    """Not a row: what `toolloop.engine.resume` reports for re-entering a persisted wait."""
    STOPPED_WHILE_WAITING = "stopped_while_waiting"
    DECISION_REFUSED = "decision_refused"
    DECIDED = "decided"
    DENIED_IMPERSONATION_ABORTED = "denied_impersonation_aborted"
    DENIED_TOOL_ERROR_LOOP = "denied_tool_error_loop"
    DENIED_END_TURN = "denied_end_turn"
    DENIED_NOVELAI_RETRIES_EXHAUSTED = "denied_novelai_retries_exhausted"
    DENIED_RESTART_TAKES_STASH = "denied_restart_takes_stash"
    DENIED_CEILING_REACHED = "denied_ceiling_reached"
    DENIED_RESTARTED = "denied_restarted"
    DENIED_NOVELAI_RETRY = "denied_novelai_retry"
    DENIED_TOOL_FAILED = "denied_tool_failed"


@attrs.frozen(kw_only=True)
class Row:
    """One row of the table: when `event` arrives in `source` and the guards hold."""

    source: Phase
    event: type[Event]
    when: tuple[Guard, ...] = ()
    """Guards that must all hold."""
    unless: tuple[Guard, ...] = ()
    """Guards of which none may hold."""
    actions: tuple[Action, ...]
    """What the move does, in order: each writes the draft and appends effects."""
    dest: Phase
    move: Move
    rule: str
    """The SPEC rule the row implements, e.g. "6.4"."""


def _row(
    source: Phase,
    event: type[Event],
    move: Move,
    when: tuple[Guard, ...],
    actions: tuple[Action, ...],
    dest: Phase,
    rule: str,
    unless: tuple[Guard, ...] = (),
) -> Row:
    return Row(
        source=source,
        event=event,
        move=move,
        when=when,
        unless=unless,
        actions=actions,
        dest=dest,
        rule=rule,
    )


# What every row of an event does first.
RECORDED = (do.record_stream,)
CALLED = (*RECORDED, do.mark_chain_active)
REFUSED = (*CALLED, do.clear_follow_up, do.keep_refusal)
SETTLED = (do.clear_follow_up, do.report_settled)
KEPT = (*SETTLED, do.keep_result)
# How a row that does not finish goes on: the next iteration, or the ceiling.
NEXT = (do.advance, do.begin_iteration)
CEILING = (do.advance, do.finish_timeout)
NOVELAI_FAILED = (do.count_novelai_failure, do.suppress_text)

M, S, T = Move, StreamEnded, ToolSettled

_MOVES: tuple[Row, ...] = (
    # IDLE --TurnStarted-->
    _row(IDLE, TurnStarted, M.STARTED, (), (do.begin_iteration,), STREAMING, "4.1"),
    # STREAMING --StreamEnded--> by the stream's status (SPEC 4.3) ...
    _row(
        STREAMING,
        S,
        M.COMPLETED,
        (g.stream_completed,),
        (*RECORDED, do.reset_follow_ups, do.finish_with_sticker),
        FINISHED,
        "4.3",
    ),
    _row(
        STREAMING,
        S,
        M.STREAM_FAILED,
        (g.stream_failed,),
        (*RECORDED, do.reset_follow_ups, do.finish_stream_failed),
        FINISHED,
        "4.3",
    ),
    _row(
        STREAMING,
        S,
        M.EMPTY_RESPONSE,
        (g.stream_empty,),
        (*RECORDED, do.finish_empty),
        FINISHED,
        "4.3",
    ),
    _row(
        STREAMING,
        S,
        M.STOPPED_BY_USER,
        (g.stream_stopped,),
        (*RECORDED, do.answer_stop, do.reset_follow_ups, do.finish_stopped),
        FINISHED,
        "4.3",
    ),
    _row(
        STREAMING,
        S,
        M.FOLLOW_UP_INTERRUPT,
        (g.stream_interrupted,),
        (*RECORDED, do.finish_interrupted),
        FINISHED,
        "4.3",
    ),
    # ... and a function_call stream's call through stage 02 (SPEC 6)
    _row(
        STREAMING,
        S,
        M.CALL_MALFORMED,
        (g.call_malformed,),
        (*CALLED, do.finish_malformed),
        FINISHED,
        "6.1",
    ),
    _row(
        STREAMING,
        S,
        M.STOPPED_BEFORE_TOOL,
        (g.stop_requested,),
        (*CALLED, do.abort_stopped),
        FINISHED,
        "6.2",
    ),
    _row(
        STREAMING,
        S,
        M.IMPERSONATION_ABORTED,
        (g.call_refused, g.error_cap_reached, g.under_impersonation),
        (*REFUSED, do.raise_impersonation),
        FINISHED,
        "4.3h1",
    ),
    _row(
        STREAMING,
        S,
        M.TOOL_ERROR_LOOP,
        (g.call_refused, g.error_cap_reached),
        (*REFUSED, do.finish_error_loop),
        FINISHED,
        "4.3h1",
    ),
    _row(
        STREAMING,
        S,
        M.NOVELAI_RETRIES_EXHAUSTED,
        (g.call_refused, g.novelai_retries_exhausted),
        (*REFUSED, do.count_novelai_failure, do.finish_novelai_exhausted),
        FINISHED,
        "4.3h3",
    ),
    _row(
        STREAMING,
        S,
        M.CEILING_REACHED,
        (g.call_refused, g.ceiling_reached, g.novelai_failure_after_text),
        (*REFUSED, *NOVELAI_FAILED, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        STREAMING,
        S,
        M.CEILING_REACHED,
        (g.call_refused, g.ceiling_reached),
        (*REFUSED, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        STREAMING,
        S,
        M.NOVELAI_RETRY,
        (g.call_refused, g.novelai_failure_after_text),
        (*REFUSED, *NOVELAI_FAILED, *NEXT),
        STREAMING,
        "4.3h3",
    ),
    _row(STREAMING, S, M.TOOL_FAILED, (g.call_refused,), (*REFUSED, *NEXT), STREAMING, "6.4 6.5"),
    _row(
        STREAMING,
        S,
        M.DISPATCHED,
        (),
        (*CALLED, do.clear_follow_up, do.dispatch),
        DISPATCHING,
        "6.6 6b.3",
    ),
    # DISPATCHING --ToolSettled--> by the tool's outcome (SPEC 6.7-6.16, then 4.3's history)
    _row(
        DISPATCHING,
        T,
        M.CALL_SETTLED,
        (g.batch_goes_on, g.stop_requested),
        (do.settle_in_batch,),
        DISPATCHING,
        "6b.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.CALL_SETTLED,
        (g.batch_goes_on,),
        (*SETTLED, do.settle_in_batch),
        DISPATCHING,
        "6b.3 6b.5",
    ),
    _row(
        DISPATCHING,
        T,
        M.STOPPED_DURING_TOOL,
        (g.stop_requested,),
        (do.abort_stopped,),
        FINISHED,
        "6.7 6b.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.RESTART_TAKES_STASH,
        (g.restart_requested, g.has_stash_key),
        (*SETTLED, do.take_stash),
        TAKING_STASH,
        "6a",
    ),
    _row(
        DISPATCHING,
        T,
        M.IMPERSONATION_ABORTED,
        (g.error_cap_reached, g.under_impersonation),
        (*KEPT, do.raise_impersonation),
        FINISHED,
        "4.3h1",
    ),
    _row(
        DISPATCHING,
        T,
        M.TOOL_ERROR_LOOP,
        (g.error_cap_reached,),
        (*KEPT, do.finish_error_loop),
        FINISHED,
        "4.3h1",
    ),
    _row(
        DISPATCHING,
        T,
        M.END_TURN,
        (g.end_turn_requested,),
        (*KEPT, do.finish_with_sticker),
        FINISHED,
        "4.3h2",
        unless=(g.restart_requested,),
    ),
    _row(
        DISPATCHING,
        T,
        M.NOVELAI_RETRIES_EXHAUSTED,
        (g.novelai_retries_exhausted,),
        (*KEPT, do.count_novelai_failure, do.finish_novelai_exhausted),
        FINISHED,
        "4.3h3",
    ),
    _row(
        DISPATCHING,
        T,
        M.EXIT_POLICY_ENDED,
        (g.exit_policy_ends,),
        (*KEPT, do.finish_with_sticker),
        FINISHED,
        "4.3h4 7",
        unless=(g.restart_requested,),
    ),
    _row(
        DISPATCHING,
        T,
        M.RESTART_TAKES_STASH,
        (g.batch_restart_requested, g.has_stash_key),
        (*KEPT, do.take_stash),
        TAKING_STASH,
        "6b.7",
    ),
    _row(
        DISPATCHING,
        T,
        M.CEILING_REACHED,
        (g.ceiling_reached, g.restart_requested),
        (*SETTLED, do.restart_context, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.CEILING_REACHED,
        (g.ceiling_reached, g.novelai_failure_after_text),
        (*KEPT, *NOVELAI_FAILED, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.CEILING_REACHED,
        (g.ceiling_reached, g.outcome_failed),
        (*KEPT, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.CEILING_REACHED,
        (g.ceiling_reached,),
        (*KEPT, do.unsuppress_after_novelai_text, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        DISPATCHING,
        T,
        M.RESTARTED,
        (g.restart_requested,),
        (*SETTLED, do.restart_context, *NEXT),
        STREAMING,
        "6a",
    ),
    _row(
        DISPATCHING,
        T,
        M.RESTARTED,
        (g.batch_restart_requested,),
        (*KEPT, do.restart_context, *NEXT),
        STREAMING,
        "6b.7",
    ),
    _row(
        DISPATCHING,
        T,
        M.NOVELAI_RETRY,
        (g.novelai_failure_after_text,),
        (*KEPT, *NOVELAI_FAILED, *NEXT),
        STREAMING,
        "4.3h3",
    ),
    _row(DISPATCHING, T, M.TOOL_FAILED, (g.outcome_failed,), (*KEPT, *NEXT), STREAMING, "4.3h6"),
    _row(
        DISPATCHING,
        T,
        M.TOOL_SUCCEEDED,
        (g.tool_succeeded,),
        (*KEPT, do.unsuppress_after_novelai_text, *NEXT),
        STREAMING,
        "4.3h5 4.3h6",
    ),
    # TAKING_STASH --StashTaken-->
    _row(
        TAKING_STASH,
        StashTaken,
        M.CEILING_REACHED,
        (g.ceiling_reached,),
        (do.join_stash, *CEILING),
        FINISHED,
        "4.4",
    ),
    _row(
        TAKING_STASH,
        StashTaken,
        M.RESTARTED_WITH_STASH,
        (),
        (do.join_stash, *NEXT),
        STREAMING,
        "6a",
    ),
)


def _decided(rows: tuple[Row, ...]) -> tuple[Row, ...]:
    """The rows of a batch finished by a denial: a settled batch's, the denial reported.

    A denial (or a request nobody answered) can make the last call of a batch
    done; the batch then takes the exits a settled batch with a failure takes
    (SPEC 6c: it counts toward the error cap), each under its own label, the
    denial reported in place of the tool's completion. The exits a failure
    cannot take (all succeeded, a single call's restart) are left out.
    """
    return tuple(
        attrs.evolve(
            row,
            event=ApprovalDecided,
            move=_DENIED[row.move],
            actions=tuple(
                do.report_decision if action is do.report_settled else action
                for action in row.actions
            ),
        )
        for row in rows
        if row.source is DISPATCHING
        and row.event is ToolSettled
        and row.move in _DENIED
        and not {g.batch_goes_on, g.stop_requested, g.restart_requested} & set(row.when)
        and do.unsuppress_after_novelai_text not in row.actions  # the exits of a success
    )


_DENIED = {
    M.IMPERSONATION_ABORTED: M.DENIED_IMPERSONATION_ABORTED,
    M.TOOL_ERROR_LOOP: M.DENIED_TOOL_ERROR_LOOP,
    M.END_TURN: M.DENIED_END_TURN,
    M.NOVELAI_RETRIES_EXHAUSTED: M.DENIED_NOVELAI_RETRIES_EXHAUSTED,
    M.RESTART_TAKES_STASH: M.DENIED_RESTART_TAKES_STASH,
    M.CEILING_REACHED: M.DENIED_CEILING_REACHED,
    M.RESTARTED: M.DENIED_RESTARTED,
    M.NOVELAI_RETRY: M.DENIED_NOVELAI_RETRY,
    M.TOOL_FAILED: M.DENIED_TOOL_FAILED,
}
"""The label of each exit a batch finished by a denial can take."""


_WAITING: tuple[Row, ...] = (
    # DISPATCHING --ApprovalDecided--> by the decision (SPEC 6c)
    _row(
        DISPATCHING,
        ApprovalDecided,
        M.WITHDRAWN,
        (g.stop_requested, g.batch_goes_on),
        (do.withdraw_request, do.await_batch),
        DISPATCHING,
        "6c 6b.4",
    ),
    _row(
        DISPATCHING,
        ApprovalDecided,
        M.STOPPED_WHILE_WAITING,
        (g.stop_requested,),
        (do.withdraw_request, do.abort_stopped),
        FINISHED,
        "6c",
    ),
    _row(
        DISPATCHING,
        ApprovalDecided,
        M.DECISION_REFUSED,
        (g.decision_refused,),
        (do.clear_follow_up, do.refuse_decision),
        DISPATCHING,
        "6c",
    ),
    _row(
        DISPATCHING,
        ApprovalDecided,
        M.DECIDED,
        (g.batch_goes_on,),
        (do.clear_follow_up, do.report_decision, do.resume_batch),
        DISPATCHING,
        "6c",
    ),
)

TABLE: tuple[Row, ...] = (*_MOVES, *_WAITING, *_decided(_MOVES))
"""Every move of the loop, in selection order within each (phase, event type)."""


def _index(rows: tuple[Row, ...]) -> dict[type[Event], tuple[tuple[Phase, tuple[Row, ...]], ...]]:
    phases: dict[type[Event], dict[Phase, tuple[Row, ...]]] = {}
    for row in rows:
        of_event = phases.setdefault(row.event, {})
        of_event[row.source] = (*of_event.get(row.source, ()), row)
    return {event: tuple(of_event.items()) for event, of_event in phases.items()}


ROWS: Mapping[type[Event], tuple[tuple[Phase, tuple[Row, ...]], ...]] = _index(TABLE)
"""Each event type -> the phases that wait for it, each with its rows in order.

Keyed by the event type alone and searched by identity: hashing an `Enum`
member is a Python-level call, and each event type has one waiting phase.
"""
