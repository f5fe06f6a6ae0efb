"""Resume while a call waits for a person's approval (SPEC 6c): the wait is journaled and replayed.

The turn: the model says "Deleting." and asks for `delete_message`, which needs
approval; once the call is answered it says "Done.". The process dies (a
cancellation of everything running, the journal left as a `kill -9` leaves it;
tests/durable/test_kill9.py kills for real) while the call waits, or right
before or after the decision is journaled; the restarted process resumes the
turn with fresh ports, its own approvals port among them, where a person
decides again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.durable.crash import CrashingJournal, When
from tests.effects.harness import ScriptProvider, run_on
from toolloop.durable import Journal, TurnPorts, resume, run_journaled
from toolloop.effects.approvals import MemoryApprovals
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import NoApprovalsPort
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    ApprovalRequest,
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    StreamResult,
    StreamStatus,
    TurnSettings,
    TurnStatus,
    Verdict,
    args_digest,
)

pytestmark = pytest.mark.anyio

ARGS: JsonObject = {"id": "m1", "token": "hunter2"}
DELETE = FunctionCall(name="delete_message", args=ARGS, call_id="c_delete")
PRICE = FunctionCall(name="price", args={}, call_id="c_price")
SECRET: JsonObject = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
}
TURN = TurnSettings(channel_id="c9", user_id="u7")
CONFIG = LoopConfig(tool_approval_timeout_ms=20_000)
Person = Callable[[MemoryApprovals], Awaitable[None]]


class World:
    """What outlives the bot's process: the channel, the model, each tool's runs.

    `talks`: the model says "Deleting." and "Done." (the virtual-clock tests use
    a silent one). `batch`: it asks for `price` (no approval) beside the delete.
    """

    def __init__(self, *, talks: bool = True, batch: bool = False) -> None:
        self.channel = RecordingChannel()
        self.runs: dict[str, list[JsonObject]] = {"delete_message": [], "price": []}
        self.talks, self.batch = talks, batch
        self.provider = ScriptProvider(self.model)
        self.control = MemoryTurnControl()

    async def model(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        answered = bool(request.once.function_history)
        text = ("Done." if answered else "Deleting.") if self.talks else ""
        if text:
            sink.progress()
            await sink.deliver(text)
        if answered:
            return StreamResult(status=StreamStatus.COMPLETED, accumulated_text=text)
        calls = (PRICE, DELETE) if self.batch else ()
        return StreamResult(
            status=StreamStatus.FUNCTION_CALL,
            accumulated_text=text,
            data=calls[0] if calls else DELETE,
            calls=calls,
        )

    def ports(self, approvals: MemoryApprovals | None, *, idempotent: bool = False) -> TurnPorts:
        """A process's ports: a fresh registry and turn control, the same world."""
        registry = ToolRegistry()

        async def delete_message(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["delete_message"].append(args)
            return {"deleted": args["id"]}

        async def price(args: JsonObject, call: ToolCall) -> JsonObject:
            self.runs["price"].append(args)
            return {"eur": 120}

        registry.register(
            delete_message, parameters=SECRET, requires_approval=True, idempotent=idempotent
        )
        registry.register(price, parameters={"type": "object"})
        self.control = MemoryTurnControl()
        return TurnPorts(
            provider=self.provider,
            registry=registry,
            channel=self.channel,
            control=self.control,
            approvals=approvals,
        )

    def told(self) -> list[JsonObject]:
        """What the model was told about each call, in its order, in the last request."""
        return [entry.response for entry in self.provider.requests[-1].once.function_history]


async def approving(approvals: MemoryApprovals) -> None:
    """A person who approves every request as it comes."""
    while True:
        approvals.approve((await approvals.next_request()).call_id, by="u7")


async def silent(approvals: MemoryApprovals) -> None:
    """A person who is away."""
    await anyio.sleep_forever()


async def first_process(
    path: Path,
    world: World,
    person: Person,
    *,
    crash_at: int | None = None,
    when: When = "after",
    dies: Callable[[MemoryApprovals], Awaitable[None]] | None = None,
) -> CrashingJournal:
    """The turn journaled in a process that dies at write `crash_at`, or once `dies` returns."""
    approvals = MemoryApprovals()
    journal = await CrashingJournal.open(path)
    journal.crash_at, journal.when = crash_at, when
    with anyio.CancelScope() as journal.scope:
        async with anyio.create_task_group() as group:
            group.start_soon(person, approvals)
            if dies is not None:

                async def die() -> None:
                    await dies(approvals)
                    assert journal.scope is not None
                    journal.scope.cancel()  # the process dies

                group.start_soon(die)
            await _journaled(journal, world, approvals)
            group.cancel_scope.cancel()
    await journal.close()
    assert journal.scope.cancelled_caught, "the first process did not die"
    return journal


async def _journaled(journal: Journal, world: World, approvals: MemoryApprovals) -> None:
    await run_journaled(journal, "t", turn=TURN, config=CONFIG, ports=world.ports(approvals))


async def restarted(
    path: Path, world: World, person: Person, *, idempotent: bool = False, port: bool = True
) -> tuple[GenerationTurnResult | Exception | None, MemoryApprovals]:
    """The restarted process: the journal resumed with fresh ports and a fresh approvals port."""
    approvals = MemoryApprovals()
    async with await Journal.open(path) as journal:
        async with anyio.create_task_group() as group:
            group.start_soon(person, approvals)
            ports = world.ports(approvals if port else None, idempotent=idempotent)
            [outcome] = (await resume(journal, lambda _: ports)).values()
            group.cancel_scope.cancel()
        assert await journal.unfinished() == []
    return outcome, approvals


async def asked(approvals: MemoryApprovals) -> None:
    """Returns once the call waits for a person."""
    await approvals.next_request()


def expected_request() -> ApprovalRequest:
    return ApprovalRequest(
        tool="delete_message",
        call_id="c_delete",
        args={"id": "m1", "token": "[redacted]"},
        channel_id="c9",
        user_id="u7",
        digest=args_digest(ARGS),
    )


async def test_a_turn_killed_while_a_call_waits_asks_again_and_a_later_approval_runs_it(
    tmp_path: Path,
) -> None:
    """Died while delete_message waited: the restart asks the new port the same request (tool,
    call id, redacted arguments, digest); the approval given there runs the call once, and
    the channel shows each piece of text once."""
    world = World()
    await first_process(tmp_path / "j.db", world, silent, dies=asked)
    assert world.runs["delete_message"] == []
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert approvals.asked == [expected_request()]
    assert world.runs["delete_message"] == [ARGS]
    assert world.told() == [{"deleted": "m1"}]
    assert world.channel.texts == ["Deleting.", "Done."]


async def test_a_denial_after_the_restart_never_runs_the_call(tmp_path: Path) -> None:
    """The person denies the call asked again after the restart: it never runs, and the model
    reads the person's reason."""
    world = World()
    await first_process(tmp_path / "j.db", world, silent, dies=asked)

    async def denying(approvals: MemoryApprovals) -> None:
        approvals.deny((await approvals.next_request()).call_id, "not now")

    outcome, _ = await restarted(tmp_path / "j.db", world, denying)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert world.runs["delete_message"] == []
    [told] = world.told()
    assert told["reason"] == "A person declined this tool call: not now"


def test_the_wait_asked_again_after_the_restart_has_a_fresh_timeout() -> None:
    """On the virtual clock: 15 s of the 20 s timeout passed before the process died; an
    approval 15 s after the restart (30 s after the first ask) still runs the call."""

    async def main() -> tuple[Any, MemoryApprovals, World]:
        world = World(talks=False)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "j.db"

            async def fifteen_seconds(approvals: MemoryApprovals) -> None:
                await approvals.next_request()
                await anyio.sleep(15)

            await first_process(path, world, silent, dies=fifteen_seconds)

            async def late(approvals: MemoryApprovals) -> None:
                request = await approvals.next_request()
                await anyio.sleep(15)
                approvals.approve(request.call_id)

            outcome, approvals = await restarted(path, world, late)
        return outcome, approvals, world

    outcome, approvals, world = run_on("trio", main)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert len(approvals.asked) == 1
    assert world.runs["delete_message"] == [ARGS]


def test_nobody_answering_after_the_restart_refuses_the_call_a_full_timeout_later() -> None:
    """On the virtual clock: the wait asked again ends unanswered 20 s after the restart (not 5 s,
    as the first process's timer would have), the call refused and not run."""

    async def main() -> tuple[Any, float, World]:
        world = World(talks=False)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "j.db"

            async def fifteen_seconds(approvals: MemoryApprovals) -> None:
                await approvals.next_request()
                await anyio.sleep(15)

            await first_process(path, world, silent, dies=fifteen_seconds)
            began = anyio.current_time()
            outcome, _ = await restarted(path, world, silent)
        return outcome, anyio.current_time() - began, world

    outcome, waited, world = run_on("trio", main)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert waited >= 20
    assert world.runs["delete_message"] == []
    [told] = world.told()
    assert told["reason"] == "Nobody approved this tool call within 20 s, so it was not run."


#: The batch's writes: TurnStarted (0), StreamEnded (1), price's ToolSettled (2), ...
PRICE_SETTLED = 2


async def test_a_call_settled_beside_a_waiting_one_is_kept_and_the_waiting_one_asked_again(
    tmp_path: Path,
) -> None:
    """A batch of price (no approval) and delete_message: died once price's outcome was
    journaled while the delete waited. price is not run again and keeps its result; the
    delete is asked again and runs once approved."""
    world = World(talks=False, batch=True)
    await first_process(tmp_path / "j.db", world, silent, crash_at=PRICE_SETTLED)
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert [request.tool for request in approvals.asked] == ["delete_message"]
    assert world.runs == {"price": [{}], "delete_message": [ARGS]}
    assert world.told() == [{"eur": 120}, {"deleted": "m1"}]


#: The turn's writes: TurnStarted (0), "Deleting." (1), StreamEnded (2), ApprovalDecided (3).
DECIDED = 3


async def test_a_decision_lost_before_its_commit_is_asked_for_again(tmp_path: Path) -> None:
    """Died right before the approval's ApprovalDecided was committed: the restart does not
    know of it, asks again, and the call runs once, approved after the restart."""
    world = World()
    await first_process(tmp_path / "j.db", world, approving, crash_at=DECIDED, when="before")
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert approvals.asked == [expected_request()]
    assert world.runs["delete_message"] == [ARGS]
    assert world.channel.texts == ["Deleting.", "Done."]


@pytest.mark.parametrize(("idempotent", "runs"), [(False, 0), (True, 1)])
async def test_an_approval_journaled_before_the_death_is_not_asked_for_again(
    tmp_path: Path, idempotent: bool, runs: int
) -> None:
    """Died right after the approval was committed: nobody is asked again. The approved call
    counts as in flight: it runs again only when idempotent, else the model is told it was
    interrupted and may have run."""
    world = World()
    await first_process(tmp_path / "j.db", world, approving, crash_at=DECIDED)
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving, idempotent=idempotent)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert approvals.asked == []
    assert len(world.runs["delete_message"]) == runs
    [told] = world.told()
    if idempotent:
        assert told == {"deleted": "m1"}
    else:
        assert "interrupted by a restart of the bot and may have run" in told["reason"]


async def test_a_denial_journaled_before_the_death_stands(tmp_path: Path) -> None:
    """Died right after a denial was committed: nobody is asked again, the call never runs,
    and the model reads the first person's reason."""
    world = World()

    async def denying(approvals: MemoryApprovals) -> None:
        approvals.deny((await approvals.next_request()).call_id, "never")

    await first_process(tmp_path / "j.db", world, denying, crash_at=DECIDED)
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert approvals.asked == [] and world.runs["delete_message"] == []
    [told] = world.told()
    assert told["reason"] == "A person declined this tool call: never"


async def test_a_refused_decision_journaled_before_the_death_is_asked_again(
    tmp_path: Path,
) -> None:
    """Died right after a decision for other arguments was committed (refused): the restart
    asks again, and the approval given there runs the call with its own arguments."""
    world = World()

    async def forging(approvals: MemoryApprovals) -> None:
        request = await approvals.next_request()
        forged = ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest({"id": "m2"}))
        approvals.decide(request.call_id, forged)

    await first_process(tmp_path / "j.db", world, forging, crash_at=DECIDED)
    outcome, approvals = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert approvals.asked == [expected_request()]
    assert world.runs["delete_message"] == [ARGS]


async def test_a_kill_after_the_restart_withdraws_the_request_from_the_new_port(
    tmp_path: Path,
) -> None:
    """The user kills the resumed turn while the call waits again: the turn stops, the request
    is withdrawn through the restarted process's port, the call never runs."""
    world = World()
    await first_process(tmp_path / "j.db", world, silent, dies=asked)

    async def killing(approvals: MemoryApprovals) -> None:
        await approvals.next_request()
        world.control.kill()
        await anyio.sleep_forever()

    outcome, approvals = await restarted(tmp_path / "j.db", world, killing)
    assert isinstance(outcome, GenerationTurnResult)
    assert outcome.status is TurnStatus.STOPPED_BY_USER
    assert approvals.withdrawn == [expected_request()]
    assert world.runs["delete_message"] == []


async def test_resuming_a_waiting_turn_without_an_approvals_port_names_the_tool(
    tmp_path: Path,
) -> None:
    """The restarted bot passed no approvals port: the turn's outcome is NoApprovalsPort naming
    the tool, not a hang."""
    world = World()
    await first_process(tmp_path / "j.db", world, silent, dies=asked)
    outcome, _ = await restarted(tmp_path / "j.db", world, silent, port=False)
    assert isinstance(outcome, NoApprovalsPort)
    assert str(outcome).startswith("tool delete_message needs approval (SPEC 6c)")


WHOLE_RUN = ("event", "text", "event", "event", "event", "text", "event")
"""TurnStarted, "Deleting.", StreamEnded, ApprovalDecided, ToolSettled, "Done.", StreamEnded."""


async def test_an_approved_turn_writes_each_event_and_each_piece_of_text(tmp_path: Path) -> None:
    """Uncrashed, the approved turn journals its 5 events and 2 pieces of text, in order."""
    world = World()
    journal = await CrashingJournal.open(tmp_path / "j.db")
    async with anyio.create_task_group() as group:
        approvals = MemoryApprovals()
        group.start_soon(approving, approvals)
        await _journaled(journal, world, approvals)
        group.cancel_scope.cancel()
    await journal.close()
    assert tuple(journal.kinds) == WHOLE_RUN


@pytest.mark.parametrize(
    ("crash_at", "when"),
    [
        (n, when)
        for n, kind in enumerate(WHOLE_RUN)
        for when in ("before", "after")
        if kind == "event" or when == "after"
    ],
)
async def test_a_crash_at_any_write_of_an_approved_turn_shows_each_text_once(
    tmp_path: Path, crash_at: int, when: When
) -> None:
    """Crashed before or after each event's write, or after a piece of text was written, the
    turn approved on both sides of the restart completes: each piece of text shown once, the
    delete run at most once, and never without an approval."""
    world = World()
    await first_process(tmp_path / "j.db", world, approving, crash_at=crash_at, when=when)
    outcome, _ = await restarted(tmp_path / "j.db", world, approving)
    assert isinstance(outcome, GenerationTurnResult) and outcome.status is TurnStatus.COMPLETED
    assert world.channel.texts == ["Deleting.", "Done."]
    assert len(world.runs["delete_message"]) <= 1
