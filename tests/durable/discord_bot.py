"""A Discord bot process for the kill -9 test: `python -m tests.durable.discord_bot JOURNAL
WORLD DISCORD_URL MODEL_URL`.

A `ToolloopBot` with a journal, its Discord a dpytest world whose HTTP requests
(messages, edits, the typing indicator, fetching a channel) go to the test's
loopback Discord server at DISCORD_URL, its model the loopback chat-completions
server at MODEL_URL. It resumes the turns the journal holds (`resume_turns`),
or else a user asks it something in the first channel (whose id it writes to
WORLD/channel.txt). Each time the journal commits the messages holding a
stream, their text goes to WORLD/held.jsonl, so the test kills the process
knowing what the journal holds. It ends once its turns are over, writing
WORLD/outcome.json.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import discord
import discord.ext.test as dpytest

from tests.discord.conftest import EVERY_MESSAGE, channel, configured
from toolloop.durable import HeldMessage, Journal
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolRegistry


class SignallingJournal(Journal):
    """The journal, telling the test what each committed report of held messages says."""

    world: Path

    async def held(self, key: str, after: int, messages: tuple[HeldMessage, ...]) -> None:
        await super().held(key, after, messages)
        with (self.world / "held.jsonl").open("a") as out:
            out.write(json.dumps([m.text for m in messages]) + "\n")


async def main(journal_path: str, world_path: str, discord_url: str, model_url: str) -> None:
    world = Path(world_path)
    journal = await SignallingJournal.open(journal_path)
    journal.world = world
    provider = OpenAICompatProvider(base_url=model_url, model="m")
    bot = ToolloopBot(
        BotSettings(token="test", access=EVERY_MESSAGE),
        provider=provider,
        registry=ToolRegistry(),
        intents=discord.Intents.all(),
        journal=journal,
    )
    await configured(bot)
    discord.http.Route.BASE = discord_url
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    await http.static_login("bot-token")
    bot.http = bot._connection.http = http
    resumed = await bot.resume_turns()
    if not resumed:
        (world / "channel.txt").write_text(str(channel(0).id))
        await dpytest.message("Is my card charged?", channel=0)
    await bot.turns.wait_idle()
    (world / "outcome.json").write_text(json.dumps({"resumed": resumed}))
    await journal.close()
    await provider.aclose()
    await http.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
