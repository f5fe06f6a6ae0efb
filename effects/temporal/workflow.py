"""The turn as a Temporal workflow: it drives `step`; the effects are activities.

`step` is pure and deterministic, so the workflow runs it as it is: replaying
the history replays the same steps. The awaited effects are activities (a
provider call, a tool call, each call of a batch beside the others, a stash
take); a step's notices and turn-control counts are one `chores` activity.
The workflow holds what the turn control holds in a process: the stop and
follow-up requests and the kill (signals), and it keeps the approval waits
(the `decide` update, a timer for `TOOL_APPROVAL_TIMEOUT_MS`). The state is
the `state` query.

Temporal retries nothing here: the loop has its own rules for a failed stream
or tool. What the loop cannot see, a worker lost in the middle of a call, the
workflow handles itself: a stream is made again on another worker after the
text the channel already shows; a tool runs again only if it is idempotent,
else its result says it may have run. The workflow continues as new, with its
state and the event it answers, before its history grows past
`history_events` or `history_bytes`, whenever no call of a batch is running.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import exceptions as tx
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import attrs

    from toolloop.effects.interpreter.calls import failure
    from toolloop.effects.interpreter.tools import timed_out
    from toolloop.effects.temporal.activities import HOST_CHORES
    from toolloop.effects.temporal.messages import (
        AskInput,
        CallFacts,
        Carry,
        Chores,
        Decision,
        StashInput,
        StreamInput,
        StreamOutput,
        ToolInput,
        TurnInput,
        Waiting,
        lean,
    )
    from toolloop.engine import commands as fx
    from toolloop.engine import tool_call
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
        GenerationTurnResult,
        IterationState,
        StreamError,
        StreamResult,
        StreamStatus,
        ToolResult,
    )

#: Temporal retries no effect: the loop decides what a failure means.
ONCE = RetryPolicy(maximum_attempts=1)
#: How often a call whose worker was lost is made again before the turn gives up on it.
WORKER_LOSSES = 3
#: The longest a single provider call may run, however steadily it streams.
STREAM_LIMIT = timedelta(hours=1)


@attrs.define
class _Run:
    """A call of a batch started beside the others; `result` once it settled."""

    effect: fx.StartTool | fx.DispatchTool
    started: float
    task: asyncio.Task[None] | None = None
    """The workflow task awaiting a started call of a batch."""


@attrs.define
class _Ask:
    """A call waiting for a person's decision until `deadline` (workflow time, seconds)."""

    effect: fx.AskApproval
    deadline: float
    handle: workflow.ActivityHandle[ApprovalDecision | None] | None = None
    """The host's prompt (the `ask` activity) while it runs."""
    task: asyncio.Task[None] | None = None


@workflow.defn(name="toolloop.turn")
class TurnWorkflow:
    """One turn of the tool loop; its result is the attempt's `GenerationTurnResult`."""

    def __init__(self) -> None:
        self._pending = StopRequest.NONE
        self._killed = False
        self._chain = False
        self._state: IterationState | None = None
        self._facts: tuple[CallFacts, ...] = ()
        self._error: Exception | None = None
        """What failed in a task of the batch (a host's prompt): the attempt's failure."""
        self._chores: tuple[fx.Effect, ...] = ()
        """The host's effects of the step, for its awaited effect's activity to carry."""
        self._runs: dict[int, _Run] = {}
        self._asked: dict[int, _Ask] = {}
        self._deadlines: dict[int, float] = {}
        self._decisions: dict[int, ApprovalDecision] = {}
        self._settled: collections.deque[tuple[int, ToolResult | ApprovalDecision | None]] = (
            collections.deque()
        )
        self._given: TurnInput

    @workflow.run
    async def run(self, given: TurnInput) -> GenerationTurnResult:
        self._given = given
        carry = given.carry
        event: Event
        if carry is None:
            state, event, runs = initial_state(given.config, given.turn), TurnStarted(), 0
        else:
            state, event, runs = carry.state, carry.event, carry.runs
            self._chain, self._facts = carry.chain_active, carry.facts
        while True:
            out = step(state, event)
            state = self._state = out.state
            *chores, last = out.effects
            await self._perform(chores)
            if not isinstance(last, fx.StreamOnce | fx.DispatchTool | fx.TakeStashedContext):
                await self._host(self._take_chores())  # no activity of the step carries them
            if isinstance(last, fx.Finish):
                return last.result
            if isinstance(last, fx.RaiseError):
                raise tx.ApplicationError(last.message, type=last.kind.value, non_retryable=True)
            event = await self._answer(last)
            if self._history_full() and not self._runs and not self._asked:
                carried = Carry(
                    state=state,
                    event=event,
                    chain_active=self._chain,
                    facts=self._facts,
                    runs=runs + 1,
                )
                workflow.continue_as_new(attrs.evolve(given, carry=carried))

    # -- signals, updates, queries ---------------------------------------------------------

    @workflow.signal
    def stop(self) -> None:
        """A stop request, seen at the next check (no call is cut short)."""
        self._pending = StopRequest.STOP

    @workflow.signal
    def follow_up(self) -> None:
        """A follow-up message: it ends a stream that started before the tool chain."""
        self._pending = StopRequest.FOLLOW_UP

    @workflow.signal
    def kill(self) -> None:
        """A genuine stop (`/kill`): it ends the current call, every call of a batch, every wait."""
        self._pending = StopRequest.STOP
        self._killed = True

    @workflow.update
    def decide(self, decision: Decision) -> None:
        """A person's decision on a waiting call; one for other arguments asks again."""
        self._decisions[decision.index] = decision.decision

    @decide.validator
    def _check_decision(self, decision: Decision) -> None:
        if decision.index not in self._asked:
            raise tx.ApplicationError(
                f"no call of the batch waits for approval at {decision.index}"
            )

    @workflow.query
    def state(self) -> IterationState | None:
        """The loop's state after the last step (None before the first)."""
        return self._state

    @workflow.query
    def approvals(self) -> list[Waiting]:
        """The calls waiting for a person's decision now."""
        return [Waiting(index=i, request=ask.effect.request) for i, ask in self._asked.items()]

    # -- effects ---------------------------------------------------------------------------

    async def _perform(self, effects: list[fx.Effect]) -> None:
        """A step's fire-and-forget effects, in order; the host's are left in `_chores` for
        the step's awaited activity to carry (or in `chores` activities before a batch's)."""
        host: list[fx.Effect] = []
        for effect in effects:
            if isinstance(effect, fx.ClearStopRequest):
                self._pending = StopRequest.NONE
            elif isinstance(effect, fx.MarkToolChainActive):
                self._chain = True
            elif isinstance(effect, fx.Log):
                workflow.logger.log(_LEVELS[effect.level], effect.message)
            if isinstance(effect, HOST_CHORES):
                host.append(effect)
                continue
            if isinstance(effect, fx.StartTool | fx.AskApproval):
                await self._host(host)
                host = []
            if isinstance(effect, fx.StartTool):
                self._start(effect)
            elif isinstance(effect, fx.AskApproval):
                self._ask(effect)
        self._chores = tuple(host)

    def _take_chores(self) -> tuple[fx.Effect, ...]:
        chores, self._chores = self._chores, ()
        return chores

    async def _host(self, effects: Sequence[fx.Effect]) -> None:
        if effects:
            await workflow.execute_activity(
                "toolloop.chores",
                Chores(turn=lean(self._given.turn), effects=tuple(effects)),
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=ONCE,
            )

    async def _answer(self, effect: fx.Effect) -> Event:
        if isinstance(effect, fx.StreamOnce):
            return await self._stream(effect)
        if isinstance(effect, fx.DispatchTool):
            run = _Run(effect=effect, started=workflow.time())
            result = await self._tool(run, self._take_chores())
            return self._tool_settled(run, result)
        if isinstance(effect, fx.AwaitTools):
            return await self._await_tools()
        if isinstance(effect, fx.TakeStashedContext):
            taken: StashTaken = await workflow.execute_activity(
                "toolloop.take_stash",
                StashInput(turn=lean(self._given.turn), key=effect.key, chores=self._take_chores()),
                result_type=StashTaken,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=ONCE,
            )
            return taken
        raise tx.ApplicationError(f"the workflow cannot carry out {effect!r}", non_retryable=True)

    # -- stage 01 --------------------------------------------------------------------------

    async def _stream(self, once: fx.StreamOnce) -> StreamEnded:
        """One provider call; made again after a lost worker, the text shown not sent again."""
        given, state = self._given, self._state
        assert state is not None
        interruptible = not self._chain
        context = tool_call.tool_context(
            given.turn, state.iteration, state.short_term_memory_updated, state.context.items
        )
        config = given.config
        shown, chores = "", self._take_chores()
        for _ in range(WORKER_LOSSES + 1):
            handle = workflow.start_activity(
                "toolloop.stream",
                StreamInput(
                    turn=given.turn,
                    once=once,
                    config=config,
                    context=context,
                    shown=shown,
                    chores=chores,
                ),
                result_type=StreamOutput,
                start_to_close_timeout=STREAM_LIMIT,
                heartbeat_timeout=timedelta(seconds=given.worker_lost_s),
                retry_policy=ONCE,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )

            def cut_short() -> StreamStatus | None:
                if self._killed:
                    return StreamStatus.STOPPED_BY_USER
                if interruptible and self._pending is StopRequest.FOLLOW_UP:
                    return StreamStatus.FOLLOW_UP_INTERRUPT
                return None

            await _until(handle, lambda: cut_short() is not None)
            reason = None if handle.done() else cut_short()
            if reason is not None:
                handle.cancel()
            try:
                output: StreamOutput = await handle
            except tx.ActivityError as error:
                if reason is not None and isinstance(error.cause, tx.CancelledError):
                    output = StreamOutput(result=StreamResult(status=reason, accumulated_text=""))
                elif _lost(error):
                    shown = _heartbeat_text(error, shown)
                    chores = () if _beat(error) else chores
                    continue
                else:
                    raise
            return self._stream_ended(output, reason)
        lost = StreamError(
            type="worker_lost", message="the stream's worker was lost", retryable=False
        )
        result = StreamResult(status=StreamStatus.ERROR, accumulated_text=shown, data=lost)
        return StreamEnded(result=result, stop=self._pending)

    def _stream_ended(self, output: StreamOutput, reason: StreamStatus | None) -> StreamEnded:
        result = output.result
        if reason is not None:
            result = attrs.evolve(result, status=reason)
        self._facts = output.calls
        return StreamEnded(
            result=result,
            stop=self._pending,
            exclusive=output.exclusive,
            approval=output.approval,
            went_silent=output.went_silent,
        )

    # -- stage 02 --------------------------------------------------------------------------

    async def _tool(self, run: _Run, chores: tuple[fx.Effect, ...] = ()) -> ToolResult:
        """The call's result: it settled, its timer ran out, the kill ended it, or its worker
        was lost and it runs again only if idempotent."""
        effect = run.effect
        given = self._given
        timeout_ms = self._facts[effect.index].timeout_ms
        name = effect.call.name
        again = False
        for _ in range(WORKER_LOSSES + 1):
            handle = workflow.start_activity(
                "toolloop.tool",
                ToolInput(
                    turn=lean(given.turn),
                    call=effect.call,
                    context=effect.context,
                    pre_tool_text=effect.pre_tool_text,
                    text_suppressed=effect.text_suppressed,
                    result_limit=given.result_limit,
                    again=again,
                    chores=chores,
                ),
                result_type=ToolResult,
                start_to_close_timeout=timedelta(milliseconds=timeout_ms),
                heartbeat_timeout=timedelta(seconds=given.worker_lost_s),
                retry_policy=ONCE,
            )
            await _until(handle, lambda: self._killed)
            if not handle.done():
                handle.cancel()
                return failure(f"Tool {name} was killed")
            try:
                return await handle  # type: ignore[no-any-return]
            except tx.ActivityError as error:
                cause = error.cause
                if (
                    isinstance(cause, tx.TimeoutError)
                    and cause.type is tx.TimeoutType.START_TO_CLOSE
                ):
                    return timed_out(name, timeout_ms)
                if not _lost(error):
                    raise
                again, chores = True, () if _beat(error) else chores
        return failure(f"Tool {name} was lost with its worker {WORKER_LOSSES + 1} times")

    def _tool_settled(self, run: _Run, result: ToolResult) -> ToolSettled:
        index = run.effect.index
        return ToolSettled(
            result=result,
            requires_follow_up=self._facts[index].follow_up,
            duration_ms=round((workflow.time() - run.started) * 1000),
            stop=self._pending,
            index=index,
        )

    def _start(self, effect: fx.StartTool) -> None:
        """A call of a batch, in a workflow task of its own; its outcome joins `_settled`."""
        run = self._runs[effect.index] = _Run(effect=effect, started=workflow.time())

        async def settle() -> None:
            result = await self._tool(run)  # a kill ends it too, as "was killed"
            if self._runs.get(effect.index) is run:
                self._settled.append((effect.index, result))

        run.task = asyncio.create_task(settle())

    def _ask(self, effect: fx.AskApproval) -> None:
        """Wait for a decision: the host's prompt runs as the `ask` activity, a `decide`
        update answers too; the wait keeps the deadline of its first ask."""
        index = effect.index
        deadline = self._deadlines.setdefault(index, workflow.time() + effect.timeout_ms / 1000)
        ask = self._asked[index] = _Ask(effect=effect, deadline=deadline)
        self._decisions.pop(index, None)
        ask.task = asyncio.create_task(self._prompt(ask))

    async def _prompt(self, ask: _Ask) -> None:
        """The host's prompt; asked again on another worker when its worker was lost."""
        given = self._given
        for _ in range(WORKER_LOSSES + 1):
            ask.handle = workflow.start_activity(
                "toolloop.ask",
                AskInput(turn=lean(given.turn), request=ask.effect.request),
                result_type=ApprovalDecision,
                start_to_close_timeout=timedelta(milliseconds=ask.effect.timeout_ms + 60_000),
                heartbeat_timeout=timedelta(seconds=given.worker_lost_s),
                retry_policy=ONCE,
            )
            try:
                decision = await ask.handle
            except tx.ActivityError as error:
                if _lost(error):
                    continue
                if not isinstance(error.cause, tx.CancelledError):
                    self._error = error  # the host's prompt failed: the attempt's failure
                return
            index = ask.effect.index
            if decision is not None and self._asked.get(index) is ask:
                self._decisions[index] = decision
            return

    async def _await_tools(self) -> ToolSettled | ApprovalDecided:
        """The next outcome of the batch: a call settled, a decision came, a wait timed out.

        The kill ends every wait at once; each running call ends as killed by itself.
        """
        while not self._settled:
            if self._error is not None:
                raise self._error
            if self._killed:
                for index in list(self._asked):
                    self._decided(index, None)
            for index in [index for index in self._asked if index in self._decisions]:
                self._decided(index, self._decisions.pop(index))
            if self._settled:
                break
            deadline = min((ask.deadline for ask in self._asked.values()), default=None)
            timeout = None if deadline is None else max(deadline - workflow.time(), 0.001)
            try:
                await workflow.wait_condition(self._batch_moved, timeout=timeout)
            except TimeoutError:  # the earliest wait for a decision ran out
                now = workflow.time()
                for index, ask in list(self._asked.items()):
                    if ask.deadline <= now:
                        self._decided(index, None)
        index, outcome = self._settled.popleft()
        if isinstance(outcome, ToolResult):
            return self._tool_settled(self._runs.pop(index), outcome)
        return ApprovalDecided(index=index, decision=outcome, stop=self._pending)

    def _batch_moved(self) -> bool:
        return bool(
            self._settled
            or self._error is not None
            or self._killed
            or any(index in self._decisions for index in self._asked)
        )

    def _decided(self, index: int, decision: ApprovalDecision | None) -> None:
        ask = self._asked.pop(index)
        if ask.handle is not None and not ask.handle.done():
            ask.handle.cancel()  # the host retires its prompt
        if decision is None or decision.digest == ask.effect.request.digest:
            self._deadlines.pop(index, None)  # a refused decision keeps the deadline
        self._settled.append((index, decision))

    def _history_full(self) -> bool:
        info = workflow.info()
        given = self._given
        return (
            info.get_current_history_length() >= given.history_events
            or info.get_current_history_size() >= given.history_bytes
        )


async def _until(handle: workflow.ActivityHandle[Any], cut: Callable[[], bool]) -> None:
    """Until the activity is done or `cut` says it is cut short (a kill, a follow-up)."""
    await workflow.wait_condition(lambda: handle.done() or cut())


def _lost(error: tx.ActivityError) -> bool:
    """The activity's worker stopped heartbeating: it died or lost the server."""
    cause = error.cause
    return isinstance(cause, tx.TimeoutError) and cause.type is tx.TimeoutType.HEARTBEAT


def _beat(error: tx.ActivityError) -> bool:
    """The lost activity heartbeated at least once: it had carried out its chores."""
    cause = error.cause
    return isinstance(cause, tx.TimeoutError) and bool(cause.last_heartbeat_details)


def _heartbeat_text(error: tx.ActivityError, shown: str) -> str:
    """What the channel shows of a stream whose worker was lost: its last heartbeat's text."""
    cause = error.cause
    details = cause.last_heartbeat_details if isinstance(cause, tx.TimeoutError) else ()
    return str(details[0]) if details else shown


_LEVELS = {fx.Level.INFO: 20, fx.Level.WARNING: 30, fx.Level.ERROR: 40}
