"""The inspector's timeline of approval waits (SPEC 6c): asked, and how each wait ended.

A batch of three calls that need approval, answered by a task playing the person:
one approved, one denied, one approved only after a decision for other arguments
was refused; a second turn is killed while it waits. Nothing said is shown.
"""

from __future__ import annotations

from typing import Any

import anyio

from tests.effects.harness import ScriptProvider, completed, run_on
from toolloop.effects.approvals import MemoryApprovals
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.inspect import Inspector, TurnView
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    FunctionCall,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    TurnSettings,
    Verdict,
    args_digest,
)

REASON = "never on a Sunday"
TOKEN = "tok-3141"


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    schema: JsonObject = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
    }

    @tools.tool(parameters=schema, requires_approval=True)
    async def ban(args: JsonObject, call: ToolCall) -> JsonObject:
        """Ban a user (a person approves it first)."""
        return {"banned": args["id"]}

    return tools


def banning(*ids: str) -> Any:
    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        calls = tuple(
            FunctionCall(name="ban", args={"id": i, "token": TOKEN}, call_id=i) for i in ids
        )
        return StreamResult(status=StreamStatus.FUNCTION_CALL, data=calls[0], calls=calls)

    return play


async def watched(
    inspector: Inspector, ids: tuple[str, ...], approvals: MemoryApprovals, control: Any
) -> None:
    turn = TurnSettings()
    with inspector.watch(turn, channel="#mods") as view:
        await run_tool_loop(
            turn=turn,
            config=LoopConfig(),
            provider=ScriptProvider(banning(*ids), completed("Done.")),
            registry=registry(),
            channel=RecordingChannel(),
            control=control,
            approvals=approvals,
            observer=view.observer,
        )


def approval_lines(view: TurnView) -> list[str]:
    return [entry["text"] for entry in view.detail()["timeline"] if entry["kind"] == "approval"]


def test_the_timeline_shows_each_wait_asked_and_its_outcome_without_the_reason() -> None:
    inspector = Inspector()

    async def main() -> None:
        approvals = MemoryApprovals()
        async with anyio.create_task_group() as group:
            group.start_soon(watched, inspector, ("a", "b", "c"), approvals, MemoryTurnControl())
            while len(approvals.pending()) < 3:
                await anyio.sleep(0.1)
            approvals.approve("a", by="mod-1")
            await anyio.sleep(1)
            approvals.deny("b", REASON, by="mod-1")
            await anyio.sleep(1)
            other = ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"id": "z"}))
            approvals.decide("c", other)
            while "c" not in [request.call_id for request in approvals.pending()]:
                await anyio.sleep(0.1)
            approvals.approve("c")

    run_on("trio", main)
    (view,) = inspector.turns()
    assert approval_lines(view) == [
        "ban waits for approval",
        "ban waits for approval",
        "ban waits for approval",
        "ban approved",
        "ban denied",
        "ban approved for other arguments: refused",
        "ban waits for approval",
        "ban approved",
    ]
    tools = [e["text"] for e in view.detail()["timeline"] if e["kind"] == "tool"]
    assert tools == ["ban started", "ban succeeded in 0 ms", "ban started", "ban succeeded in 0 ms"]
    shown = str(view.detail())
    assert REASON not in shown and "mod-1" not in shown and TOKEN not in shown


def test_a_wait_ended_by_the_timeout_or_a_kill_is_shown_expired_or_withdrawn() -> None:
    inspector = Inspector()

    async def main() -> None:
        approvals, control = MemoryApprovals(), MemoryTurnControl()
        await watched(inspector, ("late",), MemoryApprovals(), MemoryTurnControl())
        async with anyio.create_task_group() as group:
            group.start_soon(watched, inspector, ("killed",), approvals, control)
            await approvals.next_request()
            control.kill()

    run_on("trio", main)
    expired, killed = inspector.turns()
    assert approval_lines(expired) == ["ban waits for approval", "ban expired"]
    assert approval_lines(killed) == ["ban waits for approval", "ban withdrawn"]
    assert killed.status == "stopped_by_user"
