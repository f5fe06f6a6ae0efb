"""One attempt's ports, settings and bookkeeping, and how it awaits the call in progress."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
from anyio import TaskHandle
from anyio.abc import TaskGroup

from toolloop.effects.interpreter.batch_calls import Batch
from toolloop.effects.interpreter.calls import (
    Alarm,
    Call,
    Sink,
    ToolRun,
    _Superseded,
)
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.observe import HostObserver
from toolloop.effects.ports import (
    ApprovalPort,
    Channel,
    KillSignal,
    Provider,
    StreamingContext,
    ToolRegistryPort,
    TurnControl,
)
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, StreamEnded, ToolSettled
from toolloop.engine.step import Step
from toolloop.states import (
    GenerationTurnResult,
    IterationState,
    LoopConfig,
    TurnSettings,
)

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


C = TypeVar("C", Sink, ToolRun)
E = TypeVar("E", StreamEnded, ToolSettled)


@attrs.define(kw_only=True)
class Attempt:
    """One attempt's ports, settings and bookkeeping; the stages built on it perform.

    `_call` awaits the call in progress with its kill handle registered and the
    supervisor watching it; `_release` lets it go, on every path.
    """

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
    _alarm: Alarm = attrs.field(init=False, factory=Alarm)
    _outcome: Outcome | None = attrs.field(init=False, default=None)
    _current: Sink | ToolRun | None = attrs.field(init=False, default=None)
    """The call in progress, until its runner or the supervisor releases it."""
    _chain_active: bool = attrs.field(init=False, default=False)
    """A `function_call` stream arrived this attempt: follow-ups no longer interrupt."""
    _killed: KillSignal = attrs.field(init=False)
    """The turn's kill signal, read once: the attempt belongs to one turn."""
    _stream_timeout: float = attrs.field(init=False)
    _batch: Batch | None = attrs.field(init=False, default=None)
    """The batch's calls in flight and its waits for approval, while it has any (SPEC 6b, 6c)."""
    _streaming: StreamingContext | None = attrs.field(init=False, default=None)
    """The last stream a tool call came from, reused while the next call's is the same."""
    _state: IterationState = attrs.field(init=False)
    """The state the awaited effect of the last step answers to (set by `supervise`)."""
    _runner: TaskHandle[None] = attrs.field(init=False)
    """The task now stepping the loop (set by `_spawn`)."""

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
        if call.interruptible:
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

    def _release(self, call: Call) -> None:
        self.control.deregister_kill(call)
        self._current = None
        call.close()
        if isinstance(call, Sink):  # released once per call, on every path
            self.channel.stream_ended(call.span)
            if call.interruptible:
                self._alarm.wake()  # the supervisor stops waiting for a follow-up
