"""`run_tool_loop`: the supervisor and the runner that step the loop and perform each effect."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from toolloop.effects.interpreter.attempt import Observer, Outcome, Recorder, StartFrom
from toolloop.effects.interpreter.batch import BatchStage
from toolloop.effects.interpreter.calls import Sink, ToolRun, _Superseded
from toolloop.effects.interpreter.control import ControlEffects
from toolloop.effects.interpreter.errors import RAISES, CoreMismatch
from toolloop.effects.interpreter.stream import StreamStage
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.observe import HostObserver, host_events
from toolloop.effects.ports import ApprovalPort, Channel, Provider, ToolRegistryPort, TurnControl
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, TurnStarted
from toolloop.engine.resume import resume as resumed
from toolloop.engine.step import Step, initial_state, step
from toolloop.states import GenerationTurnResult, IterationState, LoopConfig, TurnSettings


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


class _Interpreter(StreamStage, BatchStage, ControlEffects):
    """One attempt: `supervise` and `_drive` run it, the stages it inherits perform."""

    __slots__ = ()

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
            sink = watched if isinstance(watched, Sink) and watched.interruptible else None
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

    async def _take(self, call: Sink | ToolRun) -> None:
        """Decide the outcome of a killed or overdue call, then continue in a fresh runner."""
        call.taken = True
        try:
            if isinstance(call, Sink):
                event: Event = self._stream_ended(call, await self._abandoned(call))
            else:
                event = self._tool_settled(call, self._overdue_tool(call))
        finally:
            self._release(call)
            call.abandon()
            self._alarm.armed = math.inf
        self._spawn(self._state, event)

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
        observer, recorder, on_event = self.observer, self.recorder, self.on_event
        try:
            for effect in prelude:
                pending = self._perform(effect)
                if pending is not None:
                    await pending
            while True:
                if first is None:
                    if recorder is not None:
                        await recorder(event)
                    out = step(state, event)
                    if observer is not None:  # a resumed wait is no step
                        observer(state, event, out)
                else:
                    out, first = first, None
                if on_event is not None:  # a resumed wait's asks reach the host again
                    for shown in host_events(self.attempt, state, event, out, self.registry.redact):
                        on_event(shown)
                state = self._state = out.state
                *fire_and_forget, last = out.effects
                for effect in fire_and_forget:
                    pending = self._perform(effect)
                    if pending is not None:
                        await pending
                # While it waits, a turn holds its state and the effect it awaits, not the
                # step, its other effects or the event that led here (a held turn's memory).
                del out, event, fire_and_forget
                effect = last
                performer = _PERFORMERS.get(type(effect))
                if performer is None:  # the final effect, or one this interpreter lacks
                    self._end_batch()
                    self._outcome = _outcome(effect)
                    return
                answer = performer(self, effect)
                event = _answer(effect, None if answer is None else await answer)
        except _Superseded:
            return
        except Exception as error:  # the attempt's failure, raised by `run_tool_loop`
            self._end_batch()
            self._outcome = error

    def _perform(self, effect: fx.Effect) -> Awaitable[Event | None] | None:
        """Carry out `effect`: done when None, else the awaitable that finishes it."""
        performer = _PERFORMERS.get(type(effect))
        if performer is None:
            raise _unrecognized(effect)
        return performer(self, effect)


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


def _outcome(effect: fx.Effect) -> Outcome:
    """The attempt's outcome, from the final effect that ends its last step."""
    if isinstance(effect, fx.Finish):
        return effect.result
    if isinstance(effect, fx.RaiseError):
        return RAISES[effect.kind](effect.message)
    raise _unrecognized(effect)


def _unrecognized(effect: fx.Effect) -> CoreMismatch:
    return CoreMismatch(
        f"received unrecognized effect {type(effect).__name__} ({effect!r}): "
        "is the engine newer than this interpreter, or was a final effect "
        "(Finish, RaiseError) placed before the end of a step?"
    )
