"""The turn's effects as Temporal activities, carried out against the host's ports.

A worker builds `TurnActivities` from `ports`, which gives the ports of a
channel (its provider, registry, channel, turn control, catalog, stash), the
same `TurnPorts` the embedded journal takes. The timing rules of the loop run
here, where the call runs:

* a provider call keeps the rolling inactivity timeout itself, exactly as the
  interpreter does (each `sink.progress()` pushes it back): a silent provider
  ends the call as `timeout`, reported as the loop's own (`went_silent`), so
  the workflow's step sends the inactivity notice;
* every activity heartbeats every `heartbeat_every` seconds (a stream's
  heartbeat carries what the channel shows of it), because Temporal delivers a
  cancellation (the workflow's kill, a follow-up) only with a heartbeat; the
  heartbeat timeout, `TurnInput.worker_lost_s`, then fires only when the worker
  itself is gone;
* a call run again after its worker was lost runs only when its tool is
  idempotent (`toolloop.durable`'s rule);
* a stream's text is named to the channel by the workflow's id, so a channel
  that recalls what it took (`RecallingChannel`) tells a stream made again
  where to go on, the piece it took just before a worker died included;
  another channel has the last heartbeat's text, which may lack that piece.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from temporalio import activity

from toolloop.effects.durable.resume import (
    RecallingChannel,
    TurnPorts,
    interrupted,
    runs_again,
    unshown,
)
from toolloop.effects.interpreter.stream import channel_failed, silent
from toolloop.effects.notices import NoticeCatalog, identity, progress_notice, render_notice
from toolloop.effects.ports import (
    Notice,
    StreamingContext,
    StreamRequest,
    StreamSpan,
    ToolInvocation,
    approvals_needed,
    exclusive_flags,
    shown_request,
    withdraw,
)
from toolloop.effects.temporal.messages import (
    AskInput,
    CallFacts,
    Chores,
    StashInput,
    StreamInput,
    StreamOutput,
    ToolInput,
    bounded,
)
from toolloop.engine import commands as fx
from toolloop.engine.events import StashTaken
from toolloop.states import (
    ApprovalDecision,
    LoopConfig,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
)
from toolloop.states.loop_config import in_seconds

log = logging.getLogger("toolloop.temporal")
T = TypeVar("T")
Ports = Callable[[str], TurnPorts]
"""The host's ports for the turns of a channel, by its id (`TurnSettings.channel_id`)."""


class TurnActivities:
    """The activities of every turn a worker serves; register `all()` with the worker."""

    def __init__(self, ports: Ports, *, heartbeat_every: float = 1.0) -> None:
        self._ports = ports
        self._heartbeat_every = heartbeat_every

    def all(self) -> list[Callable[..., object]]:
        return [self.stream, self.tool, self.ask, self.chores, self.take_stash]

    @activity.defn(name="toolloop.stream")
    async def stream(self, given: StreamInput) -> StreamOutput:
        """One provider call; a kill or a follow-up (the workflow cancels) ends it with its text."""
        ports = self._ports(given.turn.channel_id)
        await _chores(ports, given.turn, given.chores)
        once = given.once
        span = StreamSpan(
            attempt=0,
            iteration=once.iteration,
            reply_to=ports.reply_to,
            suppressed=once.suppress_text_output,
            turn=activity.info().workflow_id,
        )
        shown = given.shown
        if isinstance(ports.channel, RecallingChannel):
            shown = await ports.channel.taken(span)
        sink = _Sink(ports, span, shown, given.config)
        request = StreamRequest(
            turn=given.turn,
            once=once,
            tools=ports.registry.specs(ports.provider.descriptor),
            reply_to=ports.reply_to,
            verbatim=ports.verbatim,
            verbatim_tool_call_max_buffer_chars=given.config.verbatim_tool_call_max_buffer_chars,
        )
        ports.channel.stream_started(span)
        try:
            result = await self._beating(sink.run(ports.provider.stream(request, sink)), sink)
        except asyncio.CancelledError:
            if not activity.is_cancelled():
                raise
            # The workflow names the reason (kill or follow-up); the text is what counts here.
            result = StreamResult(status=StreamStatus.STOPPED_BY_USER, accumulated_text=sink.text)
        finally:
            ports.channel.stream_ended(span)
        registry = ports.registry
        return StreamOutput(
            result=result,
            calls=_facts(ports, given.config, result),
            exclusive=exclusive_flags(registry, result.calls),
            approval=approvals_needed(registry, result, lambda: given.context),
            went_silent=sink.went_silent,
        )

    @activity.defn(name="toolloop.tool")
    async def tool(self, given: ToolInput) -> ToolResult:
        """One tool call; heartbeats so the workflow's kill reaches it and a lost worker shows."""
        ports = self._ports(given.turn.channel_id)
        await _chores(ports, given.turn, given.chores)
        speaker = identity(given.turn)
        name = given.call.name.strip()
        if given.again and not runs_again(ports.registry, name):
            return interrupted(name)
        killed = anyio.Event()

        async def notify(text: str) -> None:
            if given.context.suppress_progress_notices or killed.is_set():
                return
            notice = progress_notice(text, given.context.iteration, given.turn)
            await _send(ports.channel.send_notice, notice)

        invocation = ToolInvocation(
            killed=killed,
            notify=notify,
            streaming=StreamingContext(
                reply_to=ports.reply_to,
                identity=speaker,
                pre_tool_text=given.pre_tool_text,
                text_suppressed=given.text_suppressed,
            ),
        )
        try:
            result = await self._beating(
                ports.registry.execute(given.call, given.context, invocation)
            )
        except asyncio.CancelledError:
            killed.set()
            raise
        return bounded(result, given.result_limit)

    @activity.defn(name="toolloop.ask")
    async def ask(self, given: AskInput) -> ApprovalDecision | None:
        """The host's prompt for a call that needs approval (`TurnPorts.approvals`), its
        arguments redacted; None at once without an approvals port: a `decide` update
        then answers. Cancelled when the wait ends (the host retires its prompt)."""
        ports = self._ports(given.turn.channel_id)
        if ports.approvals is None:
            return None
        shown = shown_request(ports.registry, given.request)
        return await self._beating(ports.approvals.ask(shown))

    @activity.defn(name="toolloop.chores")
    async def chores(self, given: Chores) -> None:
        """A step's notices and turn-control counts when no activity of the step carries them."""
        await _chores(self._ports(given.turn.channel_id), given.turn, given.effects)

    @activity.defn(name="toolloop.take_stash")
    async def take_stash(self, given: StashInput) -> StashTaken:
        ports = self._ports(given.turn.channel_id)
        await _chores(ports, given.turn, given.chores)
        stash = ports.stash
        return StashTaken(item=None if stash is None else stash.take(given.key))

    async def _beating(self, work: Awaitable[T], sink: _Sink | None = None) -> T:
        """`work` with heartbeats beside it; its own error raised as it is (a task group
        would wrap a provider's or a host's error in an exception group)."""
        beats = asyncio.get_running_loop().create_task(
            self._beat(None if sink is None else sink.showing)
        )
        try:
            return await work
        finally:
            beats.cancel()

    async def _beat(self, details: Callable[[], str] | None = None) -> None:
        """Heartbeat every `heartbeat_every` s: Temporal delivers a cancellation (the kill)
        only with a heartbeat, and the server knows the worker lives."""
        while True:
            if details is None:
                activity.heartbeat()
            else:
                activity.heartbeat(details())
            await anyio.sleep(self._heartbeat_every)


_CONTROL: dict[type[fx.Effect], Callable[..., None]] = {
    fx.ResetFollowUpCount: lambda control, _: control.reset_follow_up_count(),
    fx.IncrementFollowUpCount: lambda control, _: control.increment_follow_up_count(),
    fx.QueueStopResponse: lambda control, _: control.queue_stop_response(),
    fx.ClearStopRequest: lambda control, _: control.clear_stop_request(),
    fx.MarkToolChainActive: lambda control, _: control.set_tool_chain_active(),
    fx.CountToolUsage: lambda control, effect: control.count_tool_usage(effect.name),
    fx.RetainAffordance: lambda control, effect: control.retain_affordance(effect.name),
}
"""The host's turn control for each of a step's count effects (the workflow holds the
stop and follow-up requests and the kill itself)."""
HOST_CHORES = (fx.SendNotice, fx.WithdrawApproval, *_CONTROL)
"""The fire-and-forget effects the `chores` activity carries out."""


class _Sink:
    """The provider's sink in the activity: text to the channel, progress to the heartbeat.

    `shown` is what the channel already shows of this call from a run whose worker
    was lost: the run's text is matched against it and only what goes beyond it, or
    differs from it, is sent.
    """

    def __init__(self, ports: TurnPorts, span: StreamSpan, shown: str, config: LoopConfig) -> None:
        self._ports, self._span = ports, span
        self._shown = shown
        self._showing = shown
        """What the channel shows of this call: heartbeated, a later run's `shown`."""
        self._timeout_ms = config.stream_sdk_call_timeout_ms
        self._timeout = self._timeout_ms / 1000
        self._parts: list[str] = []
        self._scope: anyio.CancelScope | None = None
        self.went_silent = False
        self._failure: Exception | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    async def run(self, stream: Awaitable[StreamResult]) -> StreamResult:
        """The provider's result, or `timeout` once it was silent too long, or `error` when
        the channel refused its text."""
        with anyio.CancelScope(deadline=anyio.current_time() + self._timeout) as scope:
            self._scope = scope
            result = await stream
        if self._failure is not None:
            return channel_failed(self.text, self._failure)
        if scope.cancelled_caught:
            self.went_silent = True
            return silent(self.text, in_seconds(self._timeout_ms))
        return result

    def showing(self) -> str:
        """What the channel shows of this call (a run after a lost worker's `shown`)."""
        return self._showing

    def progress(self) -> None:
        if self._scope is not None:
            self._scope.deadline = anyio.current_time() + self._timeout

    async def deliver(self, text: str) -> None:
        if self._failure is not None:
            return
        self._parts.append(text)
        if self._span.suppressed:
            return
        if self._shown:
            self._shown, text = unshown(self._shown, text)
            if not text:
                return
        try:
            await self._ports.channel.send_text(text, reply_to=self._span.reply_to)
        except Exception as error:  # the platform refused or failed the send (SPEC 5)
            self._parts.pop()
            self._failure = error
            if self._scope is not None:
                self._scope.cancel()
            return
        self._showing += text
        activity.heartbeat(self._showing)


async def _chores(ports: TurnPorts, turn: TurnSettings, effects: tuple[fx.Effect, ...]) -> None:
    """A step's notices and turn-control counts, in order; a failed notice is logged.

    A heartbeat after them tells the workflow they were done, should the worker
    then be lost: the call is made again without them.
    """
    if not effects:
        return
    catalog = ports.catalog or NoticeCatalog.default()
    for effect in effects:
        if isinstance(effect, fx.SendNotice):
            notice = render_notice(effect, turn, catalog, ports.registry.redact)
            channel = ports.channel
            await _send(
                channel.send_hidden_notice if effect.hidden else channel.send_notice, notice
            )
        elif isinstance(effect, fx.WithdrawApproval):
            await withdraw(ports.approvals, ports.registry, effect.request)
        else:
            _CONTROL[type(effect)](ports.control, effect)
    activity.heartbeat("")


def _facts(ports: TurnPorts, config: LoopConfig, result: StreamResult) -> tuple[CallFacts, ...]:
    registry, descriptor = ports.registry, ports.provider.descriptor
    facts = []
    for call in result.batch:
        name = call.name.strip()
        own = registry.timeout_ms(name)
        facts.append(
            CallFacts(
                timeout_ms=config.tool_execution_timeout_ms if own is None else own,
                follow_up=registry.requires_follow_up(name, descriptor, descriptor.server),
            )
        )
    return tuple(facts)


async def _send(send: Callable[[Notice], object], notice: Notice) -> None:
    """A notice that fails to send is logged and never ends the turn."""
    try:
        await send(notice)  # type: ignore[misc]
    except Exception:
        log.exception("could not send the %s notice", notice.key)
