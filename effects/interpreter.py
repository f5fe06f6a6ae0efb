"""The interpreter: carries out the effects of `step` against the ports, and owns all timing.

`run_tool_loop` starts the pure core with `TurnStarted`, performs each step's
effects in order (type-to-performer tables) and answers the awaited one with
the next event. It makes no decision of its own beyond the timing rules of
SPEC 5 and 6: the rolling inactivity timeout that every `sink.progress()`
pushes back, the kill handle, the bounded settle of an abandoned stream, the
fresh per-tool timeout and the kill race during a tool.

Two tasks share an attempt, so the common path costs no task and no cancel
scope per call:

* the *runner* steps the loop and awaits each provider call and tool inline;
* the *supervisor* (the caller's task) sleeps until the earliest deadline of
  the call in progress, or until a kill wakes it; during a stream before the
  tool chain is active it waits for a follow-up meanwhile (SPEC 5), so no
  task watches for one. Deadlines are armed lazily:
  a later one is not set on the supervisor's scope (moving a trio scope's
  deadline costs µs); the supervisor re-arms when it wakes to find the call's
  deadline moved. Progress is one float assignment.

When a deadline passes or a kill comes, the supervisor *takes* the call:
decides its outcome (the settle, the notice), cancels the runner and
continues the loop from the same state in a fresh runner. A call that ignores
cancellation (a shield, a blocking cleanup) therefore cannot hold the loop
up; its runner straggles until the call returns, then ends without a trace,
and `run_tool_loop` waits for it only once the attempt is over, so nothing
outlives it.

Everything registered (kill handles) is deregistered on every path, outside
cancellation included, and a sink goes inert when its call is over. Written
against anyio only: it runs on trio and is simply awaited by an asyncio bot.
"""

from __future__ import annotations

import collections
import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import attrs
from anyio import TaskHandle
from anyio.abc import TaskGroup, TaskStatus

from toolloop.effects.clock import loop_clock
from toolloop.effects.notices import NOTICE_LIMIT, NoticeCatalog
from toolloop.effects.observe import HostObserver, NoticeShown, StreamFirstChunk, host_events
from toolloop.effects.ports import (
    ApprovalPort,
    Channel,
    KillSignal,
    Notice,
    Provider,
    StreamingContext,
    StreamRequest,
    StreamSpan,
    ToolInvocation,
    ToolRegistryPort,
    TurnControl,
)
from toolloop.effects.stash import ContextStash
from toolloop.engine import commands as fx
from toolloop.engine import tool_call
from toolloop.engine.construct import constructor
from toolloop.engine.events import (
    ApprovalDecided,
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.resume import resume as resumed
from toolloop.engine.step import Step, initial_state, step
from toolloop.states import (
    ApprovalDecision,
    GenerationTurnResult,
    IterationState,
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolContext,
    ToolResult,
    TurnSettings,
)
from toolloop.states.errors import ToolloopError

T = TypeVar("T")
log = logging.getLogger("toolloop")
Observer = Callable[[IterationState, Event, Step], None]
"""Called after every step with the state before it, the event and the step (its effects)."""
Outcome = GenerationTurnResult | Exception
Recorder = Callable[[Event], Awaitable[None]]
"""Awaited with every event before `step` sees it: a journal's write-ahead of the turn."""


@attrs.frozen(kw_only=True)
class StartFrom:
    """Where a resumed attempt starts instead of `TurnStarted` (`toolloop.effects.durable`).

    The loop performs `prelude` (the calls of a batch still running when the
    process died, the chain's flag), then steps `event` from `state` as usual.
    """

    state: IterationState
    event: Event
    prelude: tuple[fx.Effect, ...] = ()


class ImpersonationAborted(ToolloopError, RuntimeError):
    """A turn under user impersonation failed too many tool calls in a row (SPEC 9).

    The loop raises it instead of returning a result: no notice may speak for
    the impersonated user.
    """


class NoApprovalsPort(ToolloopError, TypeError):
    """A call needs a person's approval (SPEC 6c), but the loop was given no approvals port."""


class CoreMismatch(ToolloopError, TypeError):
    """The engine asked for a step this interpreter cannot carry out: an effect it does
    not know, or a step that ends waiting for nothing (engine and interpreter disagree)."""


# What every provider call and tool builds, without attrs' call (`engine.construct`).
_new_stream_request = constructor(StreamRequest)
_new_stream_ended = constructor(StreamEnded)
_new_stream_span = constructor(StreamSpan)
_new_tool_invocation = constructor(ToolInvocation)
_new_streaming_context = constructor(StreamingContext)
_new_tool_settled = constructor(ToolSettled)

#: The error each `RaiseError` kind of the core is raised as.
RAISES: dict[fx.ErrorKind, type[ToolloopError]] = {
    fx.ErrorKind.IMPERSONATION_ABORTED: ImpersonationAborted
}


async def run_tool_loop(
    *,
    turn: TurnSettings,
    config: LoopConfig,
    provider: Provider,
    registry: ToolRegistryPort,
    channel: Channel,
    control: TurnControl,
    catalog: NoticeCatalog | None = None,
    stash: ContextStash | None = None,
    reply_to: str | None = None,
    verbatim: bool = False,
    observer: Observer | None = None,
    on_event: HostObserver | None = None,
    attempt: int = 0,
    approvals: ApprovalPort | None = None,
    resume: IterationState | None = None,
    recorder: Recorder | None = None,
    start_from: StartFrom | None = None,
) -> GenerationTurnResult:
    """Run one generation attempt to its result (or the error it raises, `ImpersonationAborted`).

    `catalog` defaults to the shipped notices. `stash` is the one a bot's
    enrichment tools put items into; without one, every take finds nothing (no
    tool can have put an item). `on_event` gets the
    typed host events (`toolloop.effects.observe`); `attempt` is this attempt's
    index in the fallback chain, which names its streams. `approvals` is where a
    person decides on the calls whose tool needs approval (SPEC 6c); a turn that
    meets such a call without one fails naming the tool. `resume`: a state persisted
    while the turn waited for approval (`toolloop.states.convert` writes it as JSON),
    from which this attempt goes on, asking again about its waiting calls
    (`toolloop.engine.resume`); `turn` and `config` must be the persisted state's.
    `recorder` and `start_from` are the durable journal's hooks
    (`toolloop.effects.durable`).
    """
    async with anyio.create_task_group() as runners:
        interpreter = _Interpreter(
            turn=turn,
            config=config,
            provider=provider,
            registry=registry,
            channel=channel,
            control=control,
            catalog=catalog or NoticeCatalog.default(),
            stash=stash,
            reply_to=reply_to,
            verbatim=verbatim,
            observer=observer,
            on_event=on_event,
            attempt=attempt,
            recorder=recorder,
            start_from=start_from,
            runners=runners,
            approvals=approvals,
            resume=resume,
        )
        outcome = await interpreter.supervise()
    if isinstance(outcome, Exception):  # raised here, outside the group, unwrapped
        raise outcome
    return outcome


class _Alarm:
    """When the supervisor wakes: at the earliest armed deadline, or at once on `wake`.

    `now` reads the clock its deadlines are on (made inside the running loop).
    """

    __slots__ = ("_scope", "armed", "now")

    def __init__(self) -> None:
        self.armed = math.inf
        self._scope: anyio.CancelScope | None = None
        self.now = loop_clock()

    def arm(self, deadline: float) -> None:
        """Wake by `deadline`; a later deadline than the armed one is left to the re-arm."""
        if deadline < self.armed:
            self.armed = deadline
            if self._scope is not None:
                self._scope.deadline = deadline

    def wake(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def start(self, until: float) -> anyio.CancelScope:
        """The scope of one wait: it ends at `until` or at `wake`. Call `stop` after it.

        The waiter enters it in its own frame: a coroutine around each wait would
        be one more frame held by every waiting turn.
        """
        self._scope = anyio.move_on_at(until)
        return self._scope

    def stop(self) -> bool:
        """After the wait's scope: True if what it awaited finished (no deadline, no wake)."""
        scope, self._scope = self._scope, None
        assert scope is not None, "stop follows start"
        return not scope.cancelled_caught


class _Call:
    """One provider call or tool, awaited inline by its runner; its kill handle too.

    `taken` once the supervisor (a deadline) or the kill decided its outcome:
    the runner then no longer owns it and ends when the call returns.
    """

    __slots__ = ("_alarm", "_runner", "deadline", "effect", "killed", "open", "settled", "taken")

    def __init__(
        self, effect: Any, runner: TaskHandle[None], alarm: _Alarm, deadline: float
    ) -> None:
        self.effect, self._runner, self._alarm = effect, runner, alarm
        self.deadline = deadline
        self.killed = self.taken = False
        self.open = True
        self.settled: anyio.Event | None = None
        """Set when a taken call returns, for the supervisor waiting for it to settle."""

    def __call__(self) -> None:
        """The kill handle: end the call and wake the supervisor to decide, both at once."""
        if self.open:  # else a stale handle: the runner has moved on to another call
            self.killed = True
            self.end_now()

    def end_now(self) -> None:
        """Take the call from its runner at once (it is cancelled) and wake the supervisor."""
        self.taken = True
        self.abandon()
        self._alarm.wake()

    def returned(self) -> bool:
        """The runner got the call back: True if its outcome is still the runner's."""
        if self.taken:
            if self.settled is not None:
                self.settled.set()
            return False
        return True

    def abandon(self) -> None:
        """Cancel the call (with its runner); a call that ignores it straggles on."""
        self._runner.cancel()
        self.close()

    def close(self) -> None:
        """The call is over for the loop: its kill handle is inert, a stream's sink drops text."""
        self.open = False


class _ToolRun(_Call):
    __slots__ = ("started", "timeout_ms")

    def __init__(
        self, effect: fx.DispatchTool, runner: TaskHandle[None], alarm: _Alarm, timeout_ms: int
    ) -> None:
        self.started = alarm.now()
        self.timeout_ms = timeout_ms
        super().__init__(effect, runner, alarm, self.started + timeout_ms / 1000)


class _Started:
    """A call of a batch started beside others (`StartTool`): its own task, timer and kill.

    `open` until its outcome is decided: it settled, its timer ran out or a kill
    ended it; a result that comes after that is dropped.
    """

    __slots__ = ("deadline", "effect", "open", "scope", "started", "timeout_ms")

    def __init__(self, effect: fx.StartTool, started: float, timeout_ms: int) -> None:
        self.effect, self.started, self.timeout_ms = effect, started, timeout_ms
        self.deadline = started + timeout_ms / 1000
        self.scope = anyio.CancelScope()
        self.open = True

    def end(self) -> None:
        """Its outcome is decided: cancel what still runs of it (a straggler runs on)."""
        self.open = False
        self.scope.cancel()


class _Asked:
    """A call of the batch waiting for approval (`AskApproval`): its own task and deadline.

    `open` until the wait's outcome is decided: a decision, the deadline or a kill.
    """

    __slots__ = ("deadline", "effect", "open", "scope")

    def __init__(self, effect: fx.AskApproval, deadline: float) -> None:
        self.effect, self.deadline = effect, deadline
        self.scope = anyio.CancelScope()
        self.open = True

    def end(self) -> None:
        """Its outcome is decided: cancel the host's `ask` if it still runs."""
        self.open = False
        self.scope.cancel()


class _Sink(_Call):
    """A stream's call, and what its provider reports to: progress pushes the deadline back.

    Inert once its call is over (`close`): a straggling provider can no longer
    write to the channel. Besides a kill or a deadline, a follow-up (`interrupt`)
    and a failed send to the channel end it at once.
    """

    __slots__ = (
        "_channel",
        "_timeout",
        "failure",
        "first_chunk",
        "follow_ups",
        "interrupted",
        "parts",
        "span",
    )

    def __init__(
        self,
        effect: fx.StreamOnce,
        runner: TaskHandle[None],
        alarm: _Alarm,
        channel: Channel,
        span: StreamSpan,
        timeout: float,
        follow_ups: TurnControl | None,
        first_chunk: Callable[[], None] | None,
    ) -> None:
        super().__init__(effect, runner, alarm, alarm.now() + timeout)
        self.first_chunk = first_chunk
        """Called at the first `progress`, then dropped: the host's first-chunk event."""
        self._channel, self._timeout = channel, timeout
        self.follow_ups = follow_ups
        """The turn control while the chain is not active: a follow-up ends this stream."""
        self.parts: list[str] = []
        self.span = span
        self.interrupted = False
        """A follow-up ended the stream (SPEC 5)."""
        self.failure: Exception | None = None
        """What the channel raised when it could not deliver text (SPEC 5)."""

    def progress(self) -> None:
        self.deadline = self._alarm.now() + self._timeout
        if self.first_chunk is not None:
            first, self.first_chunk = self.first_chunk, None
            first()

    async def deliver(self, text: str) -> None:
        self.check_follow_up()
        if not self.open:
            return
        self.parts.append(text)
        if not self.span.suppressed:
            try:
                await self._channel.send_text(text, reply_to=self.span.reply_to)
            except Exception as error:  # the platform refused or failed the send
                self.parts.pop()  # never delivered
                if self.open:
                    self.failure = error
                    self.end_now()

    def interrupt(self) -> None:
        """End the stream for a follow-up message, as the kill would."""
        if self.open:
            self.interrupted = True
            self.end_now()

    def check_follow_up(self) -> None:
        """Interrupt for a pending follow-up (SPEC 5) without waiting for the supervisor.

        The supervisor runs only once the runner yields, and a provider with its
        body already read delivers the rest and returns without yielding: the runner
        checks at the start, at each delivery and at the end.
        """
        follow_ups = self.follow_ups
        if follow_ups is not None and follow_ups.pending_request() is StopRequest.FOLLOW_UP:
            self.interrupt()

    async def watch(self, stream: Awaitable[StreamResult]) -> StreamResult:
        """`stream`'s result, unless a follow-up came meanwhile."""
        result = await stream
        self.check_follow_up()
        return result

    @property
    def interruptible(self) -> bool:
        """A follow-up ends this stream: it started before the tool chain was active."""
        return self.follow_ups is not None

    @property
    def text(self) -> str:
        return "".join(self.parts)


C = TypeVar("C", _Sink, _ToolRun)
E = TypeVar("E", StreamEnded, ToolSettled)


class _Superseded(Exception):
    """The runner's call was taken: the loop goes on in another runner, this one ends."""


@attrs.define(kw_only=True)
class _Interpreter:
    """One attempt's ports and settings; `supervise` and `_drive` run it, the rest perform."""

    turn: TurnSettings
    config: LoopConfig
    provider: Provider
    registry: ToolRegistryPort
    channel: Channel
    control: TurnControl
    catalog: NoticeCatalog
    stash: ContextStash | None
    """None when the bot passed none: no tool can have put an item, every take finds none."""
    reply_to: str | None
    verbatim: bool
    observer: Observer | None
    on_event: HostObserver | None
    attempt: int
    recorder: Recorder | None
    start_from: StartFrom | None
    runners: TaskGroup
    approvals: ApprovalPort | None = None
    """Where a person decides on the calls that need approval (SPEC 6c)."""
    resume: IterationState | None = None
    """A persisted state waiting for approval, to go on from instead of the start."""
    _alarm: _Alarm = attrs.field(init=False, factory=_Alarm)
    _outcome: Outcome | None = attrs.field(init=False, default=None)
    _current: _Sink | _ToolRun | None = attrs.field(init=False, default=None)
    """The call in progress, until its runner or the supervisor releases it."""
    _chain_active: bool = attrs.field(init=False, default=False)
    """A `function_call` stream arrived this attempt: follow-ups no longer interrupt."""
    _killed: KillSignal = attrs.field(init=False)
    """The turn's kill signal, read once: the attempt belongs to one turn."""
    _stream_timeout: float = attrs.field(init=False)
    _started: dict[int, _Started] = attrs.field(init=False, factory=dict)
    """The calls of a batch running side by side, by their position in it (SPEC 6b)."""
    _asked: dict[int, _Asked] = attrs.field(init=False, factory=dict)
    """The calls of a batch waiting for approval, by their position in it (SPEC 6c)."""
    _approval_deadlines: dict[int, float] = attrs.field(init=False, factory=dict)
    """Each wait's deadline from its first ask: a call asked again keeps it."""
    _settled: collections.deque[
        tuple[_Started, ToolResult] | tuple[_Asked, ApprovalDecision | None]
    ] = attrs.field(init=False, factory=collections.deque)
    """Started calls and waits whose outcome is decided, in that order, not yet reported."""
    _batch_woken: anyio.Event | None = attrs.field(init=False, default=None)
    """Set when a started call settles or is killed, for the runner waiting on the batch."""
    _batch_kill: Callable[[], None] | None = attrs.field(init=False, default=None)
    """The batch's kill handle while it is registered: while any started call is not
    reported. One bound method, so the turn control sees the same handle both times."""
    _batch_error: Exception | None = attrs.field(init=False, default=None)
    """What a started call's registry raised: the attempt's failure, as for one call."""
    _state: IterationState = attrs.field(init=False)
    """The state the awaited effect of the last step answers to (set by `supervise`)."""
    _runner: TaskHandle[None] = attrs.field(init=False)
    """The task now stepping the loop (set by `_spawn`)."""

    # -- the supervisor --------------------------------------------------------------------

    async def supervise(self) -> Outcome:
        """Start the runner and watch its calls until the attempt has its outcome."""
        self._killed = self.control.killed
        self._stream_timeout = self.config.stream_sdk_call_timeout_ms / 1000
        start = self.start_from
        if self.resume is not None:
            self._state = self.resume
            self._runner = self.runners.start_soon(
                self._drive, self.resume, TurnStarted(), (), resumed(self.resume)
            )
        elif start is not None:
            self._state = start.state
            self._spawn(start.state, start.event, start.prelude)
        else:
            self._state = initial_state(self.config, self.turn)
            self._spawn(self._state, TurnStarted())
        alarm = self._alarm
        while self._outcome is None:
            watched = self._current
            # A stream before the chain is active ends at a follow-up (SPEC 5): the
            # supervisor waits for one instead of the runner. The runner wakes the alarm
            # when it starts and releases such a stream.
            sink = watched if isinstance(watched, _Sink) and watched.interruptible else None
            waited = self._runner.wait() if sink is None else self.control.wait_for_follow_up()
            with alarm.start(alarm.armed):
                await waited
            if alarm.stop() and sink is not None:
                sink.interrupt()
            call = self._current
            if call is None:
                alarm.armed = math.inf
            elif call.taken or call.deadline <= alarm.now():
                await self._take(call)
            else:
                alarm.armed = call.deadline  # progress moved it: sleep on
        return self._outcome

    async def _take(self, call: _Sink | _ToolRun) -> None:
        """Decide the outcome of a killed or overdue call, then continue in a fresh runner."""
        call.taken = True
        try:
            if isinstance(call, _Sink):
                event: Event = self._stream_ended(call, await self._abandoned(call))
            else:
                event = self._tool_settled(call, self._overdue_tool(call))
        finally:
            self._release(call)
            call.abandon()
            self._alarm.armed = math.inf
        self._spawn(self._state, event)

    async def _abandoned(self, sink: _Sink) -> StreamResult:
        """A stream taken from its runner: whatever ended it first decides its result.

        A failed send is `error` and a follow-up `follow_up_interrupt`, both with the
        text delivered so far. A killed stream, or a silent one: a stop wins at
        once, else settle, notice, `timeout`; a kill during the settle also ends
        it as `stopped_by_user`, without the notice.
        """
        if sink.failure is not None:
            return _channel_failed(sink, sink.failure)
        if sink.interrupted:
            return StreamResult(status=StreamStatus.FOLLOW_UP_INTERRUPT, accumulated_text=sink.text)
        if sink.killed or self.control.pending_request() is StopRequest.STOP:
            return _stopped(sink)
        sink.settled = anyio.Event()
        settle = self.config.stream_abandoned_settle_timeout_ms / 1000
        with self._alarm.start(self._alarm.now() + settle):
            await sink.settled.wait()
        self._alarm.stop()
        if sink.killed:
            return _stopped(sink)
        seconds = _seconds(self.config.stream_sdk_call_timeout_ms)
        if not self.turn.suppress_user_errors:
            await self._notice(_inactivity_notice(sink.effect.iteration, {"seconds": seconds}))
        error = StreamError(type="timeout", message=f"no data from the provider for {seconds} s")
        return StreamResult(status=StreamStatus.TIMEOUT, accumulated_text=sink.text, data=error)

    def _overdue_tool(self, call: _ToolRun) -> ToolResult:
        """The failure of the kill or the timeout that ended a tool."""
        name = call.effect.call.name
        if call.killed:
            return _failure(f"Tool {name} was killed")
        return _timed_out(name, call.timeout_ms)

    # -- the runner ------------------------------------------------------------------------

    def _spawn(
        self, state: IterationState, event: Event, prelude: tuple[fx.Effect, ...] = ()
    ) -> None:
        self._runner = self.runners.start_soon(self._drive, state, event, prelude)

    async def _drive(
        self,
        state: IterationState,
        event: Event,
        prelude: tuple[fx.Effect, ...] = (),
        first: Step | None = None,
    ) -> None:
        """Step the loop from `state` and `event` to its outcome, unless a call is taken.

        A taken call cancels its runner (`TaskHandle.cancel`, whose scope ends the
        task quietly) or, when it returns anyway, raises `_Superseded`. One frame
        for the whole chain: a frame per layer would be held by every waiting turn.
        """
        observer, recorder = self.observer, self.recorder
        try:
            for pending in map(self._perform, prelude):
                if pending is not None:
                    await pending
            while True:
                if recorder is not None and first is None:
                    await recorder(event)
                out = step(state, event) if first is None else first
                if observer is not None and first is None:  # a resumed wait is no step
                    observer(state, event, out)
                if self.on_event is not None and first is None:
                    for shown in host_events(self.attempt, state, event, out, self.registry.redact):
                        self.on_event(shown)
                first = None
                state = self._state = out.state
                *fire_and_forget, last = out.effects
                for pending in map(self._perform, fire_and_forget):
                    if pending is not None:
                        await pending
                # While it waits, a turn holds its state and the effect it awaits, not the
                # step, its other effects or the event that led here (a held turn's memory).
                del out, event, fire_and_forget
                if isinstance(last, fx.Finish):
                    self._end_batch()
                    self._outcome = last.result
                    return
                if isinstance(last, fx.RaiseError):
                    self._end_batch()
                    self._outcome = RAISES[last.kind](last.message)
                    return
                answer = self._perform(last)
                event = _answer(last, None if answer is None else await answer)
        except _Superseded:
            return
        except Exception as error:  # the attempt's failure, raised by `run_tool_loop`
            self._end_batch()
            self._outcome = error

    def _perform(self, effect: fx.Effect) -> Awaitable[Event | None] | None:
        """Carry out `effect`: done when None, else the awaitable that finishes it."""
        performer = _PERFORMERS.get(type(effect))
        if performer is None:
            raise CoreMismatch(
                f"received unrecognized effect {type(effect).__name__} ({effect!r}): "
                "is the engine newer than this interpreter, or was a final effect "
                "(Finish, RaiseError) placed before the end of a step?"
            )
        return performer(self, effect)

    async def _call(self, call: C, work: Awaitable[T], settle: Callable[[C, T], E]) -> E:
        """Await `work` with `call` registered as the kill handle and watched by the supervisor.

        Its value, settled into the next event. The one coroutine of a provider call or
        a tool: its performer prepares it in the runner's frame, so a waiting turn holds
        no frame of its own. Raises `_Superseded` (or the cancellation) once the call
        was taken.
        """
        self.control.register_kill(call)
        self._current = call
        self._alarm.arm(call.deadline)
        if isinstance(call, _Sink) and call.interruptible:
            self._alarm.wake()  # the supervisor now waits for a follow-up too
        if self._killed.is_set():  # killed between calls: this one ends at once too
            call()
        try:
            value = await work
        except Exception:
            if call.returned():
                self._release(call)
                raise
            raise _Superseded from None
        except BaseException:  # cancelled: from outside, or because the call was taken
            if call.returned():
                self._release(call)
            raise
        if not call.returned():
            raise _Superseded
        self._release(call)
        return settle(call, value)

    def _release(self, call: _Call) -> None:
        self.control.deregister_kill(call)
        self._current = None
        call.close()
        if isinstance(call, _Sink):  # released once per call, on every path
            self.channel.stream_ended(call.span)
            if call.interruptible:
                self._alarm.wake()  # the supervisor stops waiting for a follow-up

    # -- stage 01 --------------------------------------------------------------------------

    def _stream_once(self, effect: fx.StreamOnce) -> Awaitable[StreamEnded]:
        span = _new_stream_span(
            attempt=self.attempt,
            iteration=effect.iteration,
            reply_to=self.reply_to,
            suppressed=effect.suppress_text_output,
        )
        follow_ups = None if self._chain_active else self.control
        first_chunk = None
        if self.on_event is not None:
            shown = StreamFirstChunk(attempt=self.attempt, iteration=effect.iteration)
            first_chunk = functools.partial(self.on_event, shown)
        sink = _Sink(
            effect,
            self._runner,
            self._alarm,
            self.channel,
            span,
            self._stream_timeout,
            follow_ups,
            first_chunk,
        )
        sink.check_follow_up()  # a follow-up pending when the stream starts ends it at once
        request = _new_stream_request(
            turn=self.turn,
            once=effect,
            tools=self.registry.specs(self.provider.descriptor),
            reply_to=self.reply_to,
            verbatim=self.verbatim,
        )
        self.channel.stream_started(span)
        stream = self.provider.stream(request, sink)
        if sink.interruptible:
            stream = sink.watch(stream)
        return self._call(sink, stream, self._stream_ended)

    def _stream_ended(self, sink: _Sink, result: StreamResult) -> StreamEnded:
        if result.status in _FAILED:
            _log_failed_stream(self.provider.descriptor, sink.span, result)
        stop = self.control.pending_request()
        approval = self._approval(result)
        if len(result.calls) < 2:
            return _new_stream_ended(result=result, stop=stop, approval=approval)
        exclusive = tuple(self.registry.exclusive(call.name.strip()) for call in result.calls)
        return _new_stream_ended(result=result, stop=stop, exclusive=exclusive, approval=approval)

    def _approval(self, result: StreamResult) -> tuple[bool, ...]:
        """The registry's answer for each call: it needs approval (SPEC 6c); () when none does.

        A registry written before approval existed (no `needs_approval`) never asks.
        """
        calls = result.batch
        needs_approval = getattr(self.registry, "needs_approval", None)
        if not calls or needs_approval is None:
            return ()
        state = self._state
        context = tool_call.tool_context(
            self.turn, state.iteration, state.short_term_memory_updated, state.context.items
        )
        needs = tuple(
            bool(needs_approval(tool_call.renamed(call, call.name.strip()), context))
            for call in calls
        )
        return needs if any(needs) else ()

    # -- stage 02 --------------------------------------------------------------------------

    def _dispatch(self, effect: fx.DispatchTool) -> Awaitable[ToolSettled]:
        context = effect.context
        timeout_ms = self._timeout_ms(effect.call.name)
        call = _ToolRun(effect, self._runner, self._alarm, timeout_ms)
        invocation = _new_tool_invocation(
            killed=self._killed,
            notify=self._progress_notice(context, call),
            streaming=self._streaming_context(),
        )
        work = self.registry.execute(effect.call, context, invocation)
        return self._call(call, work, self._tool_settled)

    def _timeout_ms(self, tool: str) -> int:
        """The tool's own timeout (`timeout=` at registration), else the configured one."""
        own = self.registry.timeout_ms(tool)
        return self.config.tool_execution_timeout_ms if own is None else own

    # -- stage 02, a batch's calls side by side (SPEC 6b) ----------------------------------

    async def _start_tool(self, effect: fx.StartTool) -> None:
        """Start a call of the batch in its own task, under its own timer, and go on.

        Started with `TaskGroup.start`: the task reports itself started right before
        it enters the registry, and runs on without a checkpoint, so the calls of a
        batch enter their tools in the model's order on every backend.
        """
        run = _Started(effect, self._alarm.now(), self._timeout_ms(effect.call.name))
        self._register_batch_kill()
        self._started[effect.index] = run
        await self.runners.start(self._run_started, run)
        if self._killed.is_set():  # killed between calls: this one ends at once too
            self._kill_batch()

    def _register_batch_kill(self) -> None:
        if self._batch_kill is None:
            self._batch_kill = self._kill_batch
            self.control.register_kill(self._batch_kill)

    async def _run_started(
        self, run: _Started, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        effect = run.effect
        invocation = _new_tool_invocation(
            killed=self._killed,
            notify=self._progress_notice(effect.context, run),
            streaming=self._streaming_context(),
        )
        with run.scope:
            try:
                work = self.registry.execute(effect.call, effect.context, invocation)
                task_status.started()
                result = await work
            except Exception as error:  # not a tool's failure (those are results): the attempt's
                self._batch_error = error
                result = _failure(f"{type(error).__name__}: {error}")
            self._decide(run, result)

    def _decide(self, run: _Started, result: ToolResult) -> None:
        """A started call's outcome: reported to the runner in the order outcomes came."""
        if not run.open:
            return
        run.end()
        del self._started[run.effect.index]
        self._settled.append((run, result))
        if self._batch_woken is not None:
            self._batch_woken.set()

    def _kill_batch(self) -> None:
        """The kill ends every wait for approval and every started call at once (6b.4, 6c)."""
        for asked in list(self._asked.values()):
            self._decided(asked, None)
        for run in list(self._started.values()):
            self._decide(run, _failure(f"Tool {run.effect.call.name} was killed"))

    # -- stage 02, approval (SPEC 6c) ------------------------------------------------------

    async def _ask_approval(self, effect: fx.AskApproval) -> None:
        """Ask the host in a task of its own and go on; the wait keeps its first deadline."""
        if self.approvals is None:
            raise NoApprovalsPort(
                f"tool {effect.request.tool} needs approval (SPEC 6c), but run_tool_loop was "
                "given no approvals port: pass approvals= (for example MemoryApprovals)"
            )
        index = effect.index
        deadline = self._approval_deadlines.setdefault(
            index, self._alarm.now() + effect.timeout_ms / 1000
        )
        asked = _Asked(effect, deadline)
        self._register_batch_kill()
        self._asked[index] = asked
        await self.runners.start(self._run_asked, self.approvals, asked)
        if self._killed.is_set():
            self._kill_batch()

    async def _run_asked(
        self,
        approvals: ApprovalPort,
        asked: _Asked,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The host's `ask`, entered without a checkpoint after `started` (as a started
        call's tool is), so the requests of a batch reach the host in the model's order."""
        request = asked.effect.request
        shown = attrs.evolve(request, args=self.registry.redact(request.tool, request.args))
        with asked.scope:
            try:
                asking = approvals.ask(shown)
                task_status.started()
                decision = await asking
            except Exception as error:  # the host's prompt failed: the attempt's failure
                self._batch_error = error
                decision = None
            self._decided(asked, decision)

    def _decided(self, asked: _Asked, decision: ApprovalDecision | None) -> None:
        """A wait's outcome: reported to the runner in the order outcomes came."""
        if not asked.open:
            return
        asked.end()
        del self._asked[asked.effect.index]
        self._settled.append((asked, decision))
        if self._batch_woken is not None:
            self._batch_woken.set()

    async def _withdraw(self, effect: fx.WithdrawApproval) -> None:
        """Tell the host the request is moot; a host that fails to hear it is only logged."""
        if self.approvals is None:
            return
        request = effect.request
        shown = attrs.evolve(request, args=self.registry.redact(request.tool, request.args))
        try:
            await self.approvals.withdraw(shown)
        except Exception:
            log.exception("withdrawing the approval request of %s failed", request.tool)

    async def _await_tools(self, effect: fx.AwaitTools) -> ToolSettled | ApprovalDecided:
        """The next outcome: a started call settled, a wait for approval ended, or a timer
        (a call's own, or a wait's `TOOL_APPROVAL_TIMEOUT_MS`) ran out first."""
        while not self._settled:
            if self._batch_error is not None:
                raise self._batch_error
            assert self._started or self._asked, "AwaitTools with nothing running or waiting"
            waits: list[_Started | _Asked] = [*self._started.values(), *self._asked.values()]
            self._batch_woken = anyio.Event()
            with anyio.move_on_at(min(wait.deadline for wait in waits)):
                await self._batch_woken.wait()
            now = self._alarm.now()
            for wait in sorted(waits, key=lambda wait: wait.deadline):
                if wait.deadline > now:
                    continue
                if isinstance(wait, _Asked):
                    self._decided(wait, None)
                else:
                    self._decide(wait, _timed_out(wait.effect.call.name, wait.timeout_ms))
        if self._batch_error is not None:
            raise self._batch_error
        run, outcome = self._settled.popleft()
        if not self._started and not self._asked and not self._settled:
            self._end_batch()
        if isinstance(outcome, ToolResult):
            assert isinstance(run, _Started)
            return self._settled_event(run.effect.call.name, run.effect.index, run.started, outcome)
        assert isinstance(run, _Asked)
        index = run.effect.index
        if outcome is None or outcome.digest == run.effect.request.digest:
            self._approval_deadlines.pop(index, None)  # a refused decision keeps the deadline
        stop = self.control.pending_request()
        return ApprovalDecided(index=index, decision=outcome, stop=stop)

    def _end_batch(self) -> None:
        """The attempt is over: no started call runs on, its kill handle is gone."""
        if self._batch_kill is not None:
            self.control.deregister_kill(self._batch_kill)
            self._batch_kill = None
        ending: list[_Started | _Asked] = [*self._started.values(), *self._asked.values()]
        for run in ending:
            run.end()
        self._started.clear()
        self._asked.clear()
        self._settled.clear()

    def _streaming_context(self) -> StreamingContext:
        """The live stream the calls being dispatched came from (SPEC 6 step 3)."""
        state = self._state
        assert state.pending is not None, "a dispatch always holds its call"
        return _new_streaming_context(
            reply_to=self.reply_to,
            identity=self._identity(),
            pre_tool_text=state.pending.stream.accumulated_text,
            text_suppressed=state.suppress_text_output,
        )

    def _tool_settled(self, call: _ToolRun, result: ToolResult) -> ToolSettled:
        effect = call.effect
        return self._settled_event(effect.call.name, effect.index, call.started, result)

    def _settled_event(
        self, name: str, index: int, started: float, result: ToolResult
    ) -> ToolSettled:
        descriptor = self.provider.descriptor
        return _new_tool_settled(
            result=result,
            requires_follow_up=self.registry.requires_follow_up(
                name, descriptor, descriptor.server
            ),
            duration_ms=round((self._alarm.now() - started) * 1000),
            stop=self.control.pending_request(),
            index=index,
        )

    def _progress_notice(
        self, context: ToolContext, call: _ToolRun | _Started
    ) -> Callable[[str], Awaitable[None]]:
        """A tool's progress notices, dropped once its call is over (killed, overdue)."""

        async def notify(text: str) -> None:
            if context.suppress_progress_notices or not call.open:
                return
            notice = Notice(
                key="tool_progress",
                level=fx.Level.INFO.value,
                text=text,
                hidden=False,
                iteration=context.iteration,
                identity=self._identity(),
            )
            await self._send(self.channel.send_notice, notice)

        return notify

    async def _take_stash(self, effect: fx.TakeStashedContext) -> StashTaken:
        return StashTaken(item=None if self.stash is None else self.stash.take(effect.key))

    # -- notices ---------------------------------------------------------------------------

    async def _notice(self, effect: fx.SendNotice) -> None:
        details = dict(effect.details)
        failed = effect.key is fx.NoticeKey.TOOL_CALL_FAILED
        if failed:
            tool = str(details.get("tool_name"))
            details["args"] = self.registry.redact(tool, details.get("args"))
        details.setdefault("iteration", effect.iteration)
        text = self.catalog.render(effect.key.value, self.turn.locale, details)
        notice = Notice(
            key=effect.key.value,
            level=effect.level.value,
            text=text[:NOTICE_LIMIT] if failed else text,
            hidden=effect.hidden,
            iteration=effect.iteration,
            identity=self._identity(),
        )
        send = self.channel.send_hidden_notice if effect.hidden else self.channel.send_notice
        await self._send(send, notice)

    async def _send(self, send: Callable[[Notice], Awaitable[None]], notice: Notice) -> None:
        """A notice that fails to send is logged and never ends the turn."""
        try:
            await send(notice)
        except Exception:
            log.exception("could not send the %s notice", notice.key)
        else:
            if self.on_event is not None:
                self.on_event(NoticeShown(attempt=self.attempt, notice=notice))

    def _identity(self) -> str | None:
        """The persona's webhook identity; None (the bot's own) under user impersonation."""
        return None if self.turn.user_impersonation else self.turn.persona.name

    # -- fire-and-forget effects on the turn control, done without awaiting ----------------

    def _log(self, effect: fx.Log) -> None:
        level = _LEVELS[effect.level]
        if log.isEnabledFor(level):  # skips building the record's `extra` when off
            log.log(level, effect.message, extra={"fields": effect.fields})

    def _reset_follow_up(self, effect: fx.ResetFollowUpCount) -> None:
        self.control.reset_follow_up_count()

    def _increment_follow_up(self, effect: fx.IncrementFollowUpCount) -> None:
        self.control.increment_follow_up_count()

    def _queue_stop_response(self, effect: fx.QueueStopResponse) -> None:
        self.control.queue_stop_response()

    def _clear_stop(self, effect: fx.ClearStopRequest) -> None:
        self.control.clear_stop_request()

    def _mark_chain(self, effect: fx.MarkToolChainActive) -> None:
        """From now on a follow-up never interrupts a stream: it waits for the turn."""
        self._chain_active = True
        self.control.set_tool_chain_active()

    def _count_usage(self, effect: fx.CountToolUsage) -> None:
        self.control.count_tool_usage(effect.name)

    def _retain(self, effect: fx.RetainAffordance) -> None:
        self.control.retain_affordance(effect.name)

    def _suppress_text(self, effect: fx.SetTextSuppression) -> None:
        """Nothing to do: the next StreamOnce carries the flag and its sink obeys it."""


Performer = Callable[[_Interpreter, Any], Awaitable[Event | None] | None]
_PERFORMERS: dict[type[Any], Performer] = {
    fx.StreamOnce: _Interpreter._stream_once,
    fx.DispatchTool: _Interpreter._dispatch,
    fx.StartTool: _Interpreter._start_tool,
    fx.AwaitTools: _Interpreter._await_tools,
    fx.AskApproval: _Interpreter._ask_approval,
    fx.WithdrawApproval: _Interpreter._withdraw,
    fx.TakeStashedContext: _Interpreter._take_stash,
    fx.SendNotice: _Interpreter._notice,
    fx.Log: _Interpreter._log,
    fx.ResetFollowUpCount: _Interpreter._reset_follow_up,
    fx.IncrementFollowUpCount: _Interpreter._increment_follow_up,
    fx.QueueStopResponse: _Interpreter._queue_stop_response,
    fx.ClearStopRequest: _Interpreter._clear_stop,
    fx.MarkToolChainActive: _Interpreter._mark_chain,
    fx.CountToolUsage: _Interpreter._count_usage,
    fx.RetainAffordance: _Interpreter._retain,
    fx.SetTextSuppression: _Interpreter._suppress_text,
}
"""Every effect but the final ones: the synchronous performers return None and are not
awaited (a coroutine per effect is measurable); the awaited ones (`fx.AWAITED`) return
an awaitable of the next event."""


def _answer(effect: fx.Effect, event: Event | None) -> Event:
    """The awaited effect's answer; a step ending in a fire-and-forget effect is a broken core."""
    if event is None:
        raise CoreMismatch(
            f"a step ended with {type(effect).__name__}, which answers nothing: a step "
            "must end with an awaited or a final effect (toolloop.engine.commands.AWAITED, FINAL)"
        )
    return event


def _inactivity_notice(iteration: int, details: dict[str, Any]) -> fx.SendNotice:
    return fx.SendNotice(
        key=fx.NoticeKey.STREAM_INACTIVITY_TIMEOUT,
        level=fx.Level.WARNING,
        iteration=iteration,
        details=details,
    )


def _stopped(sink: _Sink) -> StreamResult:
    return StreamResult(status=StreamStatus.STOPPED_BY_USER, accumulated_text=sink.text)


def _channel_failed(sink: _Sink, failure: Exception) -> StreamResult:
    """The stream's `error` when the channel could not deliver its text, naming the failure."""
    error = StreamError(
        type="channel_send_failed",
        message=f"the channel could not deliver text: {type(failure).__name__}: {failure}",
        retryable=False,
    )
    return StreamResult(status=StreamStatus.ERROR, accumulated_text=sink.text, data=error)


def _failure(error: str) -> ToolResult:
    return ToolResult(success=False, error=error)


def _timed_out(name: str, timeout_ms: int) -> ToolResult:
    return _failure(f"Tool {name} timed out after {_seconds(timeout_ms)} s")


_FAILED = frozenset({StreamStatus.ERROR, StreamStatus.TIMEOUT})


def _log_failed_stream(
    provider: ProviderDescriptor, span: StreamSpan, result: StreamResult
) -> None:
    """A failed or timed-out stream, at WARNING: which provider, where (no key), what it said."""
    error = result.data if isinstance(result.data, StreamError) else None
    log.warning(
        "stream %s: provider %s at %s (attempt %d, iteration %d): %s",
        result.status.value,
        provider.name,
        provider.endpoint or "an endpoint it does not name",
        span.attempt,
        span.iteration,
        "no error given" if error is None else f"{error.type}: {error.message}",
        extra={"provider": provider.name, "endpoint": provider.endpoint, "status": result.status},
    )


def _seconds(milliseconds: int) -> str:
    """`300` for 300000 ms, `12.5` for 12500 ms: no trailing `.0` when whole."""
    seconds = milliseconds / 1000
    return str(int(seconds)) if seconds.is_integer() else str(seconds)


_LEVELS = {
    fx.Level.INFO: logging.INFO,
    fx.Level.WARNING: logging.WARNING,
    fx.Level.ERROR: logging.ERROR,
}
