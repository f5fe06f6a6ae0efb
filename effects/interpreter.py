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

import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import attrs
from anyio import TaskHandle
from anyio.abc import TaskGroup

from toolloop.effects.clock import loop_clock
from toolloop.effects.notices import NOTICE_LIMIT, NoticeCatalog
from toolloop.effects.observe import HostObserver, NoticeShown, StreamFirstChunk, host_events
from toolloop.effects.ports import (
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
from toolloop.engine.construct import constructor
from toolloop.engine.events import (
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.step import Step, initial_state, step
from toolloop.states import (
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


class ImpersonationAborted(ToolloopError, RuntimeError):
    """A turn under user impersonation failed too many tool calls in a row (SPEC 9).

    The loop raises it instead of returning a result: no notice may speak for
    the impersonated user.
    """


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
) -> GenerationTurnResult:
    """Run one generation attempt to its result (or the error it raises, `ImpersonationAborted`).

    `catalog` defaults to the shipped notices. `stash` is the one a bot's
    enrichment tools put items into; without one, every take finds nothing (no
    tool can have put an item). `on_event` gets the
    typed host events (`toolloop.effects.observe`); `attempt` is this attempt's
    index in the fallback chain, which names its streams.
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
            runners=runners,
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
    __slots__ = ("started",)

    def __init__(
        self, effect: fx.DispatchTool, runner: TaskHandle[None], alarm: _Alarm, timeout: float
    ) -> None:
        self.started = alarm.now()
        super().__init__(effect, runner, alarm, self.started + timeout)


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
    runners: TaskGroup
    _alarm: _Alarm = attrs.field(init=False, factory=_Alarm)
    _outcome: Outcome | None = attrs.field(init=False, default=None)
    _current: _Sink | _ToolRun | None = attrs.field(init=False, default=None)
    """The call in progress, until its runner or the supervisor releases it."""
    _chain_active: bool = attrs.field(init=False, default=False)
    """A `function_call` stream arrived this attempt: follow-ups no longer interrupt."""
    _killed: KillSignal = attrs.field(init=False)
    """The turn's kill signal, read once: the attempt belongs to one turn."""
    _stream_timeout: float = attrs.field(init=False)
    _tool_timeout: float = attrs.field(init=False)
    """The two call timeouts in seconds."""
    _state: IterationState = attrs.field(init=False)
    """The state the awaited effect of the last step answers to (set by `supervise`)."""
    _runner: TaskHandle[None] = attrs.field(init=False)
    """The task now stepping the loop (set by `_spawn`)."""

    # -- the supervisor --------------------------------------------------------------------

    async def supervise(self) -> Outcome:
        """Start the runner and watch its calls until the attempt has its outcome."""
        self._killed = self.control.killed
        self._stream_timeout = self.config.stream_sdk_call_timeout_ms / 1000
        self._tool_timeout = self.config.tool_execution_timeout_ms / 1000
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
        return _failure(
            f"Tool {name} timed out after {_seconds(self.config.tool_execution_timeout_ms)} s"
        )

    # -- the runner ------------------------------------------------------------------------

    def _spawn(self, state: IterationState, event: Event) -> None:
        self._runner = self.runners.start_soon(self._drive, state, event)

    async def _drive(self, state: IterationState, event: Event) -> None:
        """Step the loop from `state` and `event` to its outcome, unless a call is taken.

        A taken call cancels its runner (`TaskHandle.cancel`, whose scope ends the
        task quietly) or, when it returns anyway, raises `_Superseded`. One frame
        for the whole chain: a frame per layer would be held by every waiting turn.
        """
        observer = self.observer
        try:
            while True:
                out = step(state, event)
                if observer is not None:
                    observer(state, event, out)
                if self.on_event is not None:
                    for shown in host_events(self.attempt, state, event, out, self.registry.redact):
                        self.on_event(shown)
                state = self._state = out.state
                *fire_and_forget, last = out.effects
                for pending in map(self._perform, fire_and_forget):
                    if pending is not None:
                        await pending
                # While it waits, a turn holds its state and the effect it awaits, not the
                # step, its other effects or the event that led here (a held turn's memory).
                del out, event, fire_and_forget
                if isinstance(last, fx.Finish):
                    self._outcome = last.result
                    return
                if isinstance(last, fx.RaiseError):
                    self._outcome = RAISES[last.kind](last.message)
                    return
                answer = self._perform(last)
                event = _answer(last, None if answer is None else await answer)
        except _Superseded:
            return
        except Exception as error:  # the attempt's failure, raised by `run_tool_loop`
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
        return _new_stream_ended(result=result, stop=self.control.pending_request())

    # -- stage 02 --------------------------------------------------------------------------

    def _dispatch(self, effect: fx.DispatchTool) -> Awaitable[ToolSettled]:
        context = effect.context
        call = _ToolRun(effect, self._runner, self._alarm, self._tool_timeout)
        invocation = _new_tool_invocation(
            killed=self._killed,
            notify=self._progress_notice(context, call),
            streaming=self._streaming_context(),
        )
        work = self.registry.execute(effect.call, context, invocation)
        return self._call(call, work, self._tool_settled)

    def _streaming_context(self) -> StreamingContext:
        """The live stream the call being dispatched came from (SPEC 6 step 3)."""
        state = self._state
        assert state.pending is not None, "a dispatch always holds its call"
        return _new_streaming_context(
            reply_to=self.reply_to,
            identity=self._identity(),
            pre_tool_text=state.pending.stream.accumulated_text,
            text_suppressed=state.suppress_text_output,
        )

    def _tool_settled(self, call: _ToolRun, result: ToolResult) -> ToolSettled:
        name, descriptor = call.effect.call.name, self.provider.descriptor
        return _new_tool_settled(
            result=result,
            requires_follow_up=self.registry.requires_follow_up(
                name, descriptor, descriptor.server
            ),
            duration_ms=round((self._alarm.now() - call.started) * 1000),
            stop=self.control.pending_request(),
        )

    def _progress_notice(
        self, context: ToolContext, call: _ToolRun
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
