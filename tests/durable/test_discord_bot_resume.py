"""`ToolloopBot.resume_turns`: what the bot does on start with each turn its journal holds.

dpytest's in-memory Discord for the bot's world; the loopback Discord server
where a channel must be fetched or refused. The kill -9 test
(test_discord_restart.py) resumes a turn mid-stream in a real restart; here
the paths a restart takes for a turn it does not carry on.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import EVERY_MESSAGE, channel, configured, contents, embeds, run
from tests.discord.discord_server import DiscordServer, refusal
from tests.effects.harness import ScriptProvider, completed, silent
from toolloop.durable import Journal
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.registry import ToolRegistry
from toolloop.engine.events import TurnStarted
from toolloop.states import LoopConfig, TurnSettings
from toolloop.tools import discord_bot

UNKNOWN_CHANNEL = 10003


def bot(
    journal: Journal, stale_turn_seconds: float = 600.0, provider: ScriptProvider | None = None
) -> ToolloopBot:
    return ToolloopBot(
        BotSettings(token="test", access=EVERY_MESSAGE, stale_turn_seconds=stale_turn_seconds),
        provider=provider or ScriptProvider(completed("Resumed.")),
        registry=ToolRegistry(),
        intents=discord.Intents.all(),
        journal=journal,
    )


async def journaled(journal: Journal, channel_id: int) -> None:
    """An earlier process's turn in `channel_id`, cut right after it began."""
    turn = TurnSettings(channel_id=str(channel_id), user_id="7")
    await journal.begin(f"{channel_id}/1", LoopConfig(), turn)
    await journal.append(f"{channel_id}/1", 0, TurnStarted())


def test_a_turn_older_than_the_stale_timeout_ends_with_a_notice_in_its_channel(
    tmp_path: Path,
) -> None:
    """Not resumed: the channel gets the turn_interrupted notice, the model is not called,
    and the journal lets the turn go."""
    provider_calls: list[int] = []

    async def main() -> tuple[list[str], list[str | None]]:
        async with await Journal.open(tmp_path / "j.db") as journal:
            client = bot(journal, stale_turn_seconds=0.0)
            await configured(client)
            await journaled(journal, channel(0).id)
            resumed = await client.resume_turns()
            await client.turns.wait_idle()
            assert await journal.unfinished() == []
            provider = client.provider
            assert isinstance(provider, ScriptProvider)
            provider_calls.append(len(provider.requests))
        return resumed, [embed.description for embed in embeds(channel(0))]

    resumed, shown = run(main)
    assert resumed == []
    assert provider_calls == [0]
    [text] = shown
    assert text is not None and text.startswith("This reply was interrupted by a restart")


def test_a_turn_whose_channel_is_gone_is_let_go_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Discord answers 404 Unknown Channel when the bot fetches the turn's channel: the turn is
    not resumed, the journal lets it go, and the log names the turn."""

    async def main() -> list[str]:
        async with DiscordServer() as server, await Journal.open(tmp_path / "j.db") as journal:
            client = bot(journal)
            await configured(client)
            await server.connect(client, monkeypatch)
            server.plan("GET", refusal(404, UNKNOWN_CHANNEL, "Unknown Channel"))
            await journaled(journal, 123_456_789_012_345_678)
            resumed = await client.resume_turns()
            assert await journal.unfinished() == []
            await client.http.close()
        return resumed

    with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
        assert run(main) == []
    assert any(
        "turn 123456789012345678/1 is not resumed: its channel is gone" in r.getMessage()
        for r in caplog.records
    )


def test_a_fresh_turn_is_resumed_in_its_channel_and_finished(tmp_path: Path) -> None:
    """A turn cut right after it began (its channel in the bot's cache): resumed in the
    channel's lane, the model answers there, and the journal is empty afterwards."""

    async def main() -> tuple[list[str], list[str]]:
        async with await Journal.open(tmp_path / "j.db") as journal:
            client = bot(journal)
            await configured(client)
            await journaled(journal, channel(0).id)
            resumed = await client.resume_turns()
            await client.turns.wait_idle()
            assert await journal.unfinished() == []
        return resumed, contents(channel(0))

    resumed, shown = run(main)
    assert resumed == [f"{channel(0).id}/1"]
    assert shown == ["Resumed."]


def test_a_bot_closed_with_a_journal_leaves_its_running_reply_to_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed mid-stream (Ctrl-C, a deploy): the reply is neither stopped nor marked and the
    turn stays in the journal; the next bot resumes it, and the same message ends with the
    whole reply."""
    started = anyio.Event()
    provider = ScriptProvider(silent("Let me ", started=started), completed("Let me check."))

    async def disconnect(client: discord.Client) -> None:
        await client.http.close()  # dpytest's fake gateway cannot be closed; the HTTP client can

    monkeypatch.setattr(discord.Client, "close", disconnect)

    async def main() -> tuple[list[str], list[str], int, list[str]]:
        async with DiscordServer() as server:
            async with await Journal.open(tmp_path / "j.db") as journal:
                first = bot(journal, provider=provider)
                await configured(first)
                await server.connect(first, monkeypatch)
                await dpytest.message("Is my card charged?", channel=0)
                place = channel(0).id
                await started.wait()
                with anyio.fail_after(30):  # a hang guard: the message is reported held
                    while not (await journal.unfinished())[0].held:
                        await anyio.sleep(0.01)
                await first.close()
                assert len(await journal.unfinished()) == 1
            closed = server.contents(place)
            async with await Journal.open(tmp_path / "j.db") as journal:
                second = bot(journal, provider=provider)
                await configured(second)
                await server.connect(second, monkeypatch)
                resumed = await second.resume_turns()
                await second.turns.wait_idle()
                assert await journal.unfinished() == []
                await second.http.close()
            posts = server.posts()
            return closed, server.contents(place), posts, resumed

    closed, contents_after, posts, resumed = run(main)
    assert closed == ["Let me"]  # no cut marker
    assert len(resumed) == 1
    assert contents_after == ["Let me check."]
    assert posts == 1


def test_toolloop_discord_refuses_a_journal_file_that_is_not_one_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TOOLLOOP_JOURNAL naming a text file: exit 2 before the login, one line naming the
    variable, the file and what is wrong."""
    path = tmp_path / "notes.txt"
    path.write_text("not a journal\n" * 400)
    env = {"DISCORD_TOKEN": "abc", "TOOLLOOP_JOURNAL": str(path)}
    assert discord_bot.main(env) == 2
    assert capsys.readouterr().err.startswith(
        f"toolloop discord: bad setting: TOOLLOOP_JOURNAL: journal {path}: "
        "not a readable SQLite file"
    )


def test_a_journal_named_in_the_settings_is_opened_on_start_and_closed_with_the_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`BotSettings(journal=path)`: `setup_hook` opens it and resumes its turn; closing the
    bot closes it (the file opens again at once)."""

    async def disconnect(client: discord.Client) -> None:
        await client.http.close()

    monkeypatch.setattr(discord.Client, "close", disconnect)

    async def main() -> tuple[list[str], list[str]]:
        async with DiscordServer() as server:
            client = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE, journal=tmp_path / "j.db"),
                provider=ScriptProvider(completed("Resumed.")),
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(client)
            await server.connect(client, monkeypatch)
            client._connection.application_id = 4242
            async with await Journal.open(tmp_path / "j.db") as journal:
                await journaled(journal, 123_456_789_012_345_678)
            await client.setup_hook()
            await client.turns.wait_idle()
            await client.close()
            async with await Journal.open(tmp_path / "j.db") as journal:
                keys = [turn.key for turn in await journal.unfinished()]
            return keys, server.contents(123_456_789_012_345_678)

    keys, shown = run(main)
    assert keys == []
    assert shown == ["Resumed."]
