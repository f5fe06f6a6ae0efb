"""`kill -9` of a Discord bot with a journal in the middle of a streamed reply, then a restart.

The loopback Discord server and the loopback model live in this test's process;
the bot (`tests/durable/discord_bot.py`) is a process of its own, killed with
SIGKILL while the model is silent after two of four pieces, once the journal
holds the message that shows them. A second bot process, with a fresh dpytest
world, resumes the turn from the journal (it fetches the channel from Discord)
and continues the same message: the channel ends with each piece of text
exactly once, in one message.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from tests.discord.conftest import run
from tests.discord.discord_server import DiscordServer
from tests.openai_server import OpenAIServer, text_reply

#: A hang guard for each wait on a bot process, never a timing assertion.
PATIENCE_S = 30
PIECES = ("Let me ", "check ", "the ", "card.")


def lines(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def start_bot(
    tmp_path: Path, discord: DiscordServer, model: OpenAIServer
) -> asyncio.subprocess.Process:
    journal = str(tmp_path / "journal.db")
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.durable.discord_bot",
        journal,
        str(tmp_path),
        discord.base_url,
        model.base_url,
    )


async def held_until(path: Path, texts: list[str]) -> None:
    """Until the journal committed messages holding `texts` (a hang guard, not timing)."""
    async with asyncio.timeout(PATIENCE_S):
        while texts not in lines(path):
            await asyncio.sleep(0.02)


def test_kill_9_mid_stream_and_a_restart_continue_the_same_discord_message(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """Killed with "Let me check " shown and journaled; the restarted bot makes the stream again
    and edits the same message on: one message, "Let me check the card.", and no second one."""
    server.script(text_reply(*PIECES).stalled_after(3), text_reply(*PIECES))  # role, 2 pieces

    async def main() -> tuple[list[str], int, dict[str, object]]:
        async with DiscordServer() as discord:
            bot = await start_bot(tmp_path, discord, server)
            await held_until(tmp_path / "held.jsonl", ["Let me check "])
            bot.send_signal(signal.SIGKILL)
            assert await bot.wait() == -signal.SIGKILL
            place = int((tmp_path / "channel.txt").read_text())
            assert discord.contents(place) == ["Let me check"]  # Discord trims the end
            restarted = await start_bot(tmp_path, discord, server)
            async with asyncio.timeout(PATIENCE_S):
                assert await restarted.wait() == 0
            posts = sum(1 for r in discord.requests if r.method == "POST" and "content" in r.body)
            outcome = json.loads((tmp_path / "outcome.json").read_text())
            return discord.contents(place), posts, outcome

    contents, posts, outcome = run(main)
    assert contents == ["Let me check the card."]
    assert posts == 1
    assert len(outcome["resumed"]) == 1  # type: ignore[arg-type]
    assert len(server.requests) == 2
