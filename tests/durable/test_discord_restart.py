"""`kill -9` of a Discord bot with a journal in the middle of a streamed reply, then a restart.

The loopback Discord server and the loopback model live in this test's process;
the bot (`tests/durable/discord_bot.py`) is a process of its own, killed with
SIGKILL while the model is silent after two of four pieces, once the journal
holds the message that shows them. A second bot process, with a fresh dpytest
world, resumes the turn from the journal (it fetches the channel from Discord)
and continues the same message: the channel ends with each piece of text
exactly once, in one message.

The second test kills the bot inside the window the journal cannot see: the
loopback Discord server has created the reply's first message and the bot dies
before the answer reaches it, so its journal never holds that message. The
restarted bot asks for the stream's first message again with the same nonce and
Discord gives the first one back, which the bot edits on: still one message.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

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
            posts = discord.posts()
            outcome = json.loads((tmp_path / "outcome.json").read_text())
            return discord.contents(place), posts, outcome

    contents, posts, outcome = run(main)
    assert contents == ["Let me check the card."]
    assert posts == 1
    assert len(outcome["resumed"]) == 1  # type: ignore[arg-type]
    assert len(server.requests) == 2


def test_kill_9_after_discord_made_the_message_and_before_the_journal_held_it_makes_no_second(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """Killed the instant Discord created the reply's first message, before the bot heard of
    it (nothing held in the journal): the restarted bot's first message carries the same
    nonce, Discord returns the message already made, and the bot edits it on: one message,
    "Let me check the card.", each piece once."""
    server.script(text_reply(*PIECES).stalled_after(3), text_reply(*PIECES))

    async def main() -> tuple[list[str], list[dict[str, Any]], bool]:
        async with DiscordServer() as discord:
            bot = await start_bot(tmp_path, discord, server)

            async def kill_the_bot(message: dict[str, Any]) -> None:
                if message["content"]:
                    discord.before_answer = None
                    bot.send_signal(signal.SIGKILL)
                    assert await bot.wait() == -signal.SIGKILL

            discord.before_answer = kill_the_bot
            async with asyncio.timeout(PATIENCE_S):
                assert await bot.wait() == -signal.SIGKILL
            held_before = (tmp_path / "held.jsonl").exists()
            place = int((tmp_path / "channel.txt").read_text())
            restarted = await start_bot(tmp_path, discord, server)
            async with asyncio.timeout(PATIENCE_S):
                assert await restarted.wait() == 0
            posts = [
                r.body for r in discord.requests if r.method == "POST" and r.body.get("content")
            ]
            return discord.contents(place), posts, held_before

    contents, posts, held_before = run(main)
    assert not held_before  # the journal never held the message Discord had made
    assert contents == ["Let me check the card."]
    assert [post["content"] for post in posts] == ["Let me", "Let me"]
    assert posts[0]["nonce"] == posts[1]["nonce"] and posts[0]["enforce_nonce"] is True
