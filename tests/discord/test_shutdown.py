"""SIGTERM to `toolloop discord` in the middle of a reply, as a deploy sends it.

The bot is the command itself, a process of its own (`toolloop_discord.py`),
logged in to the loopback Discord of this test's process (its REST routes and
its gateway, `discord_server.DiscordServer`) and answering with the loopback
model. The model stalls after two of four pieces; once Discord shows them,
the test sends SIGTERM. Without a journal the turn is stopped as `/kill`
stops it and its reply marked; with one, the turn is left to the journal and
the next start continues the same message. Either way the process exits 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.discord.conftest import run
from tests.discord.discord_server import DiscordServer, rate_limited
from tests.discord.gateway import CHANNEL_ID
from tests.openai_server import OpenAIServer, text_reply

#: A hang guard for each wait on the bot process, never a timing assertion.
PATIENCE_S = 30
PIECES = ("Let me ", "check ", "the ", "card.")
STALLED = text_reply(*PIECES).stalled_after(3)  # the role, then two pieces
"""The model's reply that the signal interrupts."""


class BotProcess:
    """`toolloop discord` as a process, configured by `env`, its log lines kept."""

    def __init__(self, discord: DiscordServer, model: OpenAIServer, **env: str) -> None:
        self.discord, self.model = discord, model
        self.env = {
            **os.environ,
            "DISCORD_TOKEN": "bot-token",
            "TOOLLOOP_BASE_URL": model.base_url,
            "TOOLLOOP_MODEL": "m",
            "OPENAI_API_KEY": "sk-test",
            **env,
        }
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the bot and wait until it logged in to the gateway."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.discord.toolloop_discord",
            self.discord.base_url,
            self.discord.gateway_url,
            env=self.env,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(PATIENCE_S):
            await self.discord.gateway.identified.wait()

    def signal(self, number: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(number)

    async def ended(self) -> tuple[int, list[str]]:
        """The exit code and the bot's log lines about Discord (`toolloop.discord`)."""
        assert self.process is not None and self.process.stderr is not None
        async with asyncio.timeout(PATIENCE_S):
            log = (await self.process.stderr.read()).decode()
            code = await self.process.wait()
        ours = [
            line.split(" toolloop.discord ", 1)[1]
            for line in log.splitlines()
            if " toolloop.discord " in line
        ]
        return code, ours


async def mid_reply(discord: DiscordServer, model: OpenAIServer, **env: str) -> BotProcess:
    """A bot process asked a question, once Discord shows the start of its stalled reply."""
    bot = BotProcess(discord, model, **env)
    await bot.start()
    await discord.gateway.say("Is my card charged?")
    await shown(discord, ["Let me check"])  # Discord trims the end
    return bot


async def shown(discord: DiscordServer, contents: list[str]) -> None:
    """Until the channel's messages hold `contents` (a hang guard, not timing)."""
    async with asyncio.timeout(PATIENCE_S):
        while discord.contents(CHANNEL_ID) != contents:
            await asyncio.sleep(0.02)


def test_sigterm_without_a_journal_stops_the_reply_marked_and_exits_0(
    server: OpenAIServer,
) -> None:
    """SIGTERM while the model is silent after "Let me check ": the turn ends as a stop
    ends it, the message keeps its text and says the bot shut down, the model's request is
    cancelled, one log line says what happens, and the process exits 0."""
    server.script(STALLED)

    async def main() -> tuple[int, list[str], list[str]]:
        async with DiscordServer() as discord:
            bot = await mid_reply(discord, server)
            bot.signal(signal.SIGTERM)
            code, log = await bot.ended()
            return code, log, discord.contents(CHANNEL_ID)

    code, log, contents = run(main)
    assert code == 0
    assert contents == ["Let me check\n-# stopped: the bot shut down"]
    assert (
        "SIGTERM: taking no new messages, stopping 1 running turn within 8.0 s, then closing" in log
    )
    assert server.requests[0].client_left.is_set()
    assert len(server.requests) == 1


def test_sigterm_with_a_journal_leaves_the_turn_to_the_next_start(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """With `TOOLLOOP_JOURNAL`, SIGTERM mid-reply suspends the turn: exit 0 and the message
    unmarked. The next start resumes it from the journal, makes the stream again and edits
    the same message on: one message, the whole reply once, then SIGTERM ends it with 0."""
    server.script(STALLED, text_reply(*PIECES))
    journal = str(tmp_path / "journal.db")

    async def main() -> tuple[list[int], list[str], list[str], list[str], int]:
        async with DiscordServer() as discord:
            first = await mid_reply(discord, server, TOOLLOOP_JOURNAL=journal)
            first.signal(signal.SIGTERM)
            first_code, first_log = await first.ended()
            suspended = discord.contents(CHANNEL_ID)
            second = BotProcess(discord, server, TOOLLOOP_JOURNAL=journal)
            await second.start()
            await shown(discord, ["Let me check the card."])
            second.signal(signal.SIGTERM)
            second_code, _ = await second.ended()
            codes = [first_code, second_code]
            return codes, first_log, suspended, discord.contents(CHANNEL_ID), discord.posts()

    codes, log, suspended, contents, created = run(main)
    assert codes == [0, 0]
    assert (
        "SIGTERM: taking no new messages, suspending 1 running turn to the journal, then closing"
        in log
    )
    assert suspended == ["Let me check"]
    assert contents == ["Let me check the card."]
    assert created == 1
    assert len(server.requests) == 2


def test_a_second_sigterm_exits_at_once(server: OpenAIServer) -> None:
    """The stopped reply's marker waits on a long rate limit (Discord's `retry_after` of a
    minute), so the first SIGTERM's shutdown is still under way; a second SIGTERM ends the
    process at once, by that signal, and says so."""
    server.script(STALLED)

    async def main() -> tuple[int, list[str]]:
        async with DiscordServer() as discord:
            discord.plan("PATCH", rate_limited(60), containing="-# stopped")
            bot = await mid_reply(discord, server, TOOLLOOP_SHUTDOWN_GRACE_SECONDS="600")
            bot.signal(signal.SIGTERM)
            async with asyncio.timeout(PATIENCE_S):
                while not any("-# stopped" in str(r.body) for r in discord.requests):
                    await asyncio.sleep(0.02)
            bot.signal(signal.SIGTERM)
            return await bot.ended()

    code, log = run(main)
    assert code == -signal.SIGTERM
    assert log[-1] == "SIGTERM again: exiting at once"


def test_a_shutdown_past_its_grace_time_cancels_the_turn_and_exits_0(
    server: OpenAIServer,
) -> None:
    """With no grace time the stopped turn is cancelled where it stands rather than waited
    for (its marker would wait a minute on Discord's rate limit): a line says so, and the
    process exits 0."""
    server.script(STALLED)

    async def main() -> tuple[int, list[str]]:
        async with DiscordServer() as discord:
            discord.plan("PATCH", rate_limited(60), containing="-# stopped")
            bot = await mid_reply(discord, server, TOOLLOOP_SHUTDOWN_GRACE_SECONDS="0")
            bot.signal(signal.SIGINT)
            return await bot.ended()

    code, log = run(main)
    assert code == 0
    assert (
        "SIGINT: taking no new messages, stopping 1 running turn within 0.0 s, then closing" in log
    )
    assert "turns still running after 0.0 s, cancelled: 1" in log
