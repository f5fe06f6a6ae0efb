"""A bot process for the kill -9 tests: `python -m tests.durable.bot JOURNAL WORLD BASE_URL`.

It resumes whatever turn the journal holds, or else starts one journaled turn
against the loopback model server. What outlives it is on disk in the WORLD
folder: `channel.jsonl` (each piece of text the channel accepted, flushed at
once), `committed.jsonl` (each piece once the journal committed it, so the
test can kill outside the instant between the two) and `charges.jsonl` (each
run of the `charge` tool, which then waits for a confirmation that never comes:
the test kills the process there). With `TOOLLOOP_TEST_DIE_AFTER` set, the process
kills itself right after the channel took that piece (`FileChannel.die_after`).
A call of `delete_message` waits for a person's approval: the request is
appended to `asked.jsonl`, and the decision is the file `decision-<call id>.json`
the test writes (`FileApprovals`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio

from toolloop.durable import Journal, TurnPorts, resume, run_journaled
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamSpan
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    ApprovalRequest,
    JsonObject,
    LoopConfig,
    TurnSettings,
    Verdict,
)

#: The environment variable that names the piece after which `FileChannel` kills its process.
DIE_AFTER = "TOOLLOOP_TEST_DIE_AFTER"
#: How often `FileApprovals` looks for the test's decision, in seconds.
POLL_S = 0.02


class FileChannel(RecordingChannel):
    """A channel whose every piece of text is appended to a file before the send returns.

    Beside `path` (each piece), `<path>.streams` keeps each piece under its stream's
    turn, attempt and iteration, from which `taken` recalls what the channel took of a
    stream (`toolloop.durable.RecallingChannel`). With `die_after`, the process kills
    itself (SIGKILL) right after the channel took that piece: before anyone heard of it.
    """

    def __init__(self, path: Path, die_after: str | None = None) -> None:
        super().__init__()
        self.path, self.die_after = path, die_after
        self.kept = path.with_suffix(".streams")
        self._stream: StreamSpan | None = None

    def stream_started(self, stream: StreamSpan) -> None:
        self._stream = stream
        super().stream_started(stream)

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps(text) + "\n")
        with self.kept.open("a") as out:
            out.write(json.dumps([_name(self._stream), text]) + "\n")
        if text == self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        await super().send_text(text, reply_to=reply_to)

    async def taken(self, stream: StreamSpan) -> str:
        if not self.kept.exists():
            return ""
        pieces = [json.loads(line) for line in self.kept.read_text().splitlines()]
        return "".join(text for name, text in pieces if name == _name(stream))


def _name(stream: StreamSpan | None) -> list[object] | None:
    """A stream's name in every process: its turn, attempt and iteration."""
    return None if stream is None else [stream.turn, stream.attempt, stream.iteration]


class SignallingJournal(Journal):
    """The journal, telling the test when each piece of text is committed."""

    world: Path

    async def delivered(self, key: str, after: int, text: str) -> None:
        await super().delivered(key, after, text)
        with (self.world / "committed.jsonl").open("a") as out:
            out.write(json.dumps(text) + "\n")


class FileApprovals:
    """The approvals port of a bot whose person is the test: requests and decisions are files."""

    def __init__(self, world: Path) -> None:
        self.world = world

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        with (self.world / "asked.jsonl").open("a") as out:
            out.write(json.dumps({"call_id": request.call_id, "digest": request.digest}) + "\n")
        decision = self.world / f"decision-{request.call_id}.json"
        while not decision.exists():
            await anyio.sleep(POLL_S)
        fields = json.loads(decision.read_text())
        return ApprovalDecision(verdict=Verdict(fields["verdict"]), digest=fields["digest"])

    async def withdraw(self, request: ApprovalRequest) -> None:
        raise AssertionError("nothing kills these turns")


def ports(world: Path, provider: OpenAICompatProvider) -> TurnPorts:
    registry = ToolRegistry()

    async def charge(args: JsonObject, call: ToolCall) -> JsonObject:
        with (world / "charges.jsonl").open("a") as out:
            out.write(json.dumps(args) + "\n")
        await anyio.sleep_forever()  # waits for the bank, until the process is killed
        raise AssertionError("unreachable")

    async def delete_message(args: JsonObject, call: ToolCall) -> JsonObject:
        with (world / "deleted.jsonl").open("a") as out:
            out.write(json.dumps(args) + "\n")
        return {"deleted": args["id"]}

    registry.register(charge, parameters={"type": "object"})
    registry.register(delete_message, parameters={"type": "object"}, requires_approval=True)
    channel = FileChannel(world / "channel.jsonl", os.environ.get(DIE_AFTER))
    return TurnPorts(
        provider=provider,
        registry=registry,
        channel=channel,
        control=MemoryTurnControl(),
        approvals=FileApprovals(world),
    )


async def main(journal_path: str, world_path: str, base_url: str) -> None:
    world = Path(world_path)
    provider = OpenAICompatProvider(base_url=base_url, model="m")
    async with await SignallingJournal.open(journal_path) as journal:
        journal.world = world
        if await journal.unfinished():
            outcomes = await resume(journal, lambda _: ports(world, provider))
            [outcome] = outcomes.values()
        else:
            outcome = await run_journaled(
                journal,
                "turn-1",
                turn=TurnSettings(),
                config=LoopConfig(),
                ports=ports(world, provider),
            )
    await provider.aclose()
    (world / "outcome.json").write_text(json.dumps(repr(outcome)))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
