"""A pure driver for `step`: answers awaited effects from scripts, no interpreter.

The scripts are what the world would report: one stream result per provider
call (the last repeats), one tool result per dispatch (the last repeats), and
the stop requests the turn control holds at each check. The calls of a batch
take their tool results in the order they start; `picks` choose which running
call settles next (an index into the running calls, modulo their number), so
a batch can finish in any order. A call of a tool in `approval_tools` waits for
approval (SPEC 6c): its wait is one of the outcomes `picks` chooses from, and
ends as the next of `decisions` says: `approve`, `deny`, `timeout` or `other`
(an approval given for other arguments). A `timeout` stream is the loop's own
inactivity timeout (`StreamEnded.went_silent`) when the next of `silences` says
so, else a `timeout` the provider reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs

from toolloop.engine.commands import (
    AskApproval,
    AwaitTools,
    DispatchTool,
    Effect,
    Finish,
    RaiseError,
    StartTool,
    StreamOnce,
    TakeStashedContext,
)
from toolloop.engine.events import (
    ApprovalDecided,
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.step import initial_state, step
from toolloop.states import (
    ApprovalDecision,
    ContextItem,
    GenerationTurnResult,
    IterationState,
    LoopConfig,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
    Verdict,
    args_digest,
)


@attrs.frozen(kw_only=True)
class Run:
    """Everything a driven attempt produced, in order."""

    states: tuple[IterationState, ...]
    events: tuple[Event, ...]
    effects: tuple[Effect, ...]
    steps: tuple[tuple[Event, tuple[Effect, ...]], ...]
    moves: tuple[str, ...]

    @property
    def final(self) -> IterationState:
        return self.states[-1]

    @property
    def result(self) -> GenerationTurnResult | None:
        return self.final.result

    @property
    def raised(self) -> RaiseError | None:
        last = self.effects[-1]
        return last if isinstance(last, RaiseError) else None

    def of_type(self, kind: type[Effect]) -> list[Effect]:
        return [e for e in self.effects if isinstance(e, kind)]


def _cycle(items: Sequence[object]) -> Iterator[object]:
    yield from items
    while True:
        yield items[-1]


def drive(
    streams: Sequence[StreamResult],
    tools: Sequence[ToolResult] = (ToolResult(success=True),),
    *,
    turn: TurnSettings | None = None,
    config: LoopConfig | None = None,
    stops: Sequence[StopRequest] = (StopRequest.NONE,),
    requires_follow_up: bool = False,
    stash: dict[str, ContextItem] | None = None,
    picks: Sequence[int] = (0,),
    exclusive_tools: frozenset[str] = frozenset(),
    approval_tools: frozenset[str] = frozenset(),
    decisions: Sequence[str] = ("approve",),
    silences: Sequence[bool] = (False,),
) -> Run:
    """Run `step` from the initial state until a final effect, answering from the scripts."""
    state = initial_state(config or LoopConfig(), turn or TurnSettings())
    stream_it, tool_it, stop_it = _cycle(streams), _cycle(tools), _cycle(stops)
    pick_it, decision_it, silence_it = _cycle(picks), _cycle(decisions), _cycle(silences)
    running: list[tuple[int, object]] = []
    asked: set[object] = set()
    event: Event = TurnStarted()
    states, events, effects, steps, moves = [state], [], [], [], []
    while True:
        out = step(state, event)
        state = out.state
        states.append(state)
        events.append(event)
        effects.extend(out.effects)
        steps.append((event, out.effects))
        moves.append(out.move)
        *first, last = out.effects
        running += [(e.index, next(tool_it)) for e in first if isinstance(e, StartTool)]
        for e in first:
            if isinstance(e, AskApproval):
                kind = next(decision_it)
                if kind == "other" and (e.request.call_id, state.iteration) in asked:
                    kind = "timeout"  # wrong answers again: the first deadline passes
                asked.add((e.request.call_id, state.iteration))
                running.append((e.index, _decision(kind, e)))  # type: ignore[arg-type]
        if isinstance(last, AwaitTools):
            index, result = running.pop(next(pick_it) % len(running))  # type: ignore[operator]
            if isinstance(result, ApprovalDecision) or result is None:
                stop = next(stop_it)
                event = ApprovalDecided(index=index, decision=result, stop=stop)  # type: ignore[arg-type]
                continue
            event = ToolSettled(
                result=result,  # type: ignore[arg-type]
                requires_follow_up=requires_follow_up,
                stop=next(stop_it),  # type: ignore[arg-type]
                index=index,
            )
            continue
        if isinstance(last, Finish | RaiseError):
            return Run(
                states=tuple(states),
                events=tuple(events),
                effects=tuple(effects),
                steps=tuple(steps),
                moves=tuple(moves),
            )
        event = _answer(last, stream_it, tool_it, stop_it, requires_follow_up, stash or {})
        if isinstance(event, StreamEnded) and event.result.status is StreamStatus.TIMEOUT:
            event = attrs.evolve(event, went_silent=next(silence_it))
        if isinstance(event, StreamEnded) and len(event.result.calls) > 1:
            # What the interpreter asks the registry for a batch (SPEC 6b item 3).
            alone = tuple(c.name.strip() in exclusive_tools for c in event.result.calls)
            event = attrs.evolve(event, exclusive=alone)
        if isinstance(event, StreamEnded) and approval_tools:
            # ... and for each call: it needs approval (SPEC 6c).
            asks = tuple(c.name.strip() in approval_tools for c in event.result.batch)
            event = attrs.evolve(event, approval=asks if any(asks) else ())


def _decision(kind: str, asked: AskApproval) -> ApprovalDecision | None:
    """The decision a wait ends with; None: nobody answered in time."""
    digest = asked.request.digest
    if kind == "timeout":
        return None
    if kind == "other":
        return ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"other": True}))
    verdict = Verdict.APPROVE if kind == "approve" else Verdict.DENY
    return ApprovalDecision(verdict=verdict, digest=digest, reason="no" if kind == "deny" else None)


def _answer(
    effect: Effect,
    streams: Iterator[object],
    tools: Iterator[object],
    stops: Iterator[object],
    requires_follow_up: bool,
    stash: dict[str, ContextItem],
) -> Event:
    if isinstance(effect, StreamOnce):
        return StreamEnded(result=next(streams), stop=next(stops))  # type: ignore[arg-type]
    if isinstance(effect, DispatchTool):
        return ToolSettled(
            result=next(tools),  # type: ignore[arg-type]
            requires_follow_up=requires_follow_up,
            stop=next(stops),  # type: ignore[arg-type]
            index=effect.index,
        )
    if isinstance(effect, TakeStashedContext):
        return StashTaken(item=stash.pop(effect.key, None))
    raise AssertionError(f"not an awaited effect: {effect!r}")
