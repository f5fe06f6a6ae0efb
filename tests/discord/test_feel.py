"""How the bot feels to use: a typing indicator, slash commands synced once, a refused
login as one line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import discord
import discord.ext.test as dpytest
import pytest
from discord.ext.test import callbacks

from tests.discord.conftest import EVERY_MESSAGE, channel, configured, run
from tests.discord.discord_server import DiscordServer
from tests.effects.harness import ScriptProvider, completed, silent
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.discord.bot import sync_commands
from toolloop.effects.registry import ToolRegistry
from toolloop.tools.cli import main
from toolloop.tools.discord_bot import refused_login


class TestTyping:
    """Discord's typing indicator while the model thinks."""

    def test_the_channel_shows_typing_while_a_turn_runs(self) -> None:
        """A turn whose model is thinking: the bot has sent a typing indicator to its
        channel."""
        started = anyio.Event()
        typed: list[int] = []

        async def on_typing(place: Any) -> None:
            typed.append(place.id)

        async def main() -> tuple[list[int], int]:
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE),
                provider=ScriptProvider(silent("", started=started), completed("Done.")),
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            callbacks.set_callback(on_typing, "send_typing")
            await dpytest.message("think hard", channel=0)
            await started.wait()
            during = list(typed)
            bot.turns.kill(channel(0).id)
            await bot.turns.wait_idle()
            callbacks.remove_callback("send_typing")
            return during, channel(0).id

        during, place = run(main)
        assert during == [place]


class TestSlashCommands:
    """The global slash commands are synced when they changed, not on every start."""

    def test_kill_is_synced_once_then_left_alone(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Three starts against the loopback Discord: the first finds no commands and syncs
        `/kill`; the next two find it there and sync nothing."""

        async def main() -> tuple[list[bool], int, list[str]]:
            async with DiscordServer() as server:
                synced = []
                for _ in range(3):
                    bot = ToolloopBot(
                        BotSettings(token="test"),
                        provider=ScriptProvider(),
                        registry=ToolRegistry(),
                        intents=discord.Intents.all(),
                    )
                    await configured(bot)
                    await server.connect(bot, monkeypatch)
                    bot._connection.application_id = 4242
                    synced.append(await sync_commands(bot.tree))
                    await bot.http.close()
                return synced, server.syncs, [c["name"] for c in server.commands]

        assert run(main) == ([True, False, False], 1, ["kill"])


class _Refusing(BaseHTTPRequestHandler):
    """Discord's answer to a login with a bad token."""

    def do_GET(self) -> None:
        body = b'{"message": "401: Unauthorized", "code": 0}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_discord(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A loopback Discord that refuses every login; discord.py's routes point at it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/api/v10"
    monkeypatch.setattr(discord.http.Route, "BASE", base)
    yield base
    server.shutdown()
    server.server_close()


class TestRefusedLogin:
    """A bad token or a missing intent is one line and exit 2, like a missing token."""

    def test_a_bad_token_is_one_line_and_exit_2(
        self,
        refusing_discord: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """discord.py's real login against a Discord that answers 401: no traceback."""
        monkeypatch.setenv("DISCORD_TOKEN", "not-a-token")
        assert main(["discord"]) == 2
        assert capsys.readouterr().err == (
            "toolloop discord: Discord refused DISCORD_TOKEN: it is not a valid bot token "
            "(Discord Developer Portal > your application > Bot > Reset Token)\n"
        )

    def test_a_missing_intent_says_where_to_switch_it_on(self) -> None:
        """The gateway's 4014 close (discord.py's PrivilegedIntentsRequired) in one line."""
        assert refused_login(discord.PrivilegedIntentsRequired(None)) == (
            "Discord refused the Message Content Intent: switch it on (Discord Developer "
            "Portal > your application > Bot > Privileged Gateway Intents)"
        )
