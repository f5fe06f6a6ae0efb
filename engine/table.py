"""The table: every move of the tool loop, one row a line; `step` runs it.

Theory of operation
-------------------

The loop is in one `Phase` at a time and each phase waits for exactly one
kind of event, the answer to the awaited effect that ended the previous step:

    IDLE          --TurnStarted-->      STREAMING
    STREAMING     --StreamEnded-->      DISPATCHING | STREAMING | FINISHED
    DISPATCHING   --ToolSettled-->      DISPATCHING | STREAMING | TAKING_STASH | FINISHED
    DISPATCHING   --ApprovalDecided-->  (the same)
    TAKING_STASH  --StashTaken-->       STREAMING | FINISHED

The rows are grouped by (phase, event type). For an event, `step` builds the
event's `Context` once (`toolloop.engine.guards`: the facts the guards read,
the counts the actions write), takes the first row of its group whose guards
all hold, runs the row's actions in order on a draft of the next state, and
moves to the row's destination, reporting the row's move. Nothing else
decides: every choice is a row. A pair without rows raises `InvalidEvent`.

A row's columns:

* name: unique; `move` or `move:case` when several rows report one move
  (`toolloop.specs.paths.WITNESSES` is keyed by it). The move (`Move`) is
  what `Step.move` and traces report; rows sharing it from one phase share
  the event and the destination, so a trace's move names one diagram edge.
* guards: facts of the `Context` (`guards.FACTS`), all of which must hold;
  `!fact`: a fact that must not.
* actions: functions of `toolloop.engine.actions`, run in order; an upper-case
  name is a sequence of them (`SEQUENCES`). Guards and actions are names,
  checked on import (`BadRow`).
* destination, and the SPEC rule the row implements (`4.3h2` is step 2 of the
  history branch of SPEC 4 item 3), so `grep -n 6.4 engine/*.py` finds the
  row of SPEC 6.4, the fact it reads and the action that keeps its entry.

The declared machine, its diagrams, the model-based paths and the move
coverage (`toolloop.specs`) are derived from `TABLE`; none keeps a copy.

Read with the rows:

* The ceiling (SPEC 4.4) ends the loop after whichever outcome would have
  started the next iteration; each such outcome keeps its own state changes
  first, so each is its own `ceiling_reached:` row. It is not checked from
  IDLE: the smallest configurable ceiling (SPEC 2) is one iteration.
* A stream with several calls is one batch (SPEC 6b) and takes the rows of one
  call: its facts are the batch's (malformed if any call is, refused if every
  call is; once its last call settles, its entries counted in the model's
  order). While it runs, DISPATCHING waits for each call's `ToolSettled`
  (`call_settled`: keep the result, start what the parallel limit and
  exclusivity allow); the last call's settle takes the rows of one settled
  tool. A stop is checked once, after the batch: a settle that sees one
  starts nothing more and waits for the calls still running. A restart asked
  for by a call of the batch takes effect after the batch's other exits
  (6b item 7, the `:batch` rows).
* A call that needs a person's approval (SPEC 6c) waits in DISPATCHING as a
  call of its batch: each `ApprovalDecided` answers one request. A denial (or
  a request nobody answered) that leaves every call done takes the exits of a
  settled batch with a failure, the `denied_` rows, the denial reported in
  place of the tool's completion (`DENIED` for `KEPT`).
* One choice is made by data, not by a row: a refused call is reported and
  kept by its `guards.Refusal` (truncated: an error log and the request to
  reissue the call whole; blocked: a warning and the tools it may use; denied:
  the person's reason), through `REFUSAL_REPORTS` and `keep_refused` of
  `toolloop.engine.history`. The rows are the same for each refusal.
"""

import enum
from collections.abc import Mapping

import attrs

from toolloop.engine import actions as do
from toolloop.engine.actions import Action
from toolloop.engine.events import (
    ApprovalDecided,
    Event,
    StashTaken,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.guards import FACTS
from toolloop.states import Phase
from toolloop.states.errors import ToolloopError

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


SEQUENCES = {
    "RECORDED": "record_stream",  # what every StreamEnded row does first
    "CALLED": "RECORDED mark_chain_active",
    "REFUSED": "CALLED clear_follow_up keep_refusal",
    "SETTLED": "clear_follow_up report_settled",
    "KEPT": "SETTLED keep_result",
    "DENIED": "clear_follow_up report_decision keep_result",
    "NEXT": "advance begin_iteration",  # a row that does not finish: the next iteration ...
    "CEILING": "advance finish_timeout",  # ... or the ceiling
    "NOVELAI_FAILED": "count_novelai_failure suppress_text",
}
"""Sequences of actions many rows run, by the name the rows use."""

S, D, T, F = STREAMING, DISPATCHING, TAKING_STASH, FINISHED
# fmt: off
_ROWS: dict[tuple[Phase, type[Event]], tuple[tuple[str, str, str, Phase, str], ...]] = {
    # name                                   guards                                              actions                                         destination  SPEC rule
    (IDLE, TurnStarted): (
        ("started",                              "",                                                 "begin_iteration",                                S, "4.1"),
    ),
    (STREAMING, StreamEnded): (  # by the stream's status (SPEC 4.3) ...
        ("completed",                            "stream_completed",                                 "RECORDED reset_follow_ups finish_with_sticker",  F, "4.3"),
        ("stream_failed:silent",                 "stream_went_silent",                               "RECORDED notice_inactivity reset_follow_ups finish_stream_failed", F, "4.3 5"),
        ("stream_failed",                        "stream_failed",                                    "RECORDED reset_follow_ups finish_stream_failed", F, "4.3"),
        ("empty_response",                       "stream_empty",                                     "RECORDED finish_empty",                          F, "4.3"),
        ("stopped_by_user",                      "stream_stopped",                                   "RECORDED answer_stop reset_follow_ups finish_stopped", F, "4.3"),
        ("follow_up_interrupt",                  "stream_interrupted",                               "RECORDED finish_interrupted",                    F, "4.3"),
        # ... and a function_call stream's call through stage 02 (SPEC 6)
        ("call_malformed",                       "call_malformed",                                   "CALLED finish_malformed",                        F, "6.1"),
        ("stopped_before_tool",                  "stop_requested",                                   "CALLED abort_stopped",                           F, "6.2"),
        ("impersonation_aborted:refused",        "call_refused error_cap_reached under_impersonation", "REFUSED raise_impersonation",                  F, "4.3h1"),
        ("tool_error_loop:refused",              "call_refused error_cap_reached",                   "REFUSED finish_error_loop",                      F, "4.3h1"),
        ("novelai_retries_exhausted:refused",    "call_refused novelai_retries_exhausted",           "REFUSED count_novelai_failure finish_novelai_exhausted", F, "4.3h3"),
        ("ceiling_reached:refused_novelai",      "call_refused ceiling_reached novelai_failure_after_text", "REFUSED NOVELAI_FAILED CEILING",           F, "4.4"),
        ("ceiling_reached:refused",              "call_refused ceiling_reached",                     "REFUSED CEILING",                                F, "4.4"),
        ("novelai_retry:refused",                "call_refused novelai_failure_after_text",          "REFUSED NOVELAI_FAILED NEXT",                    S, "4.3h3"),
        ("tool_failed:refused",                  "call_refused",                                     "REFUSED NEXT",                                   S, "6.4 6.5"),
        ("dispatched",                           "",                                                 "CALLED clear_follow_up dispatch",                D, "6.6 6b.3"),
    ),
    (DISPATCHING, ToolSettled): (  # by the tool's outcome (SPEC 6.7-6.16, then 4.3's history)
        ("call_settled:after_stop",              "batch_goes_on stop_requested",                     "settle_in_batch",                                D, "6b.4"),
        ("call_settled",                         "batch_goes_on",                                    "SETTLED settle_in_batch",                        D, "6b.3 6b.5"),
        ("stopped_during_tool",                  "stop_requested",                                   "abort_stopped",                                  F, "6.7 6b.4"),
        ("restart_takes_stash",                  "restart_requested has_stash_key",                  "SETTLED take_stash",                             T, "6a"),
        ("impersonation_aborted",                "error_cap_reached under_impersonation",            "KEPT raise_impersonation",                       F, "4.3h1"),
        ("tool_error_loop",                      "error_cap_reached",                                "KEPT finish_error_loop",                         F, "4.3h1"),
        ("end_turn",                             "end_turn_requested !restart_requested",            "KEPT finish_with_sticker",                       F, "4.3h2"),
        ("novelai_retries_exhausted",            "novelai_retries_exhausted",                        "KEPT count_novelai_failure finish_novelai_exhausted", F, "4.3h3"),
        ("exit_policy_ended",                    "exit_policy_ends !restart_requested",              "KEPT finish_with_sticker",                       F, "4.3h4 7"),
        ("restart_takes_stash:batch",            "batch_restart_requested has_stash_key",            "KEPT take_stash",                                T, "6b.7"),
        ("ceiling_reached:restart",              "ceiling_reached restart_requested",                "SETTLED restart_context CEILING",                F, "4.4"),
        ("ceiling_reached:novelai_failure",      "ceiling_reached novelai_failure_after_text",       "KEPT NOVELAI_FAILED CEILING",                    F, "4.4"),
        ("ceiling_reached:failure",              "ceiling_reached outcome_failed",                   "KEPT CEILING",                                   F, "4.4"),
        ("ceiling_reached:success",              "ceiling_reached",                                  "KEPT unsuppress_after_novelai_text CEILING",     F, "4.4"),
        ("restarted",                            "restart_requested",                                "SETTLED restart_context NEXT",                   S, "6a"),
        ("restarted:batch",                      "batch_restart_requested",                          "KEPT restart_context NEXT",                      S, "6b.7"),
        ("novelai_retry",                        "novelai_failure_after_text",                       "KEPT NOVELAI_FAILED NEXT",                       S, "4.3h3"),
        ("tool_failed",                          "outcome_failed",                                   "KEPT NEXT",                                      S, "4.3h6"),
        ("tool_succeeded",                       "tool_succeeded",                                   "KEPT unsuppress_after_novelai_text NEXT",        S, "4.3h5 4.3h6"),
    ),
    (TAKING_STASH, StashTaken): (
        ("ceiling_reached:stash",                "ceiling_reached",                                  "join_stash CEILING",                             F, "4.4"),
        ("restarted_with_stash",                 "",                                                 "join_stash NEXT",                                S, "6a"),
    ),
    (DISPATCHING, ApprovalDecided): (  # by the decision (SPEC 6c), then as a batch with a failure
        ("withdrawn",                            "stop_requested batch_goes_on",                     "withdraw_request await_batch",                   D, "6c 6b.4"),
        ("stopped_while_waiting",                "stop_requested",                                   "withdraw_request abort_stopped",                 F, "6c"),
        ("decision_refused",                     "decision_refused",                                 "clear_follow_up refuse_decision",                D, "6c"),
        ("decided",                              "batch_goes_on",                                    "clear_follow_up report_decision resume_batch",   D, "6c"),
        ("denied_impersonation_aborted",         "error_cap_reached under_impersonation",            "DENIED raise_impersonation",                     F, "4.3h1"),
        ("denied_tool_error_loop",               "error_cap_reached",                                "DENIED finish_error_loop",                       F, "4.3h1"),
        ("denied_end_turn",                      "end_turn_requested !restart_requested",            "DENIED finish_with_sticker",                     F, "4.3h2"),
        ("denied_novelai_retries_exhausted",     "novelai_retries_exhausted",                        "DENIED count_novelai_failure finish_novelai_exhausted", F, "4.3h3"),
        ("denied_restart_takes_stash",           "batch_restart_requested has_stash_key",            "DENIED take_stash",                              T, "6b.7"),
        ("denied_ceiling_reached:novelai_failure", "ceiling_reached novelai_failure_after_text",     "DENIED NOVELAI_FAILED CEILING",                  F, "4.4"),
        ("denied_ceiling_reached:failure",       "ceiling_reached outcome_failed",                   "DENIED CEILING",                                 F, "4.4"),
        ("denied_restarted",                     "batch_restart_requested",                          "DENIED restart_context NEXT",                    S, "6b.7"),
        ("denied_novelai_retry",                 "novelai_failure_after_text",                       "DENIED NOVELAI_FAILED NEXT",                     S, "4.3h3"),
        ("denied_tool_failed",                   "outcome_failed",                                   "DENIED NEXT",                                    S, "4.3h6"),
    ),
}
# fmt: on


class BadRow(ToolloopError, ValueError):
    """A row of the table names a guard, an action or a move that does not exist."""


@attrs.frozen(kw_only=True)
class Row:
    """One row of the table: when `event` arrives in `source` and the guards hold."""

    name: str
    """Unique in the table: the move, and after a colon its case when the move has several."""
    source: Phase
    event: type[Event]
    when: tuple[str, ...] = ()
    """Facts that must all hold."""
    unless: tuple[str, ...] = ()
    """Facts of which none may hold."""
    actions: tuple[Action, ...]
    """What the move does, in order: each writes the draft and appends effects."""
    dest: Phase
    move: Move
    rule: str
    """The SPEC rule the row implements, e.g. "6.4"."""


def _actions(names: str, row: str) -> tuple[Action, ...]:
    """The actions `names` stands for, sequences expanded, or `BadRow` naming `row`."""
    found: list[Action] = []
    for name in names.split():
        if name in SEQUENCES:
            found += _actions(SEQUENCES[name], row)
            continue
        action = getattr(do, name, None) if not name.startswith("_") else None
        if not callable(action) or getattr(action, "__module__", None) != do.__name__:
            raise BadRow(f"row {row!r}: {name!r} is no action of {do.__name__}")
        found.append(action)
    return tuple(found)


def row(
    source: Phase, event: type[Event], name: str, guards: str, actions: str, dest: Phase, rule: str
) -> Row:
    """The row written as one line of `_ROWS`, its names checked, or `BadRow`."""
    unknown = [guard for guard in guards.replace("!", "").split() if guard not in FACTS]
    if unknown:
        raise BadRow(f"row {name!r}: {', '.join(map(repr, unknown))} is no fact of guards.Context")
    move = name.partition(":")[0]
    if move not in Move.__members__.values():
        raise BadRow(f"row {name!r}: {move!r} is no member of Move")
    return Row(
        name=name,
        source=source,
        event=event,
        when=tuple(guard for guard in guards.split() if not guard.startswith("!")),
        unless=tuple(guard[1:] for guard in guards.split() if guard.startswith("!")),
        actions=_actions(actions, name),
        dest=dest,
        move=Move(move),
        rule=rule,
    )


def rows_of(
    grouped: Mapping[tuple[Phase, type[Event]], tuple[tuple[str, str, str, Phase, str], ...]],
) -> tuple[Row, ...]:
    """The rows written in `grouped`, in order, or `BadRow` for the first one at fault."""
    table = tuple(
        row(source, event, *line) for (source, event), lines in grouped.items() for line in lines
    )
    names = [each.name for each in table]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BadRow(f"rows named twice: {', '.join(twice)}")
    return table


TABLE: tuple[Row, ...] = rows_of(_ROWS)
"""Every move of the loop, in selection order within each (phase, event type)."""


def _index(rows: tuple[Row, ...]) -> dict[type[Event], tuple[tuple[Phase, tuple[Row, ...]], ...]]:
    phases: dict[type[Event], dict[Phase, tuple[Row, ...]]] = {}
    for each in rows:
        of_event = phases.setdefault(each.event, {})
        of_event[each.source] = (*of_event.get(each.source, ()), each)
    return {event: tuple(of_event.items()) for event, of_event in phases.items()}


ROWS: Mapping[type[Event], tuple[tuple[Phase, tuple[Row, ...]], ...]] = _index(TABLE)
"""Each event type -> the phases that wait for it, each with its rows in order.

Keyed by the event type alone and searched by identity: hashing an `Enum`
member is a Python-level call, and each event type has one waiting phase.
"""
