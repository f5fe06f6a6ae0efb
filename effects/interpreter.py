"""The interpreter: carries out the effects of `step` against the ports, and owns all timing.

`run_tool_loop` starts the pure core with `TurnStarted`, performs each step's
effects in order (a type-to-performer table) and answers the awaited one with
the next event. It makes no decision of its own beyond the timing rules of
SPEC 5 and 6:

* stage 01: a rolling inactivity deadline that every `sink.progress()` pushes
  back (one float assignment: moving a cancel scope's deadline costs ~6 µs on
  trio, so the waiter re-arms lazily when the old deadline passes), a kill
  handle that ends the call at once, and the bounded settle of an abandoned
  call;
* stage 02: a fresh tool timeout per call and the kill race.

Provider calls and tools both run in the loop's own task group, so one that
ignores cancellation (a shield, a blocking cleanup) cannot hold the loop up:
its outcome is decided when the deadline passes or the kill comes, the loop
goes on, and `run_tool_loop` waits for the straggler only once the attempt is
over, so nothing outlives it. How long that last wait lasts is up to the
straggler.

Everything it registers (kill handles) is deregistered on every path, outside
cancellation included, and a sink goes inert when its call is over. Written
against anyio only: it runs on trio and is simply awaited by an asyncio bot.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import attrs
from anyio import TaskHandle
from anyio.abc import TaskGroup

from toolloop.effects.notices import NOTICE_LIMIT, NoticeCatalog
from toolloop.effects.ports import (
    Channel,
    Notice,
    Provider,
    StreamRequest,
    ToolInvocation,
    ToolRegistry,
    TurnControl,
)
from toolloop.effects.stash import ContextStash
from toolloop.engine import effects as fx
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
    StreamError,
    StreamResult,
    StreamStatus,
    ToolContext,
    ToolResult,
    TurnSettings,
)

T = TypeVar("T")
log = logging.getLogger("toolloop")
Observer = Callable[[IterationState, Event, Step], None]
"""Called after every step with the state before it, the event and the step (its effects)."""


class ToolLoopError(RuntimeError):
    """The loop ended by raising (SPEC 9: the tool error loop under user impersonation)."""

    def __init__(self, kind: fx.ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


async def run_tool_loop(
    *,
    turn: TurnSettings,
    config: LoopConfig,
    provider: Provider,
    registry: ToolRegistry,
    channel: Channel,
    control: TurnControl,
    catalog: NoticeCatalog | None = None,
    stash: ContextStash | None = None,
    reply_to: str | None = None,
    verbatim: bool = False,
    observer: Observer | None = None,
) -> GenerationTurnResult:
    """Run one generation attempt to its result (or its `ToolLoopError`).

    `catalog` defaults to the shipped notices, `stash` to an empty stash (a bot
    passes the one its enrichment tools put items into).
    """
    failure: Exception | None = None
    async with anyio.create_task_group() as stragglers:
        interpreter = _Interpreter(
            turn=turn,
            config=config,
            provider=provider,
            registry=registry,
            channel=channel,
            control=control,
            catalog=catalog or NoticeCatalog.default(),
            stash=stash or ContextStash(),
            reply_to=reply_to,
            verbatim=verbatim,
            stragglers=stragglers,
        )
        try:
            result = await interpreter.run(observer)
        except Exception as error:  # raised below, outside the group, unwrapped
            failure = error
        # Tools abandoned to their timeout or a kill are not waited for any longer.
        stragglers.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


class _Sink:
    """What the provider reports to: progress pushes the deadline back, text goes out.

    Inert once its call is over (`close`): a straggling provider can no longer
    write to the channel nor keep a timer alive.
    """

    __slots__ = ("_channel", "_reply_to", "_suppressed", "_timeout", "deadline", "open", "parts")

    def __init__(self, channel: Channel, reply_to: str | None, suppressed: bool, timeout: float):
        self._channel, self._reply_to, self._suppressed = channel, reply_to, suppressed
        self._timeout = timeout
        self.deadline = anyio.current_time() + timeout
        self.parts: list[str] = []
        self.open = True

    def progress(self) -> None:
        self.deadline = anyio.current_time() + self._timeout

    async def deliver(self, text: str) -> None:
        if not self.open:
            return
        self.parts.append(text)
        if not self._suppressed:
            await self._channel.send_text(text, reply_to=self._reply_to)

    def close(self) -> None:
        self.open = False
        self.deadline = float("inf")

    @property
    def text(self) -> str:
        return "".join(self.parts)


@attrs.define(kw_only=True)
class _Interpreter:
    """One attempt's ports and settings; `run` is the loop, the rest are performers."""

    turn: TurnSettings
    config: LoopConfig
    provider: Provider
    registry: ToolRegistry
    channel: Channel
    control: TurnControl
    catalog: NoticeCatalog
    stash: ContextStash
    reply_to: str | None
    verbatim: bool
    stragglers: TaskGroup

    async def run(self, observer: Observer | None) -> GenerationTurnResult:
        state = initial_state(self.config, self.turn)
        event: Event = TurnStarted()
        while True:
            out = step(state, event)
            if observer is not None:
                observer(state, event, out)
            state = out.state
            *fire_and_forget, last = out.effects
            for effect in fire_and_forget:
                await self._perform(effect)
            if isinstance(last, fx.Finish):
                return last.result
            if isinstance(last, fx.RaiseError):
                raise ToolLoopError(last.kind, last.message)
            event = _answer(last, await self._perform(last))

    async def _perform(self, effect: fx.Effect) -> Event | None:
        performer = _PERFORMERS.get(type(effect))
        if performer is None:
            raise TypeError(
                f"received unrecognized effect {type(effect).__name__} ({effect!r}): "
                "is the engine newer than this interpreter, or was a final effect "
                "(Finish, RaiseError) placed before the end of a step?"
            )
        return await performer(self, effect)

    # -- stage 01 --------------------------------------------------------------------------

    async def _stream_once(self, effect: fx.StreamOnce) -> StreamEnded:
        timeout = self.config.stream_sdk_call_timeout_ms / 1000
        sink = _Sink(self.channel, self.reply_to, effect.suppress_text_output, timeout)
        request = StreamRequest(
            turn=self.turn,
            once=effect,
            tools=self.registry.specs(self.provider.descriptor),
            reply_to=self.reply_to,
            verbatim=self.verbatim,
        )
        call = _Call(self.stragglers, self.provider.stream(request, sink))

        def kill() -> None:
            """Cancel the call and close the sink at once: nothing reaches the channel after."""
            call.kill()
            sink.close()

        self.control.register_kill(kill)
        try:
            await _wait_rolling(call, sink)
            ended = await self._ended(call, sink, effect.iteration)
        finally:
            self.control.deregister_kill(kill)
            call.cancel()  # a no-op for a finished call; a straggler is abandoned
            sink.close()
        return StreamEnded(result=ended or call.result(), stop=self.control.pending_request())

    async def _ended(self, call: _Call, sink: _Sink, iteration: int) -> StreamResult | None:
        """The result decided here (kill, inactivity), or None for the provider's own."""
        if call.killed:
            return _stopped(sink)
        if call.finished:
            return None
        return await self._abandon(call, sink, iteration)

    async def _abandon(self, call: _Call, sink: _Sink, iteration: int) -> StreamResult:
        """The stream went silent: a stop wins at once, else settle, notice, `timeout`.

        A kill during the settle also ends it as `stopped_by_user`, without the notice.
        """
        if self.control.pending_request() is StopRequest.STOP:
            return _stopped(sink)
        await call.wait(self.config.stream_abandoned_settle_timeout_ms / 1000)
        if call.killed:
            return _stopped(sink)
        seconds = _seconds(self.config.stream_sdk_call_timeout_ms)
        if not self.turn.suppress_user_errors:
            details = {"seconds": seconds}
            await self._notice(_inactivity_notice(iteration, details))
        error = StreamError(type="timeout", message=f"no data from the provider for {seconds} s")
        return StreamResult(status=StreamStatus.TIMEOUT, accumulated_text=sink.text, data=error)

    # -- stage 02 --------------------------------------------------------------------------

    async def _dispatch(self, effect: fx.DispatchTool) -> ToolSettled:
        name, context = effect.call.name, effect.context
        invocation = ToolInvocation(
            killed=self.control.killed, notify=self._progress_notice(context)
        )
        started = anyio.current_time()
        call = _Call(self.stragglers, self.registry.execute(effect.call, context, invocation))
        timeout_ms = self.config.tool_execution_timeout_ms
        kill = call.kill
        self.control.register_kill(kill)
        try:
            await call.wait(timeout_ms / 1000)
        finally:
            self.control.deregister_kill(kill)
            call.cancel()  # a no-op for a finished tool; a straggler is abandoned
        return ToolSettled(
            result=_settled(call, name, timeout_ms),
            requires_follow_up=self.registry.requires_follow_up(
                name, self.provider.descriptor, self.provider.descriptor.server
            ),
            duration_ms=round((anyio.current_time() - started) * 1000),
            stop=self.control.pending_request(),
        )

    def _progress_notice(self, context: ToolContext) -> Callable[[str], Awaitable[None]]:
        async def notify(text: str) -> None:
            if context.suppress_progress_notices:
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
        return StashTaken(item=self.stash.take(effect.key))

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
        send = self.channel.log_thought if effect.hidden else self.channel.send_notice
        await self._send(send, notice)

    async def _send(self, send: Callable[[Notice], Awaitable[None]], notice: Notice) -> None:
        """A notice that fails to send is logged and never ends the turn."""
        try:
            await send(notice)
        except Exception:
            log.exception("could not send the %s notice", notice.key)

    def _identity(self) -> str | None:
        """The persona's webhook identity; None (the bot's own) under user impersonation."""
        return None if self.turn.user_impersonation else self.turn.persona.name

    # -- fire-and-forget effects on the turn control ---------------------------------------

    async def _log(self, effect: fx.Log) -> None:
        log.log(_LEVELS[effect.level], effect.message, extra={"fields": effect.fields})

    async def _reset_follow_up(self, effect: fx.ResetFollowUpCount) -> None:
        self.control.reset_follow_up_count()

    async def _increment_follow_up(self, effect: fx.IncrementFollowUpCount) -> None:
        self.control.increment_follow_up_count()

    async def _queue_stop_response(self, effect: fx.QueueStopResponse) -> None:
        self.control.queue_stop_response()

    async def _clear_stop(self, effect: fx.ClearStopRequest) -> None:
        self.control.clear_stop_request()

    async def _mark_chain(self, effect: fx.MarkToolChainActive) -> None:
        self.control.set_tool_chain_active()

    async def _count_usage(self, effect: fx.CountToolUsage) -> None:
        self.control.count_tool_usage(effect.name)

    async def _retain(self, effect: fx.RetainAffordance) -> None:
        self.control.retain_affordance(effect.name)

    async def _suppress_text(self, effect: fx.SetTextSuppression) -> None:
        """Nothing to do: the next StreamOnce carries the flag and its sink obeys it."""


Performer = Callable[[_Interpreter, Any], Awaitable[Event | None]]
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
"""Every effect but the final ones; the awaited ones (`fx.AWAITED`) return the next event."""


def _answer(effect: fx.Effect, event: Event | None) -> Event:
    """The awaited effect's answer; a step ending in a fire-and-forget effect is a broken core."""
    if event is None:
        raise TypeError(
            f"a step ended with {type(effect).__name__}, which answers nothing: a step "
            "must end with an awaited or a final effect (toolloop.engine.effects.AWAITED, FINAL)"
        )
    return event


class _Call:
    """One awaitable run as a task of the loop's group, with its outcome kept for the waiter.

    The task's own handle carries the cancel scope and the finished event, so
    a call costs one task and nothing more; the kill cancels the task and the
    wait in progress together.
    """

    __slots__ = ("_handle", "_waiting", "killed")

    def __init__(self, group: TaskGroup, awaitable: Awaitable[Any]) -> None:
        self._handle = group.create_task(_captured(awaitable), name="toolloop call")
        self._waiting: anyio.CancelScope | None = None
        self.killed = False

    @property
    def finished(self) -> bool:
        """The awaitable returned or raised (it was not cancelled)."""
        return self._handle.status is TaskHandle.Status.FINISHED

    @property
    def over(self) -> bool:
        """Nothing more to wait for: killed, or the task ended one way or another."""
        return self.killed or self._handle.status not in _RUNNING

    async def wait(self, timeout: float) -> None:
        """Wait up to `timeout` s for the call to end; a kill ends the wait at once."""
        if self.over:
            return
        with anyio.move_on_after(timeout) as self._waiting:
            await self._handle.wait()
        self._waiting = None

    def kill(self) -> None:
        """The kill handle: cancel the call and release its waiter, both at once."""
        self.killed = True
        self._handle.cancel()
        if self._waiting is not None:
            self._waiting.cancel()

    def cancel(self) -> None:
        self._handle.cancel()

    def result(self) -> Any:
        """What the awaitable returned; what it raised is raised again here (a port failed)."""
        value, error = self._handle.return_value
        if error is not None:
            raise error
        return value


_RUNNING = frozenset({TaskHandle.Status.PENDING, TaskHandle.Status.CANCELLING})


async def _captured(awaitable: Awaitable[T]) -> tuple[T | None, Exception | None]:
    """The awaitable's value or exception, so a failing port does not fail the task group."""
    try:
        return await awaitable, None
    except Exception as error:  # handed to the waiter, which re-raises it
        return None, error


async def _wait_rolling(call: _Call, sink: _Sink) -> None:
    """Wait for the call until the sink's deadline passes; progress pushes the deadline back."""
    while not call.over:
        remaining = sink.deadline - anyio.current_time()
        if remaining <= 0:
            return
        await call.wait(remaining)


def _settled(call: _Call, name: str, timeout_ms: int) -> ToolResult:
    """The tool's result, or the failure of the kill or the timeout that ended it."""
    if call.killed:
        return _failure(f"Tool {name} was killed")
    if not call.finished:
        return _failure(f"Tool {name} timed out after {_seconds(timeout_ms)} s")
    result: ToolResult = call.result()
    return result


def _inactivity_notice(iteration: int, details: dict[str, Any]) -> fx.SendNotice:
    return fx.SendNotice(
        key=fx.NoticeKey.STREAM_INACTIVITY_TIMEOUT,
        level=fx.Level.WARNING,
        iteration=iteration,
        details=details,
    )


def _stopped(sink: _Sink) -> StreamResult:
    return StreamResult(status=StreamStatus.STOPPED_BY_USER, accumulated_text=sink.text)


def _failure(error: str) -> ToolResult:
    return ToolResult(success=False, error=error)


def _seconds(milliseconds: int) -> str:
    """`300` for 300000 ms, `12.5` for 12500 ms: no trailing `.0` when whole."""
    seconds = milliseconds / 1000
    return str(int(seconds)) if seconds.is_integer() else str(seconds)


_LEVELS = {
    fx.Level.INFO: logging.INFO,
    fx.Level.WARNING: logging.WARNING,
    fx.Level.ERROR: logging.ERROR,
}
