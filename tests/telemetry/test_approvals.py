"""Approval waits (SPEC 6c) in telemetry: host events, tool-span events, the wait histogram.

A real `ToolRegistry` whose tool needs approval, a real `MemoryApprovals` answered
by a task playing the person, the SDK's in-memory exporter and metric reader.
Turns run on trio's virtual clock, so a wait's recorded duration is exact.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from tests.effects.harness import ScriptProvider, completed, run_on
from tests.telemetry.sdk import Recorded
from toolloop.effects.approvals import MemoryApprovals
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalExpired,
    ApprovalWithdrawn,
    HostEvent,
)
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
    Verdict,
    args_digest,
)

TOKEN = "hunter2-approval-token"
ARGS: JsonObject = {"id": "m1", "token": TOKEN}
SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
}
TURN = TurnSettings(channel_id="c9", user_id="u7")
CONFIG = LoopConfig(tool_approval_timeout_ms=300_000)
Person = Callable[[MemoryApprovals, MemoryTurnControl], Awaitable[None]]


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(parameters=SCHEMA, requires_approval=True)
    async def delete_message(args: JsonObject, call: ToolCall) -> JsonObject:
        """Delete a message (a person approves it first)."""
        return {"deleted": args["id"]}

    return tools


def deleting(*ids: str, in_passthrough: bool = False) -> Any:
    """A model that asks to delete one message per call id, in one reply.

    `in_passthrough`: the ids only in each call's passthrough, as a provider of
    one's own may give them (`call_id` left empty)."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        calls = tuple(
            FunctionCall(
                name="delete_message",
                args={**ARGS, "id": f"m-{i}"},
                call_id="" if in_passthrough else i,
                passthrough={"id": i} if in_passthrough else {},
            )
            for i in ids
        )
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=calls[0], calls=calls)

    return play


class Run:
    """One turn under telemetry, with the host events it showed, and a person acting."""

    def __init__(
        self,
        person: Person,
        *ids: str,
        capture: bool = False,
        resume: IterationState | None = None,
        in_passthrough: bool = False,
    ) -> None:
        self._in_passthrough = in_passthrough
        self.recorded = Recorded(capture_content=capture)
        self.events: list[HostEvent] = []
        self.result: GenerationTurnResult = run_on("trio", lambda: self._main(person, ids, resume))

    async def _main(
        self, person: Person, ids: tuple[str, ...], resume: IterationState | None
    ) -> GenerationTurnResult:
        approvals, control = MemoryApprovals(), MemoryTurnControl()
        turn = TURN
        outcome: list[GenerationTurnResult] = []
        asking = deleting(*ids, in_passthrough=self._in_passthrough)
        scripts = (completed("Done."),) if resume else (asking, completed("Done."))

        def shown(event: HostEvent) -> None:
            self.events.append(event)
            assert trace.on_event is not None
            trace.on_event(event)

        async def run() -> None:
            outcome.append(
                await run_tool_loop(
                    turn=turn,
                    config=CONFIG,
                    provider=ScriptProvider(*scripts),
                    registry=registry(),
                    channel=RecordingChannel(),
                    control=control,
                    approvals=approvals,
                    observer=trace.observer,
                    on_event=shown,
                    resume=resume,
                )
            )

        with self.recorded.telemetry.turn(turn) as trace:
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await person(approvals, control)
        return outcome[0]

    def tools(self) -> list[ReadableSpan]:
        return self.recorded.named("execute_tool")

    def approval_events(self, span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
        return [
            (event.name, dict(event.attributes or {}))
            for event in span.events
            if event.name.startswith("toolloop.approval.")
        ]

    def waits(self) -> list[tuple[str, float]]:
        """(outcome, seconds) of each wait recorded by the histogram."""
        return sorted(
            (point.attributes["toolloop.approval.outcome"], point.sum)
            for point in self.recorded.points("toolloop.approval.wait.duration")
        )


def approving(after: float) -> Person:
    async def person(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        request = await approvals.next_request()
        await anyio.sleep(after)
        approvals.approve(request.call_id, by="moderator-1")

    return person


def test_an_approved_call_has_one_tool_span_with_its_wait_and_its_run() -> None:
    """The span opens at the ask, carries asked then answered, and ends after the run."""
    run = Run(approving(after=42), "c1")
    assert run.result.status is TurnStatus.COMPLETED
    (tool,) = run.tools()
    attributes = tool.attributes or {}
    assert attributes["gen_ai.tool.call.id"] == "c1"
    assert attributes["toolloop.tool.outcome"] == "success"
    assert run.approval_events(tool) == [
        ("toolloop.approval.asked", {"toolloop.approval.timeout_ms": 300_000}),
        (
            "toolloop.approval.answered",
            {"toolloop.approval.verdict": "approve", "toolloop.approval.accepted": True},
        ),
    ]
    assert run.waits() == [("approved", 42.0)]
    asked, answered = (e for e in run.events if isinstance(e, ApprovalAsked | ApprovalAnswered))
    assert isinstance(asked, ApprovalAsked) and isinstance(answered, ApprovalAnswered)
    assert (asked.name, asked.call_id, asked.args) == (
        "delete_message",
        "c1",
        {"id": "m-c1", "token": "[redacted]"},
    )
    assert (answered.verdict, answered.accepted, answered.by) == (
        Verdict.APPROVE,
        True,
        "moderator-1",
    )


def test_an_approved_call_whose_id_is_only_in_its_passthrough_has_it_on_its_span() -> None:
    """The span its ask opened did not know the id; the run's start gives it."""
    run = Run(approving(after=1), "c1", in_passthrough=True)
    (tool,) = run.tools()
    attributes = tool.attributes or {}
    assert attributes["gen_ai.tool.call.id"] == "c1"
    assert attributes["toolloop.tool.outcome"] == "success"


def test_a_denied_call_ends_its_span_as_denied_and_records_no_reason_without_the_opt_in() -> None:
    async def person(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        request = await approvals.next_request()
        await anyio.sleep(5)
        approvals.deny(request.call_id, f"not with {TOKEN}", by="moderator-1")

    run = Run(person, "c1")
    (tool,) = run.tools()
    attributes = tool.attributes or {}
    assert (attributes["toolloop.tool.outcome"], attributes["error.type"]) == ("denied", "denied")
    assert tool.status.status_code is StatusCode.ERROR
    (_, (name, answered)) = run.approval_events(tool)
    assert name == "toolloop.approval.answered"
    assert answered["toolloop.approval.verdict"] == "deny"
    assert "toolloop.approval.reason" not in answered and "toolloop.approval.by" not in answered
    assert run.waits() == [("denied", 5.0)]


def test_with_the_opt_in_the_denial_reason_is_recorded_with_the_calls_secret_cut_out() -> None:
    """The person repeated the call's writeOnly token in the reason: it is redacted."""

    async def person(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        approvals.deny((await approvals.next_request()).call_id, f"not with {TOKEN}", by="mod")

    run = Run(person, "c1", capture=True)
    (tool,) = run.tools()
    (_, (_, answered)) = run.approval_events(tool)
    assert answered["toolloop.approval.reason"] == "not with [redacted]"
    assert answered["toolloop.approval.by"] == "mod"
    assert '"token": "[redacted]"' in str((tool.attributes or {})["gen_ai.tool.call.arguments"])


def test_an_unanswered_call_expires_after_the_approval_timeout() -> None:
    async def nobody(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        await approvals.next_request()

    run = Run(nobody, "c1")
    (tool,) = run.tools()
    assert (tool.attributes or {})["toolloop.tool.outcome"] == "expired"
    assert [name for name, _ in run.approval_events(tool)] == [
        "toolloop.approval.asked",
        "toolloop.approval.expired",
    ]
    assert run.waits() == [("expired", 300.0)]
    assert any(isinstance(event, ApprovalExpired) for event in run.events)


def test_a_kill_while_waiting_withdraws_and_ends_the_span_as_withdrawn() -> None:
    async def killer(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        await approvals.next_request()
        await anyio.sleep(7)
        control.kill()

    run = Run(killer, "c1")
    assert run.result.status is TurnStatus.STOPPED_BY_USER
    (tool,) = run.tools()
    assert (tool.attributes or {})["toolloop.tool.outcome"] == "withdrawn"
    assert [name for name, _ in run.approval_events(tool)][-1] == "toolloop.approval.withdrawn"
    assert run.waits() == [("withdrawn", 7.0)]
    (withdrawn,) = [event for event in run.events if isinstance(event, ApprovalWithdrawn)]
    assert withdrawn.call_id == "c1"
    assert not any(isinstance(event, ApprovalExpired | ApprovalAnswered) for event in run.events)


def test_a_decision_for_other_arguments_keeps_the_wait_open_and_the_call_is_asked_again() -> None:
    """One span and one wait: asked, answered (not accepted), asked again, answered."""

    async def person(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        first = await approvals.next_request()
        await anyio.sleep(3)
        forged = ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"id": "m2"}))
        approvals.decide(first.call_id, forged)
        again = await approvals.next_request()
        await anyio.sleep(4)
        approvals.approve(again.call_id)

    run = Run(person, "c1")
    (tool,) = run.tools()
    events = run.approval_events(tool)
    assert [(name, attrs.get("toolloop.approval.accepted")) for name, attrs in events] == [
        ("toolloop.approval.asked", None),
        ("toolloop.approval.answered", False),
        ("toolloop.approval.asked", None),
        ("toolloop.approval.answered", True),
    ]
    assert (tool.attributes or {})["toolloop.tool.outcome"] == "success"
    assert run.waits() == [("approved", 7.0)]


def test_the_calls_of_a_batch_wait_in_sibling_spans_each_with_its_own_outcome() -> None:
    async def person(approvals: MemoryApprovals, control: MemoryTurnControl) -> None:
        while len(approvals.pending()) < 2:
            await anyio.sleep(0.5)  # the model's reply came at 0: both are asked by 0.5
        approvals.approve("a", by="mod")
        await anyio.sleep(2)
        approvals.deny("b", "no", by="mod")

    run = Run(person, "a", "b")
    turn = run.recorded.turn_span()
    spans = {(span.attributes or {})["gen_ai.tool.call.id"]: span for span in run.tools()}
    assert {
        key: (span.attributes or {})["toolloop.tool.outcome"] for key, span in spans.items()
    } == {
        "a": "success",
        "b": "denied",
    }
    assert {span.parent.span_id for span in spans.values() if span.parent} == {turn.context.span_id}
    assert run.waits() == [("approved", 0.5), ("denied", 2.5)]
    ended = [type(event).__name__ for event in run.events if "Approval" in type(event).__name__]
    assert ended == ["ApprovalAsked", "ApprovalAsked", "ApprovalAnswered", "ApprovalAnswered"]


@pytest.mark.parametrize("capture", [False, True])
def test_the_histogram_names_the_tool_with_each_wait(capture: bool) -> None:
    run = Run(approving(after=1), "c1", capture=capture)
    (point,) = run.recorded.points("toolloop.approval.wait.duration")
    assert dict(point.attributes) == {
        "gen_ai.tool.name": "delete_message",
        "toolloop.approval.outcome": "approved",
    }


def waiting_state() -> IterationState:
    """The state of a turn waiting for approval of call c1, as a process that died kept it."""
    states: list[IterationState] = []

    async def until_asked() -> None:
        approvals = MemoryApprovals()
        with anyio.CancelScope() as process:
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: run_tool_loop(
                        turn=TURN,
                        config=CONFIG,
                        provider=ScriptProvider(deleting("c1")),
                        registry=registry(),
                        channel=RecordingChannel(),
                        control=MemoryTurnControl(),
                        approvals=approvals,
                        observer=lambda before, event, out: states.append(out.state),
                    )
                )
                await approvals.next_request()
                process.cancel()

    run_on("trio", until_asked)
    return states[-1]


def test_a_resumed_wait_is_asked_again_as_a_host_event_and_traced_like_any_other() -> None:
    """A turn resumed from its persisted wait: the host sees the ask again, the new process's
    trace has the call's span with the ask, the answer and the run, then its chat span."""
    run = Run(approving(after=6), resume=waiting_state())
    assert run.result.status is TurnStatus.COMPLETED
    asked = [event for event in run.events if isinstance(event, ApprovalAsked)]
    assert [(event.call_id, event.args) for event in asked] == [
        ("c1", {"id": "m-c1", "token": "[redacted]"})
    ]
    (tool,) = run.tools()
    assert [name for name, _ in run.approval_events(tool)] == [
        "toolloop.approval.asked",
        "toolloop.approval.answered",
    ]
    assert (tool.attributes or {})["toolloop.tool.outcome"] == "success"
    assert run.waits() == [("approved", 6.0)]
    assert [span.name for span in run.recorded.named("chat ")] == ["chat custom"]
