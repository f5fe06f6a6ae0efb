"""The interpreter and a person (SPEC 6c): the approval port, the timeout, the kill, resume.

Real `ToolRegistry`, real `MemoryApprovals`, the interpreter on trio's virtual
clock and on asyncio; a person is a task that answers the port's requests.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.effects.harness import BACKENDS, Backend, ScriptProvider, calling, completed, run_on
from toolloop.effects.approvals import MemoryApprovals, NoSuchRequest
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.resume import NotResumable, resume
from toolloop.states import (
    ApprovalDecision,
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    LoopConfig,
    StreamResult,
    ToolContext,
    TurnSettings,
    TurnStatus,
    Verdict,
    args_digest,
)
from toolloop.states.convert import from_json, to_json

SECRET = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
}


def bot() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    """A registry whose `delete_message` needs approval and records each run."""
    registry, ran = ToolRegistry(), []

    @registry.tool(parameters=SECRET, requires_approval=True)
    async def delete_message(args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        """Delete a message."""
        ran.append(args)
        return {"deleted": args["id"]}

    return registry, ran


ARGS = {"id": "m1", "token": "hunter2"}


async def answering(request: StreamRequest, sink: StreamSink) -> StreamResult:
    """A model that asks to delete, then answers from the history (as a real one would, so a
    resumed turn's provider need not know what an earlier process asked it)."""
    history = request.once.function_history
    if not history:
        return await calling("delete_message", ARGS, text="Deleting.")(request, sink)
    return await completed(json.dumps(history[-1].response))(request, sink)


async def turn(
    registry: ToolRegistry,
    approvals: MemoryApprovals | None,
    control: MemoryTurnControl | None = None,
    *,
    states: list[IterationState] | None = None,
    resume_from: IterationState | None = None,
    config: LoopConfig | None = None,
) -> GenerationTurnResult:
    provider = ScriptProvider(answering)
    return await run_tool_loop(
        turn=TurnSettings(channel_id="c9", user_id="u7"),
        config=config or LoopConfig(),
        provider=provider,
        registry=registry,
        channel=RecordingChannel(),
        control=control or MemoryTurnControl(),
        approvals=approvals,
        observer=None if states is None else (lambda before, event, out: states.append(out.state)),
        resume=resume_from,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_approved_call_runs_once_the_person_approves(backend: Backend) -> None:
    """The request names the tool, call, channel and user with the secret redacted; an
    approval runs the call with its exact arguments."""
    registry, ran = bot()
    approvals = MemoryApprovals()

    async def main() -> tuple[GenerationTurnResult, Any]:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals))

            group.start_soon(run)
            request = await approvals.next_request()
            assert ran == []  # nothing runs before the decision
            approvals.approve(request.call_id, by="u7")
        return outcome[0], request

    result, request = run_on(backend, main)
    assert (request.tool, request.channel_id, request.user_id) == ("delete_message", "c9", "u7")
    assert request.args == {"id": "m1", "token": "[redacted]"}
    assert request.digest == args_digest(ARGS)
    assert ran == [ARGS]
    assert result.status is TurnStatus.COMPLETED


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_denied_call_never_runs_and_the_model_reads_the_reason(backend: Backend) -> None:
    """A denial is a `tool_call_denied` failure with the person's words; the tool never runs."""
    registry, ran = bot()
    approvals = MemoryApprovals()
    states: list[IterationState] = []

    async def main() -> GenerationTurnResult:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals, states=states))

            group.start_soon(run)
            approvals.deny((await approvals.next_request()).call_id, "not today")
        return outcome[0]

    assert run_on(backend, main).status is TurnStatus.COMPLETED
    assert ran == []
    (entry,) = states[-1].function_history
    assert entry.function_response["response"]["result"] == {
        "status": "tool_call_denied",
        "tool_name": "delete_message",
        "reason": "A person declined this tool call: not today",
    }


def test_nobody_answering_within_the_approval_timeout_denies_the_call() -> None:
    """On the virtual clock, TOOL_APPROVAL_TIMEOUT_MS passes: the call is refused, naming it."""
    registry, ran = bot()
    approvals, states = MemoryApprovals(), []
    config = LoopConfig(tool_approval_timeout_ms=20_000)
    result = run_on("trio", lambda: turn(registry, approvals, states=states, config=config))
    assert result.status is TurnStatus.COMPLETED and ran == [] and approvals.pending() == ()
    reason = states[-1].function_history[0].function_response["response"]["result"]["reason"]
    assert reason == "Nobody approved this tool call within 20 s, so it was not run."


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kill_while_waiting_aborts_and_withdraws_the_request(backend: Backend) -> None:
    """A kill ends the wait at once: stopped_by_user, the request withdrawn, nothing run."""
    registry, ran = bot()
    approvals, control = MemoryApprovals(), MemoryTurnControl()

    async def main() -> GenerationTurnResult:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals, control))

            group.start_soon(run)
            await approvals.next_request()
            control.kill()
        return outcome[0]

    assert run_on(backend, main).status is TurnStatus.STOPPED_BY_USER
    assert ran == [] and [r.call_id for r in approvals.withdrawn] == [approvals.asked[0].call_id]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_decision_for_other_arguments_is_refused_and_the_call_asked_again(
    backend: Backend,
) -> None:
    """An approval whose digest is of other arguments does not run the call; it is asked again."""
    registry, ran = bot()
    approvals = MemoryApprovals()

    async def main() -> GenerationTurnResult:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals))

            group.start_soon(run)
            first = await approvals.next_request()
            forged = ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"id": "m2"}))
            approvals.decide(first.call_id, forged)
            await anyio.sleep(0.01)
            assert ran == []
            approvals.approve((await approvals.next_request()).call_id)
        return outcome[0]

    assert run_on(backend, main).status is TurnStatus.COMPLETED
    assert ran == [ARGS] and len(approvals.asked) == 2


def test_a_call_asked_again_after_a_refused_decision_keeps_its_first_deadline() -> None:
    """On the virtual clock: a decision for other arguments at 15 s is refused and the call
    asked again, and the wait still ends 20 s after the first ask (not 20 s after the second)."""
    registry, ran = bot()
    approvals, states = MemoryApprovals(), []
    config = LoopConfig(tool_approval_timeout_ms=20_000)

    async def main() -> tuple[GenerationTurnResult, float]:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals, states=states, config=config))

            group.start_soon(run)
            first = await approvals.next_request()
            asked_at = anyio.current_time()
            await anyio.sleep(15)
            forged = ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"id": "m2"}))
            approvals.decide(first.call_id, forged)
            await approvals.next_request()
        return outcome[0], anyio.current_time() - asked_at

    result, waited = run_on("trio", main)
    assert result.status is TurnStatus.COMPLETED and ran == [] and len(approvals.asked) == 2
    assert waited == pytest.approx(20)
    reason = states[-1].function_history[0].function_response["response"]["result"]["reason"]
    assert reason == "Nobody approved this tool call within 20 s, so it was not run."


class CountingRegistry(ToolRegistry):
    """A real registry that records each call it is asked `needs_approval` about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def needs_approval(self, call: FunctionCall, context: ToolContext) -> bool:
        self.asked.append(call.name)
        return super().needs_approval(call, context)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_approval_tool", [False, True])
def test_each_call_is_asked_about_only_when_a_tool_may_need_approval(
    backend: Backend, with_approval_tool: bool
) -> None:
    """No registered tool needs approval: `asks_approval` says so and no call is asked
    about; once one is registered, the called tool (which needs none) is asked about."""
    registry = CountingRegistry()

    @registry.tool
    async def lookup(args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        """Look up."""
        return {"found": True}

    if with_approval_tool:
        registry.register(lookup, name="delete_message", requires_approval=True)
    provider = ScriptProvider(calling("lookup"), completed())

    async def main() -> GenerationTurnResult:
        return await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=provider,
            registry=registry,
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
        )

    assert run_on(backend, main).status is TurnStatus.COMPLETED
    assert registry.asked == (["lookup"] if with_approval_tool else [])


def test_a_turn_without_an_approvals_port_fails_naming_the_tool() -> None:
    """Meeting a call that needs approval without a port is a clear error, not a hang."""
    registry, _ = bot()
    with pytest.raises(TypeError, match=r"^tool delete_message needs approval \(SPEC 6c\)"):
        run_on("trio", lambda: turn(registry, None))


def test_deciding_a_call_that_is_not_waiting_names_it_and_the_waiting_ones() -> None:
    """`approve` on an unknown call id says which calls wait."""
    with pytest.raises(
        NoSuchRequest, match=r"^no approval request waits for call 'x' \(waiting: none\)$"
    ):
        MemoryApprovals().approve("x")


def test_a_state_that_does_not_wait_cannot_be_resumed() -> None:
    """`resume` refuses a state that is not waiting for approval, saying which phase it is in."""
    from toolloop.engine.step import initial_state

    with pytest.raises(
        NotResumable, match=r"^only a turn waiting for approval can be resumed; this one is idle$"
    ):
        resume(initial_state(LoopConfig(), TurnSettings()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_waiting_turn_persisted_as_json_resumes_in_a_new_interpreter_to_the_same_result(
    backend: Backend,
) -> None:
    """The state a turn waits in round-trips through cattrs to JSON; a new interpreter (a new
    registry, port and control, as after a restart) resumes it, asks again, and the approved
    turn ends exactly as one that never stopped."""
    registry, _ = bot()
    approvals, states = MemoryApprovals(), []

    async def uninterrupted() -> GenerationTurnResult:
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(registry, approvals))

            group.start_soon(run)
            approvals.approve((await approvals.next_request()).call_id)
        return outcome[0]

    async def until_waiting() -> str:
        first = MemoryApprovals()
        with anyio.CancelScope() as process:
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: turn(bot()[0], first, states=states))
                await first.next_request()
                process.cancel()  # the process dies while the turn waits
        return json.dumps(to_json(states[-1]))

    async def resumed(persisted: str) -> GenerationTurnResult:
        state = from_json(json.loads(persisted), IterationState)
        fresh, after = bot()[0], MemoryApprovals()
        async with anyio.create_task_group() as group:
            outcome: list[GenerationTurnResult] = []

            async def run() -> None:
                outcome.append(await turn(fresh, after, resume_from=state))

            group.start_soon(run)
            request = await after.next_request()
            assert request.digest == args_digest(ARGS)
            after.approve(request.call_id)
        return outcome[0]

    expected = run_on(backend, uninterrupted)
    persisted = run_on(backend, until_waiting)
    assert from_json(json.loads(persisted), IterationState).pending is not None
    assert run_on(backend, lambda: resumed(persisted)) == expected
