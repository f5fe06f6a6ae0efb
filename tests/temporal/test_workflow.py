"""A turn as a workflow on the dev server: the same outcome as the in-process interpreter."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.openai_server import OpenAIServer, Reply, stream_reply, text_reply, tool_call_reply
from tests.temporal.world import World, run, serving, start
from toolloop.states import (
    ApprovalDecision,
    GenerationTurnResult,
    LoopConfig,
    TurnSettings,
    TurnStatus,
    Verdict,
)
from toolloop.temporal import Decision, TurnInput, TurnWorkflow, Waiting

pytestmark = pytest.mark.anyio


async def test_a_turn_with_a_tool_completes_through_the_workflow(
    temporal: str, server: OpenAIServer
) -> None:
    """The model calls `lookup`, the activity runs it once, the model answers from its result;
    the channel shows both streams' text once and the result is `completed`."""
    server.script(
        tool_call_reply("lookup", {"cents": 5}, text="Looking. "),
        text_reply("Found ", "it."),
    )
    world = World(server)
    result = await run(temporal, world)
    assert isinstance(result, GenerationTurnResult)
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == ["lookup"]
    assert "".join(world.channel.texts) == "Looking. Found it."
    assert len(server.requests) == 2


def two_calls(first: str, second: str) -> Reply:
    """One reply asking for two calls at once: a batch (SPEC 6b)."""
    deltas = [
        {
            "tool_calls": [
                {
                    "index": n,
                    "id": f"c{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": '{"cents": 1}'},
                }
            ]
        }
        for n, name in enumerate((first, second))
    ]
    return stream_reply(*deltas, finish_reason="tool_calls")


async def test_a_batch_runs_its_calls_side_by_side_and_reports_each(
    temporal: str, server: OpenAIServer
) -> None:
    """Two calls of one reply run as two activities at once: `slow` waits until `lookup`
    has run, which only a concurrent run allows; both results reach the model."""
    server.script(two_calls("slow", "lookup"), text_reply("Both done."))
    world = World(server)

    async def release_after_lookup() -> None:
        while "lookup" not in world.runs:
            await anyio.sleep(0.05)
        world.release.set()

    async with anyio.create_task_group() as group:
        group.start_soon(release_after_lookup)
        result = await run(temporal, world)
    assert result.status is TurnStatus.COMPLETED
    assert sorted(world.runs) == ["lookup", "slow"]
    responses = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(responses) == 2


async def test_the_kill_signal_ends_a_running_tool_and_the_turn(
    temporal: str, server: OpenAIServer
) -> None:
    """`kill` while `slow` runs: the tool's activity is cancelled, the turn ends stopped by
    the user, and the model is not called again."""
    server.script(tool_call_reply("slow", {"cents": 1}))
    world = World(server)
    async with serving(temporal, world) as (client, queue):
        handle = await start(client, queue)
        await world.started.wait()
        await handle.signal(TurnWorkflow.kill)
        result = await handle.result()
    assert result.status is TurnStatus.STOPPED_BY_USER
    assert world.runs == ["slow"]
    assert len(server.requests) == 1


async def test_a_follow_up_ends_a_stream_before_the_chain_with_its_text(
    temporal: str, server: OpenAIServer
) -> None:
    """A follow-up signal while the model is silent mid-reply: the stream activity is
    cancelled and the turn ends `follow_up_interrupt`, the text already shown kept."""
    server.script(text_reply("Hello ", "there").stalled_after(2))
    world = World(server)
    async with serving(temporal, world) as (client, queue):
        handle = await start(client, queue)
        while world.channel.texts != ["Hello "]:
            await anyio.sleep(0.05)
        await handle.signal(TurnWorkflow.follow_up)
        result = await handle.result()
    assert result.status is TurnStatus.FOLLOW_UP_INTERRUPT
    assert result.stream_results[-1].accumulated_text == "Hello "


async def test_a_silent_stream_under_suppressed_user_errors_ends_timeout_without_a_notice(
    temporal: str, server: OpenAIServer
) -> None:
    """As `test_a_silent_stream_ends_timeout_with_the_inactivity_notice`, for a turn that
    suppresses user errors: the workflow's step (which decides the notice) sends none."""
    server.script(text_reply("Hello ", "there").stalled_after(2))
    world = World(server)
    config = LoopConfig(stream_sdk_call_timeout_ms=1000)
    given = TurnInput(turn=TurnSettings(suppress_user_errors=True), config=config)
    result = await run(temporal, world, given)
    assert result.status is TurnStatus.TIMEOUT
    assert world.channel.texts == ["Hello "]
    assert world.channel.every_notice == []


async def test_a_call_that_needs_approval_runs_once_a_person_decides(
    temporal: str, server: OpenAIServer
) -> None:
    """`charge` needs approval: the `approvals` query shows the waiting call (the worker has
    no approvals port), the `decide` update approves it with its digest, and it runs once."""
    server.script(tool_call_reply("charge", {"cents": 500}), text_reply("Charged."))
    world = World(server)
    async with serving(temporal, world) as (client, queue):
        handle = await start(client, queue)
        waiting: list[Waiting] = []
        while not waiting:
            waiting = await handle.query(TurnWorkflow.approvals)
        [wait] = waiting
        assert wait.request.tool == "charge" and world.runs == []
        decision = ApprovalDecision(verdict=Verdict.APPROVE, digest=wait.request.digest)
        await handle.execute_update(
            TurnWorkflow.decide, Decision(index=wait.index, decision=decision)
        )
        result = await handle.result()
        state = await handle.query(TurnWorkflow.state)
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == ["charge"]
    assert state is not None and state.iteration == 1


async def test_a_tool_past_its_own_timeout_fails_as_timed_out(
    temporal: str, server: OpenAIServer
) -> None:
    """`brief` (timeout 0.5 s) never returns: its activity's start-to-close timeout ends it
    and the model reads the interpreter's timed-out failure."""
    server.script(tool_call_reply("brief", {"cents": 1}), text_reply("Too slow."))
    world = World(server)
    result = await run(temporal, world)
    assert result.status is TurnStatus.COMPLETED
    [response] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "timed out after 0.5 s" in response["content"]


async def test_a_huge_tool_result_is_cut_to_the_result_limit(
    temporal: str, server: OpenAIServer
) -> None:
    """`huge` returns 100,000 characters: the history and the model get at most
    `result_limit` of them, with how much was cut."""
    server.script(tool_call_reply("huge", {"cents": 1}), text_reply("Big."))
    world = World(server)
    result = await run(temporal, world, TurnInput(turn=TurnSettings(), result_limit=1000))
    assert result.status is TurnStatus.COMPLETED
    [response] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "characters cut]" in response["content"]
    assert len(response["content"]) < 1500


async def test_a_silent_stream_ends_timeout_with_the_inactivity_notice(
    temporal: str, server: OpenAIServer
) -> None:
    """The model goes silent after "Half a sen": the activity's rolling inactivity timeout
    (1 s here) ends the call; the turn ends `timeout` with the text shown and one
    `stream_inactivity_timeout` notice naming the seconds."""
    server.script(text_reply("Half a sen", "tence.").stalled_after(2))
    world = World(server)
    config = LoopConfig(stream_sdk_call_timeout_ms=1000)
    result = await run(temporal, world, TurnInput(turn=TurnSettings(), config=config))
    assert result.status is TurnStatus.TIMEOUT
    assert world.channel.texts == ["Half a sen"]
    [notice] = world.channel.notices
    assert notice.key == "stream_inactivity_timeout"
    assert "1 s" in notice.text
    assert result.stream_results[-1].accumulated_text == "Half a sen"


async def test_a_restart_takes_its_stashed_item_through_the_stash_activity(
    temporal: str, server: OpenAIServer
) -> None:
    """`video` stashes a transcript and asks for a restart with its key: the `take_stash`
    activity takes it from the worker's stash, the next call's context carries it, and the
    stash no longer holds it."""
    server.script(tool_call_reply("video", {"cents": 1}), text_reply("Seen it."))
    world = World(server)
    result = await run(temporal, world)
    assert result.status is TurnStatus.COMPLETED
    assert world.runs == ["video"]
    assert len(server.requests) == 2
    assert "TRANSCRIPT-7" in json.dumps(server.requests[1].body["messages"])
    assert "TRANSCRIPT-7" not in json.dumps(server.requests[0].body["messages"])
    assert len(world.stash) == 0
