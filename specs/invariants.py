"""The loop invariants of SPEC, as predicates over a recorded trace and its result.

Each invariant takes a `toolloop.engine.trace.Trace` (every step's event,
effects and move) and the attempt's result (None when the loop raised), and
returns its violations as sentences naming the step, empty when it holds. The
property tests run them over generated attempts; `toolloop replay --check` runs
`check` over a trace file. `registrations_cleaned_up` reads the interpreter's
registration log instead, which the trace does not carry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import attrs

from toolloop.engine.commands import Effect, Finish, NoticeKey, SendNotice, StreamOnce
from toolloop.engine.events import StreamEnded
from toolloop.engine.trace import Trace, TraceStep
from toolloop.states import GenerationTurnResult, StreamStatus, TurnStatus

Result = GenerationTurnResult | None
TIMEOUT = StreamStatus.TIMEOUT
Invariant = Callable[[Trace, Result], list[str]]

#: The notices SPEC sends at most once per attempt.
ONCE: tuple[NoticeKey, ...] = (
    NoticeKey.STILL_WORKING,
    NoticeKey.MAX_ITERATIONS,
    NoticeKey.TOOL_ERROR_LOOP,
    NoticeKey.NAI_TOOL_RETRY_EXHAUSTED,
)


def _effects(trace: Trace) -> Iterator[tuple[str, Effect]]:
    """Every effect with the name of its step, e.g. `step 3 (ToolSettled)`."""
    for index, record in enumerate(trace.steps):
        where = _where(index, record)
        for effect in record.effects:
            yield where, effect


def _where(index: int, record: TraceStep) -> str:
    return f"step {index} ({type(record.event).__name__})"


def result_of(trace: Trace) -> Result:
    """The result the trace finished with, or None when it raised or did not finish."""
    finished = [e.result for _, e in _effects(trace) if isinstance(e, Finish)]
    return finished[-1] if finished else None


def notices_at_most_once(trace: Trace, result: Result) -> list[str]:
    """Still working, max iterations, tool error loop and NovelAI exhausted: once each at most."""
    first: dict[NoticeKey, str] = {}
    found: list[str] = []
    for where, effect in _effects(trace):
        if isinstance(effect, SendNotice) and effect.key in ONCE:
            if effect.key in first:
                seen = first[effect.key]
                found.append(f"{where}: notice {effect.key.value} sent again (first at {seen})")
            first.setdefault(effect.key, where)
    return found


def history_paired(trace: Trace, result: Result) -> list[str]:
    """Every history entry holds a call and a response under the same tool name."""
    found: list[str] = []
    for where, effect, start in _histories(trace):
        for number, entry in enumerate(effect.function_history[start:], start=start):
            response = entry.function_response
            name = response.get("name") if isinstance(response, dict) else None
            if name != entry.function_call.name or "response" not in response:
                call = entry.function_call.name
                found.append(f"{where}: history entry {number} pairs call {call!r} with {name!r}")
    return found


def _histories(trace: Trace) -> Iterator[tuple[str, StreamOnce, int]]:
    """Each provider call, and where its history's entries not yet seen start.

    A history that extends the previous call's is checked from its first new
    entry, so a trace of n calls costs n entries, not n squared; one that does
    not is checked whole (and `history_only_grows` reports it).
    """
    previous: tuple[object, ...] = ()
    for where, effect in _effects(trace):
        if isinstance(effect, StreamOnce):
            history = effect.function_history
            yield where, effect, len(previous) if history[: len(previous)] == previous else 0
            previous = history


def history_only_grows(trace: Trace, result: Result) -> list[str]:
    """Each provider call's history starts with the previous call's: entries are only appended."""
    found: list[str] = []
    previous: tuple[object, ...] = ()
    for where, effect in _effects(trace):
        if isinstance(effect, StreamOnce):
            if effect.function_history[: len(previous)] != previous:
                found.append(f"{where}: history does not extend the previous provider call's")
            previous = effect.function_history
    return found


def sticker_only_on_completed(trace: Trace, result: Result) -> list[str]:
    """A selected sticker reaches a result only when it is `completed`."""
    results = [(where, e.result) for where, e in _effects(trace) if isinstance(e, Finish)]
    if result is not None:
        results.append(("the result", result))
    return [
        f"{where}: sticker {found.selected_sticker.id!r} on a {found.status.value} result"
        for where, found in results
        if found.selected_sticker is not None and found.status is not TurnStatus.COMPLETED
    ]


def no_text_delivered_twice(trace: Trace, result: Result) -> list[str]:
    """Pre-tool text owned by a history entry is never also sent as a model part (prefill)."""
    found: list[str] = []
    owned: set[object] = set()
    for where, effect, start in _histories(trace):
        if start == 0:
            owned.clear()
        for entry in effect.function_history[start:]:
            owned.update(part.get("text") for part in entry.pre_tool_call_text_parts or ())
        for part in effect.accumulated_model_parts:
            if part.get("text") in owned:
                text = part.get("text")
                found.append(f"{where}: text {text!r} is both in history and in the model parts")
    return found


def silence_noticed(trace: Trace, result: Result) -> list[str]:
    """A stream the loop's inactivity timeout ended is followed by exactly one inactivity
    notice, in its own step, unless the turn suppresses user errors; no other step sends one."""
    found: list[str] = []
    for index, record in enumerate(trace.steps):
        event = record.event
        silent = _went_silent(event) if isinstance(event, StreamEnded) else False
        expected = 1 if silent and not trace.turn.suppress_user_errors else 0
        sent = sum(
            isinstance(effect, SendNotice) and effect.key is NoticeKey.STREAM_INACTIVITY_TIMEOUT
            for effect in record.effects
        )
        if sent != expected:
            why = "no silent stream" if not silent else "a silent stream"
            if silent and not expected:
                why += ", user errors suppressed"
            where = _where(index, record)
            found.append(f"{where}: {sent} inactivity notices where {expected} belong ({why})")
    return found


def _went_silent(event: StreamEnded) -> bool:
    return event.went_silent and event.result.status is TIMEOUT


INVARIANTS: tuple[Invariant, ...] = (
    notices_at_most_once,
    silence_noticed,
    history_paired,
    history_only_grows,
    sticker_only_on_completed,
    no_text_delivered_twice,
)


def check(trace: Trace, result: Result = None) -> list[str]:
    """Every violation of every trace invariant; `result` defaults to the trace's own."""
    final = result if result is not None else result_of(trace)
    return [violation for invariant in INVARIANTS for violation in invariant(trace, final)]


@attrs.frozen(kw_only=True)
class Registration:
    """One entry of the interpreter's registration log (stage 01's callback and kill handle)."""

    action: Literal["register", "deregister"]
    handle: str
    """What was registered, unique while it lives, e.g. `kill:channel` or `progress:3`."""
    where: str = ""
    """Where it happened, for the message (e.g. `iteration 2`)."""


def registrations_cleaned_up(log: Sequence[Registration]) -> list[str]:
    """Each registration is deregistered once, after it was made, and none is left at the end."""
    live: dict[str, str] = {}
    found: list[str] = []
    for number, entry in enumerate(log):
        at = entry.where or f"entry {number}"
        if entry.action == "register":
            if entry.handle in live:
                found.append(f"{at}: {entry.handle} registered again while live")
            live[entry.handle] = at
        elif live.pop(entry.handle, None) is None:
            found.append(f"{at}: {entry.handle} deregistered but not registered")
    found.extend(f"{at}: {handle} was never deregistered" for handle, at in live.items())
    return found
