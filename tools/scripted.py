"""The scripted ports of a scenario: a provider that plays its streams, tools that play results.

They act through the real machinery rather than around it: text goes through
the interpreter's sink with progress, a stall really goes silent (so the
interpreter's inactivity timeout fires, on the virtual clock), a hanging tool
really hangs (so the tool timeout ends it), a kill is the turn control's
genuine kill and a follow-up its real follow-up request, and a channel
failure is the channel raising. The tools are registered into the real
`ToolRegistry`, so the gates, the schema and the exception handling are the
ones a bot gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import attrs

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolFunction, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    ApprovalRequest,
    FunctionCall,
    JsonObject,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    Verdict,
    args_digest,
)
from toolloop.states.errors import InvalidOption, ToolloopError
from toolloop.tools.scenario import (
    Scenario,
    ScriptedDecision,
    ScriptedResult,
    ScriptedStream,
    ScriptedTool,
)

T = TypeVar("T")
ERROR_STATUSES = frozenset({StreamStatus.ERROR, StreamStatus.TIMEOUT})
FOLLOW_UP_AFTER_S = 1.0
"""When a scripted follow-up arrives after the stream's text: below any inactivity timeout."""


class ScriptedProviderError(ToolloopError, RuntimeError):
    """The error a `{"raise": ...}` stream makes the provider call raise."""


class ScriptedToolError(ToolloopError, RuntimeError):
    """The exception a `{"raise": ...}` result makes the tool raise."""


class ChannelRefusedError(ToolloopError, RuntimeError):
    """What the scripted channel raises for a stream's `channel_fails`."""


@attrs.define
class ScriptedChannel(RecordingChannel):
    """A recording channel that refuses a stream's text when told (texts by stream: `streams`)."""

    refusal: str | None = None
    """Set by the provider for a stream with `channel_fails`: the next send raises it."""

    def refuse_next(self, refusal: str | None) -> None:
        """A provider call begins; its first send raises `refusal` when there is one."""
        self.refusal = refusal

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        if self.refusal is not None:
            refusal, self.refusal = self.refusal, None
            raise ChannelRefusedError(refusal)
        await super().send_text(text, reply_to=reply_to)

    @property
    def delivered(self) -> list[str]:
        """Every text the channel received, one entry per stream that delivered any."""
        return [text for text in self.streams.values() if text]


class ScriptedTurnControl(MemoryTurnControl):
    """The in-memory turn control, with a follow-up that arrives once a stream has returned.

    A scenario's `follow_up_before_tool` is a follow-up that arrives after the
    `function_call` stream returned (SPEC 6 step 2, amended 2026-12-04): the
    moment the loop marks the chain active, so it never interrupts that stream.
    """

    __slots__ = ("follow_up_after_return",)

    def __init__(self, *, stop_context_queued: bool = False, record_registrations: bool = False):
        super().__init__(
            stop_context_queued=stop_context_queued, record_registrations=record_registrations
        )
        self.follow_up_after_return = False

    def set_tool_chain_active(self) -> None:
        super().set_tool_chain_active()
        if self.follow_up_after_return:
            self.follow_up_after_return = False
            self.request_follow_up()


def repeating_last(items: Sequence[T]) -> Callable[[], T]:
    """A function returning the items one per call, then the last one forever."""
    position = 0

    def take() -> T:
        nonlocal position
        item = items[min(position, len(items) - 1)]
        position += 1
        return item

    return take


class ScriptedProvider:
    """Plays one scripted stream per call; the last one repeats."""

    def __init__(
        self,
        streams: Sequence[ScriptedStream],
        *,
        control: ScriptedTurnControl,
        channel: ScriptedChannel,
        descriptor: ProviderDescriptor,
    ) -> None:
        if not streams:
            raise InvalidOption("a scripted provider needs at least one stream")
        self._next = repeating_last(streams)
        self._calls = 0
        """Provider calls made so far: a call's default id names its provider call."""
        self._control = control
        self._channel = channel
        self._descriptor = descriptor

    @property
    def descriptor(self) -> ProviderDescriptor:
        """The scenario's provider."""
        return self._descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Deliver the script's text, then end, stall, get killed or interrupted, or raise."""
        script = self._next()
        number, self._calls = self._calls, self._calls + 1
        self._channel.refuse_next(script.channel_fails)
        if script.text:
            sink.progress()
            await sink.deliver(script.text)
            if script.channel_fails is not None:
                await anyio.lowlevel.checkpoint()  # a refused send ended this call: it ends here
        if script.raises is not None:
            raise ScriptedProviderError(script.raises)
        if script.kill:
            self._control.kill()
        if script.follow_up:
            self._control.request_follow_up()
            await anyio.sleep(FOLLOW_UP_AFTER_S)  # the call stays open; the loop may end it
        if script.stall:
            await anyio.sleep_forever()
        self._request_pending(script)
        return _result(script, number)

    def _request_pending(self, script: ScriptedStream) -> None:
        """What is pending on the turn control when the call reaches the loop."""
        if script.stop_before_tool:
            self._control.request_stop()
        if script.follow_up_before_tool:
            self._control.follow_up_after_return = True


def _result(script: ScriptedStream, number: int) -> StreamResult:
    """The stream's result; `number` is the provider call's (a call's default id names it)."""
    data: FunctionCall | StreamError | None = None
    calls = tuple(
        FunctionCall(
            name=call.name,
            args=call.args,
            arguments_truncated=call.arguments_truncated,
            call_id=f"call_{number}_{position}" if call.id is None else call.id,
        )
        for position, call in enumerate(script.calls)
    )
    if calls:
        data = calls[0]
    elif script.status in ERROR_STATUSES:
        message = script.error or f"scripted {script.status.value}"
        data = StreamError(type=script.status.value, message=message)
    return StreamResult(
        status=script.status,
        accumulated_text=script.text,
        details_content=script.details,
        data=data,
        thought_log=script.thought_log,
        model_parts=_model_parts(script),
        calls=calls if len(calls) > 1 else (),
    )


def _model_parts(script: ScriptedStream) -> tuple[JsonObject, ...]:
    """The parts the script gives, else its text as one text part (none when blank)."""
    if script.model_parts is not None:
        return script.model_parts
    return ({"type": "text", "text": script.text},) if script.text.strip() else ()


def scripted_registry(tools: Sequence[ScriptedTool], control: MemoryTurnControl) -> ToolRegistry:
    """The real registry with each scenario tool registered, playing its results."""
    registry = ToolRegistry()
    for tool in tools:
        registry.register(
            scripted_tool(tool.results, control),
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            requires_follow_up=tool.requires_follow_up,
            providers=None if tool.available_for_provider else _never,
            available=None if tool.available_for_turn else _never,
            exclusive=tool.exclusive,
            requires_approval=tool.approval is not None,
        )
    return registry


def scripted_tool(results: Sequence[ScriptedResult], control: MemoryTurnControl) -> ToolFunction:
    """A tool function consuming one result per run (refusals never reach it)."""
    take = repeating_last(results)

    async def play(args: JsonObject, call: ToolCall) -> ToolResult:
        script = take()
        if script.kill:
            control.kill()
        if script.hang:
            await anyio.sleep_forever()
        if script.delay_ms:
            await anyio.sleep(script.delay_ms / 1000)
        if script.raises is not None:
            raise ScriptedToolError(script.raises)
        return ToolResult(
            success=script.success,
            data=script.data,
            error=script.error,
            message=script.message,
            end_turn=script.end_turn,
            response_delivered=script.response_delivered,
            image_metadata=script.image_metadata,
        )

    return play


class ScriptedApprovals:
    """The scenario's person: each tool's `approval` decisions, one per ask (SPEC 6c).

    Records every request with how its wait ended, for simulate's `approvals`.
    """

    def __init__(self, tools: Sequence[ScriptedTool], control: MemoryTurnControl) -> None:
        self._control = control
        self._takes = {tool.name: repeating_last(tool.approval) for tool in tools if tool.approval}
        self.records: list[dict[str, Any]] = []
        self._by_call: dict[str, dict[str, Any]] = {}

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        record = self._by_call.get(request.call_id)
        if record is None:
            record = {"tool": request.tool, "call_id": request.call_id, "args": request.args}
            record["decision"] = None
            self._by_call[request.call_id] = record
            self.records.append(record)
        decision = self._takes[request.tool]()
        try:
            return await self._play(decision, request, record)
        except anyio.get_cancelled_exc_class():
            if record["decision"] is None:  # not withdrawn (a kill): nobody answered in time
                record["decision"] = "timed_out"
            raise

    async def _play(
        self, decision: ScriptedDecision, request: ApprovalRequest, record: dict[str, Any]
    ) -> ApprovalDecision:
        if decision.delay_ms:
            await anyio.sleep(decision.delay_ms / 1000)
        if decision.kind == "kill":
            self._control.kill()
        if decision.kind in ("kill", "timeout"):
            await anyio.sleep_forever()
        if decision.kind == "approve_for":
            return ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest(decision.args))
        record["decision"] = "approved" if decision.kind == "approve" else "denied"
        verdict = Verdict.APPROVE if decision.kind == "approve" else Verdict.DENY
        return ApprovalDecision(
            verdict=verdict, digest=request.digest, reason=decision.reason, by="scenario"
        )

    async def withdraw(self, request: ApprovalRequest) -> None:
        self._by_call[request.call_id]["decision"] = "withdrawn"


def scripted_ports(
    scenario: Scenario, control: ScriptedTurnControl, channel: ScriptedChannel
) -> tuple[ScriptedProvider, ToolRegistry]:
    """The provider and the registry a scenario scripts, acting on `control` and `channel`."""
    provider = ScriptedProvider(
        scenario.streams, control=control, channel=channel, descriptor=scenario.turn.provider
    )
    return provider, scripted_registry(scenario.tools, control)


def _never(_: object) -> bool:
    return False
