"""`kill -9` of a worker process in the middle of a streamed reply, of a tool, and while an
approval waits: the turn goes on on another worker process.

The model server (loopback, in this test's process) and the world the workers
act on (their channel and their tools' effects: files, flushed at once) outlive
a worker. The channel ends with each piece of text once; a tool that may have
run is not run again; a completed tool is not run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import WorkflowHandle

from tests.durable.bot import DIE_AFTER
from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from toolloop.effects.temporal.workflow import WORKER_LOSSES
from toolloop.states import ApprovalDecision, LoopConfig, TurnSettings, TurnStatus, Verdict
from toolloop.temporal import Decision, TurnInput, TurnWorkflow, connect, start_turn

pytestmark = pytest.mark.anyio

#: A hang guard for each wait, never a timing assertion.
PATIENCE_S = 60


class Workers:
    """Worker processes on one task queue; each is killed or stopped by the end."""

    def __init__(self, target: str, world: Path, server: OpenAIServer) -> None:
        self.args = [target, f"kill9-{uuid.uuid4()}", str(world), server.base_url]
        self.queue = self.args[1]
        self.running: list[subprocess.Popen[str]] = []

    def start(self) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "tests.temporal.worker_process", *self.args]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.running.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        return process

    def kill_9(self, process: subprocess.Popen[str]) -> None:
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(PATIENCE_S) == -signal.SIGKILL

    def stop(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
                process.wait(PATIENCE_S)


@pytest.fixture
def workers(temporal: str, tmp_path: Path, server: OpenAIServer) -> Workers:
    running = Workers(temporal, tmp_path, server)
    yield running  # type: ignore[misc]
    running.stop()


def lines(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def until(check: object) -> None:
    """Until `check()` holds (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + PATIENCE_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the world never got there"
        await anyio.sleep(0.05)


async def heartbeated(handle: WorkflowHandle[Any, Any], text: bytes) -> None:
    """Until the server has a heartbeat of a running activity carrying `text` (what the
    channel shows of a stream): a worker killed before is known to have shown less."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        pending = (await handle.describe()).raw_description.pending_activities
        if any(text in p.heartbeat_details.SerializeToString() for p in pending):
            return
        assert time.monotonic() < deadline, "no heartbeat carried the text"
        await anyio.sleep(0.05)


#: Tests kill workers: a lost one is noticed after 2 s without a heartbeat.
GIVEN = TurnInput(turn=TurnSettings(), config=LoopConfig(), worker_lost_s=2.0)


async def test_kill_9_in_the_middle_of_a_streamed_reply(
    temporal: str, workers: Workers, tmp_path: Path, server: OpenAIServer
) -> None:
    """After `note` completed, killed while the model is silent after two of four pieces,
    both shown and heartbeated; another worker makes the call again, the channel shows the
    whole reply once, and the completed `note` is not run again."""
    pieces = ("Let me ", "check ", "the ", "card.")
    server.script(
        tool_call_reply("note", {"n": 1}),
        text_reply(*pieces).stalled_after(3),
        text_reply(*pieces),
    )
    first = workers.start()
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)

    await until(lambda: len(lines(tmp_path / "channel.jsonl")) == 2)
    await heartbeated(handle, b"Let me check ")
    workers.kill_9(first)
    workers.start()
    result = await handle.result()
    assert result.status is TurnStatus.COMPLETED
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Let me check the card."  # type: ignore[arg-type]
    assert lines(tmp_path / "notes.jsonl") == [{"n": 1}]
    assert len(server.requests) == 3


async def test_a_worker_killed_right_after_its_channel_took_a_piece_shows_that_piece_once(
    temporal: str,
    workers: Workers,
    tmp_path: Path,
    server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker dies (SIGKILL, by itself) the instant its channel took "check ", before
    any heartbeat could carry it: the next worker asks the channel what it took of the
    stream (the workflow's id, attempt, iteration), makes the call again after that, and
    the channel shows "Let me check the card." with each piece once."""
    pieces = ("Let me ", "check ", "the ", "card.")
    server.script(text_reply(*pieces), text_reply(*pieces))
    monkeypatch.setenv(DIE_AFTER, "check ")
    first = workers.start()
    monkeypatch.delenv(DIE_AFTER)
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)
    await until(lambda: first.poll() is not None)
    assert first.returncode == -signal.SIGKILL
    assert lines(tmp_path / "channel.jsonl") == ["Let me ", "check "]
    workers.start()
    result = await handle.result()
    assert result.status is TurnStatus.COMPLETED
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Let me check the card."  # type: ignore[arg-type]
    assert len(server.requests) == 2


async def test_kill_9_in_the_middle_of_a_tool(
    temporal: str, workers: Workers, tmp_path: Path, server: OpenAIServer
) -> None:
    """Killed while `charge` (not idempotent) waits on the bank after charging: the next
    worker does not charge again, tells the model the call may have run, the reply ends."""
    server.script(
        tool_call_reply("charge", {"cents": 500}, text="Charging."),
        text_reply("It may have gone through: ", "please check."),
    )
    first = workers.start()
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)
    await until(lambda: len(lines(tmp_path / "charges.jsonl")) == 1)
    workers.kill_9(first)
    workers.start()
    result = await handle.result()
    assert result.status is TurnStatus.COMPLETED
    assert lines(tmp_path / "charges.jsonl") == [{"cents": 500}]
    text = "".join(lines(tmp_path / "channel.jsonl"))  # type: ignore[arg-type]
    assert text == "Charging.It may have gone through: please check."
    [tool] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "interrupted" in tool["content"]


async def test_kill_9_while_an_approval_waits(
    temporal: str, workers: Workers, tmp_path: Path, server: OpenAIServer
) -> None:
    """Killed while `pay` waits for a person: the next worker shows the prompt again, the
    decision (the `decide` update) runs the call once there."""
    server.script(tool_call_reply("pay", {"cents": 700}), text_reply("Paid."))
    first = workers.start()
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)
    await until(lambda: len(lines(tmp_path / "asked.jsonl")) == 1)
    workers.kill_9(first)
    workers.start()
    await until(lambda: len(lines(tmp_path / "asked.jsonl")) == 2)
    [waiting] = await handle.query(TurnWorkflow.approvals)
    decision = ApprovalDecision(verdict=Verdict.APPROVE, digest=waiting.request.digest)
    await handle.execute_update(
        TurnWorkflow.decide, Decision(index=waiting.index, decision=decision)
    )
    result = await handle.result()
    assert result.status is TurnStatus.COMPLETED
    assert lines(tmp_path / "pays.jsonl") == [{"cents": 700}]
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Paid."  # type: ignore[arg-type]


async def test_a_call_whose_worker_is_lost_again_and_again_gives_up_with_a_clear_failure(
    temporal: str, workers: Workers, tmp_path: Path, server: OpenAIServer
) -> None:
    """`hold` (idempotent) never returns and each worker running it is killed: the call runs
    once and again `WORKER_LOSSES` (3) times, never a fifth; then the model reads that it
    was lost with its worker 4 times and the turn ends on the next worker."""
    server.script(tool_call_reply("hold", {"n": 1}), text_reply("I could not finish that."))
    running = workers.start()
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)
    for runs in range(1, WORKER_LOSSES + 2):
        await until(lambda: len(lines(tmp_path / "holds.jsonl")) == runs)  # noqa: B023
        workers.kill_9(running)
        running = workers.start()
    result = await handle.result()
    assert result.status is TurnStatus.COMPLETED
    assert lines(tmp_path / "holds.jsonl") == [{"n": 1}] * (WORKER_LOSSES + 1)
    [tool] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert f"lost with its worker {WORKER_LOSSES + 1} times" in tool["content"]
    assert "".join(lines(tmp_path / "channel.jsonl")) == "I could not finish that."  # type: ignore[arg-type]


async def test_a_stream_whose_worker_is_lost_again_and_again_ends_the_turn_as_an_error(
    temporal: str, workers: Workers, tmp_path: Path, server: OpenAIServer
) -> None:
    """The model says "Hold " and goes silent, and each worker making the call is killed:
    the call is made once and again `WORKER_LOSSES` (3) times, never a fifth; then it ends
    as `error` (`worker_lost`) with the text shown, which the channel shows once."""
    stalled = text_reply("Hold ", "on.").stalled_after(2)
    server.script(*[stalled] * (WORKER_LOSSES + 1))
    running = workers.start()
    client = await connect(temporal)
    handle = await start_turn(client, f"turn-{uuid.uuid4()}", GIVEN, task_queue=workers.queue)
    await until(lambda: lines(tmp_path / "channel.jsonl") == ["Hold "])
    await heartbeated(handle, b"Hold ")
    for calls in range(1, WORKER_LOSSES + 2):
        await until(lambda: len(server.requests) == calls)  # noqa: B023
        workers.kill_9(running)
        running = workers.start()
    result = await handle.result()
    assert result.status is TurnStatus.ERROR
    [stream] = result.stream_results
    assert stream.data is not None and stream.data.type == "worker_lost"  # type: ignore[union-attr]
    assert stream.accumulated_text == "Hold "
    assert len(server.requests) == WORKER_LOSSES + 1
    assert lines(tmp_path / "channel.jsonl") == ["Hold "]
