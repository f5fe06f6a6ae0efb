"""The interpreter: carries out the effects of `step` against the ports, and owns all timing.

`run_tool_loop` starts the pure core with `TurnStarted`, performs each step's
effects in order and answers the awaited one with the next event. It makes no
decision of its own beyond the timing rules of SPEC 5 and 6:

* stage 01: a rolling inactivity deadline that every `sink.progress()` pushes
  back (a float assignment, so progress stays cheap), a kill handle that ends
  the call at once, and the bounded settle of an abandoned call;
* stage 02: a fresh tool timeout per call and the kill race. A tool that
  ignores cancellation is abandoned to the loop's own task group: its failure
  is reported when the deadline passes or the kill comes, and the loop waits
  for it only when the attempt is over, so nothing outlives `run_tool_loop`.

Everything it registers (kill handles) is deregistered on every path, outside
cancellation included. Written against anyio only: it runs on trio and is
simply awaited by an asyncio bot.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
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
    ToolResult,
    TurnSettings,
)

log = logging.getLogger("toolloop")
Observer = Callable[[IterationState, Event, Step], None]
"""Called after every step with the state before it, the event and the step."""


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
    """Run one generation attempt to its result (or its `ToolLoopError`)."""
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
    """What the provider reports to: progress pushes the deadline back, text goes out."""

    __slots__ = ("_channel", "_reply_to", "_suppressed", "_timeout", "deadline", "parts")

    def __init__(self, channel: Channel, reply_to: str | None, suppressed: bool, timeout: float):
        self._channel, self._reply_to, self._suppressed = channel, reply_to, suppressed
        self._timeout = timeout
        self.deadline = anyio.current_time() + timeout
        self.parts: list[str] = []

    def progress(self) -> None:
        self.deadline = anyio.current_time() + self._timeout

    async def deliver(self, text: str) -> None:
        self.parts.append(text)
        if not self._suppressed:
            await self._channel.send_text(text, reply_to=self._reply_to)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@attrs.define(kw_only=True)
class _Interpreter:
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
            event = await self._answer(last)

    async def _answer(self, effect: fx.Effect) -> Event:
        if isinstance(effect, fx.StreamOnce):
            result = await self._stream_once(effect)
            return StreamEnded(result=result, stop=self.control.pending_request())
        if isinstance(effect, fx.DispatchTool):
            return await self._dispatch(effect)
        if isinstance(effect, fx.TakeStashedContext):
            return StashTaken(item=self.stash.take(effect.key))
        raise TypeError(
            f"{type(effect).__name__} is not an awaited effect: the engine and the "
            "interpreter disagree on the effect vocabulary (see toolloop.engine.effects.AWAITED)"
        )

    # -- stage 01 --------------------------------------------------------------------------

    async def _stream_once(self, effect: fx.StreamOnce) -> StreamResult:
        timeout = self.config.stream_sdk_call_timeout_ms / 1000
        sink = _Sink(self.channel, self.reply_to, effect.suppress_text_output, timeout)
        request = StreamRequest(
            turn=self.turn,
            once=effect,
            tools=self.registry.specs(self.provider.descriptor),
            reply_to=self.reply_to,
            verbatim=self.verbatim,
        )
        call = _Call(self.provider.stream(request, sink))
        killed = False

        def kill() -> None:
            nonlocal killed
            killed = True
            call.scope.cancel()
            call.done.set()

        self.control.register_kill(kill)
        ended: StreamResult | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(call.run)
                await _wait_rolling(call.done, sink)
                if killed:
                    ended = _stopped(sink)
                elif not call.finished:
                    ended = await self._abandon(call, sink, effect.iteration)
                call.scope.cancel()
        finally:
            self.control.deregister_kill(kill)
        return ended or call.result()

    async def _abandon(self, call: _Call, sink: _Sink, iteration: int) -> StreamResult:
        """The stream went silent: a stop wins at once, else settle, notice, `timeout`."""
        if self.control.pending_request() is StopRequest.STOP:
            return _stopped(sink)
        with anyio.move_on_after(self.config.stream_abandoned_settle_timeout_ms / 1000):
            await call.done.wait()
        seconds = _seconds(self.config.stream_sdk_call_timeout_ms)
        if not self.turn.suppress_user_errors:
            await self._notice(
                fx.SendNotice(
                    key=fx.NoticeKey.STREAM_INACTIVITY_TIMEOUT,
                    level=fx.Level.WARNING,
                    iteration=iteration,
                    details={"seconds": seconds},
                )
            )
        error = StreamError(type="timeout", message=f"no data from the provider for {seconds} s")
        return StreamResult(status=StreamStatus.TIMEOUT, accumulated_text=sink.text, data=error)

    # -- stage 02 --------------------------------------------------------------------------

    async def _dispatch(self, effect: fx.DispatchTool) -> ToolSettled:
        name, context = effect.call.name, effect.context
        invocation = ToolInvocation(
            killed=self.control.killed, notify=self._progress_notice(context)
        )
        started = anyio.current_time()
        call = _Call(self.registry.execute(effect.call, context, invocation))
        timeout_ms = self.config.tool_execution_timeout_ms
        killed = False

        def kill() -> None:
            nonlocal killed
            killed = True
            call.scope.cancel()
            call.done.set()

        self.control.register_kill(kill)
        try:
            self.stragglers.start_soon(call.run)
            with anyio.move_on_after(timeout_ms / 1000):
                await call.done.wait()
        finally:
            self.control.deregister_kill(kill)
        if killed:
            result = _failure(f"Tool {name} was killed")
        elif call.finished:
            result = call.tool_result()
        else:
            call.scope.cancel()
            result = _failure(f"Tool {name} timed out after {_seconds(timeout_ms)} s")
        return ToolSettled(
            result=result,
            requires_follow_up=self.registry.requires_follow_up(
                name, self.provider.descriptor, self.provider.descriptor.server
            ),
            duration_ms=round((anyio.current_time() - started) * 1000),
            stop=self.control.pending_request(),
        )

    def _progress_notice(self, context: Any) -> Callable[[str], Awaitable[None]]:
        async def notify(text: str) -> None:
            if context.suppress_progress_notices:
                return
            notice = Notice(
                key="tool_progress",
                level="info",
                text=text,
                hidden=False,
                iteration=context.iteration,
                identity=self._identity(),
            )
            await self._send(self.channel.send_notice, notice)

        return notify

    # -- fire-and-forget effects -----------------------------------------------------------

    async def _perform(self, effect: fx.Effect) -> None:
        control = self.control
        match effect:
            case fx.SendNotice():
                await self._notice(effect)
            case fx.Log():
                log.log(_LEVELS[effect.level], effect.message, extra={"fields": effect.fields})
            case fx.ResetFollowUpCount():
                control.reset_follow_up_count()
            case fx.IncrementFollowUpCount():
                control.increment_follow_up_count()
            case fx.QueueStopResponse():
                control.queue_stop_response()
            case fx.ClearStopRequest():
                control.clear_stop_request()
            case fx.MarkToolChainActive():
                control.set_tool_chain_active()
            case fx.CountToolUsage():
                control.count_tool_usage(effect.name)
            case fx.RetainAffordance():
                control.retain_affordance(effect.name)
            case fx.SetTextSuppression():
                pass  # carried by the next StreamOnce, which builds the sink
            case _:
                raise TypeError(
                    f"received unrecognized effect {type(effect).__name__}: is the engine "
                    "newer than this interpreter?"
                )

    async def _notice(self, effect: fx.SendNotice) -> None:
        details = dict(effect.details)
        if effect.key is fx.NoticeKey.TOOL_CALL_FAILED:
            details["args"] = self.registry.redact(
                str(details.get("tool_name")), details.get("args")
            )
        details.setdefault("iteration", effect.iteration)
        text = self.catalog.render(effect.key.value, self.turn.locale, details)
        if effect.key is fx.NoticeKey.TOOL_CALL_FAILED:
            text = text[:NOTICE_LIMIT]
        notice = Notice(
            key=effect.key.value,
            level=effect.level.value,
            text=text,
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
        return None if self.turn.user_impersonation else self.turn.persona.name


class _Call:
    """One awaitable run in its own cancel scope, with its outcome kept for the waiter."""

    __slots__ = ("_awaitable", "_error", "_value", "done", "finished", "scope")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.finished = False
        self._value: Any = None
        self._error: Exception | None = None

    async def run(self) -> None:
        with self.scope:
            try:
                self._value = await self._awaitable
            except Exception as error:  # handed to the waiter, which re-raises it
                self._error = error
            self.finished = True
            self.done.set()
        if not self.finished:
            _close(self._awaitable)

    def result(self) -> StreamResult:
        if self._error is not None:
            raise self._error
        assert isinstance(self._value, StreamResult)
        return self._value

    def tool_result(self) -> ToolResult:
        if self._error is not None:
            return _failure(f"{type(self._error).__name__}: {self._error}")
        assert isinstance(self._value, ToolResult)
        return self._value


async def _wait_rolling(done: anyio.Event, sink: _Sink) -> None:
    """Wait for `done` until the sink's deadline passes; progress pushes the deadline back."""
    while not done.is_set():
        remaining = sink.deadline - anyio.current_time()
        if remaining <= 0:
            return
        with anyio.move_on_after(remaining):
            await done.wait()


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def _stopped(sink: _Sink) -> StreamResult:
    return StreamResult(status=StreamStatus.STOPPED_BY_USER, accumulated_text=sink.text)


def _failure(error: str) -> ToolResult:
    return ToolResult(success=False, error=error)


def _seconds(milliseconds: int) -> str:
    """`300` for 300000 ms, `12.5` for 12500 ms."""
    return f"{milliseconds / 1000:g}"


_LEVELS = {
    fx.Level.INFO: logging.INFO,
    fx.Level.WARNING: logging.WARNING,
    fx.Level.ERROR: logging.ERROR,
}
