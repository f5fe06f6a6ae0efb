"""`kill -9` of a bot process mid-stream, mid-tool and while an approval waits, then a restart.

The model server (the loopback one, in this test's process) and the world the
bot acts on (its channel and its tool's effects, files the bot flushes) outlive
the bot: the restarted process resumes the turn from the journal, and the
channel ends with each piece of text exactly once and the charge made once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.durable.bot import DIE_AFTER
from tests.openai_server import OpenAIServer, text_reply, tool_call_reply

#: A hang guard for each wait on the bot, never a timing assertion.
PATIENCE_S = 30


def start_bot(tmp_path: Path, server: OpenAIServer) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tests.durable.bot", str(tmp_path / "journal.db")]
    return subprocess.Popen([*command, str(tmp_path), server.base_url])


def lines(path: Path) -> list[str]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(path: Path, count: int) -> None:
    """Until `path` holds `count` lines (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + PATIENCE_S
    while len(lines(path)) < count:
        assert time.monotonic() < deadline, f"{path.name} never reached {count} lines"
        time.sleep(0.02)


def kill_9(bot: subprocess.Popen[bytes]) -> None:
    os.kill(bot.pid, signal.SIGKILL)
    assert bot.wait(PATIENCE_S) == -signal.SIGKILL


def restart_to_the_end(tmp_path: Path, server: OpenAIServer) -> str:
    bot = start_bot(tmp_path, server)
    assert bot.wait(PATIENCE_S) == 0
    return json.loads((tmp_path / "outcome.json").read_text())


def test_kill_9_in_the_middle_of_a_streamed_reply(tmp_path: Path, server: OpenAIServer) -> None:
    """Killed while the model is silent after two of four pieces, both shown and journaled; the
    restart streams the reply again and the channel shows the whole reply once: the two
    pieces are not sent twice."""
    pieces = ("Let me ", "check ", "the ", "card.")
    server.script(text_reply(*pieces).stalled_after(3), text_reply(*pieces))  # role, 2 pieces
    bot = start_bot(tmp_path, server)
    wait_for(tmp_path / "committed.jsonl", 2)
    assert lines(tmp_path / "channel.jsonl") == ["Let me ", "check "]
    kill_9(bot)
    outcome = restart_to_the_end(tmp_path, server)
    assert "status=<TurnStatus.COMPLETED" in outcome
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Let me check the card."
    assert len(server.requests) == 2


def test_kill_9_right_after_the_channel_took_a_piece_shows_that_piece_once(
    tmp_path: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot dies (SIGKILL, by itself) the instant its channel took "check ", before the
    journal committed it: the restart asks the channel what it took of the stream (named by
    the turn's key, attempt and iteration) and goes on after that, so the channel shows
    "Let me check the card." with each piece once."""
    pieces = ("Let me ", "check ", "the ", "card.")
    server.script(text_reply(*pieces), text_reply(*pieces))
    monkeypatch.setenv(DIE_AFTER, "check ")
    bot = start_bot(tmp_path, server)
    assert bot.wait(PATIENCE_S) == -signal.SIGKILL
    monkeypatch.delenv(DIE_AFTER)
    assert lines(tmp_path / "channel.jsonl") == ["Let me ", "check "]
    assert lines(tmp_path / "committed.jsonl") == ["Let me "]  # the journal lacks "check "
    outcome = restart_to_the_end(tmp_path, server)
    assert "status=<TurnStatus.COMPLETED" in outcome
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Let me check the card."
    assert len(server.requests) == 2


def test_kill_9_in_the_middle_of_a_tool(tmp_path: Path, server: OpenAIServer) -> None:
    """Killed while `charge` (not idempotent) waits on the bank after charging: the restart
    does not charge again, tells the model the call may have run, and the reply ends once."""
    server.script(
        tool_call_reply("charge", {"cents": 500}, text="Charging."),
        text_reply("It may have gone through: ", "please check."),
    )
    bot = start_bot(tmp_path, server)
    wait_for(tmp_path / "charges.jsonl", 1)
    kill_9(bot)
    outcome = restart_to_the_end(tmp_path, server)
    assert "status=<TurnStatus.COMPLETED" in outcome
    assert lines(tmp_path / "charges.jsonl") == [{"cents": 500}]
    shown = lines(tmp_path / "channel.jsonl")
    assert "".join(shown) == "Charging.It may have gone through: please check."
    [tool_message] = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "interrupted by a restart of the bot and may have run" in tool_message["content"]


def test_kill_9_while_an_approval_waits(tmp_path: Path, server: OpenAIServer) -> None:
    """Killed while delete_message waits for a person: the restarted bot asks again (same call,
    same digest), the approval given after the restart runs the call once, and the reply
    ends once."""
    server.script(
        tool_call_reply("delete_message", {"id": "m1"}, text="Deleting."),
        text_reply("Deleted ", "it."),
    )
    bot = start_bot(tmp_path, server)
    wait_for(tmp_path / "asked.jsonl", 1)
    kill_9(bot)
    assert not (tmp_path / "deleted.jsonl").exists()
    bot = start_bot(tmp_path, server)
    wait_for(tmp_path / "asked.jsonl", 2)
    first, again = lines(tmp_path / "asked.jsonl")
    assert again == first
    decision = tmp_path / f"decision-{again['call_id']}.json"
    written = decision.with_suffix(".tmp")
    written.write_text(json.dumps({"verdict": "approve", "digest": again["digest"]}))
    written.rename(decision)  # whole, or not there: the bot never reads half a decision
    assert bot.wait(PATIENCE_S) == 0
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert "status=<TurnStatus.COMPLETED" in outcome
    assert lines(tmp_path / "deleted.jsonl") == [{"id": "m1"}]
    assert "".join(lines(tmp_path / "channel.jsonl")) == "Deleting.Deleted it."
    assert len(server.requests) == 2
