"""No stray pings: every message, edit and webhook post the host makes carries a mention policy.

The model's text is the user's to steer ("repeat after me: @everyone"), so the
policy, not the text, decides who is pinged. dpytest records the bot's own
messages and edits; the persona's webhook posts go to the loopback stand-in.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import discord
import discord.ext.test as dpytest
import pytest
from discord.ext.test import callbacks

from tests.discord.conftest import EVERY_MESSAGE, Payloads, VirtualClock, channel, configured, run
from tests.discord.webhook_server import TOKEN, WEBHOOK_ID, WebhookServer
from tests.effects.harness import ScriptProvider, completed
from toolloop.effects.discord import (
    BotSettings,
    DiscordChannel,
    DiscordPersona,
    EditWindow,
    ToolloopBot,
    WebhookVoice,
    no_pings,
)
from toolloop.effects.ports import Notice, StreamSpan
from toolloop.effects.registry import ToolRegistry

PINGS = "Sure: @everyone @here <@1234567890> <@&2345678901> "
"""What a user asks the model to repeat."""
REPLY_ONLY = {"parse": [], "replied_user": True}
"""`no_pings()` as Discord reads it: no mention is parsed, a reply pings its author."""
SPAN = StreamSpan(attempt=0, iteration=0, reply_to=None)


def notice(*, hidden: bool = False, identity: str | None = None) -> Notice:
    return Notice(
        key="still_working", level="info", text=PINGS, hidden=hidden, iteration=1, identity=identity
    )


async def speak(port: DiscordChannel, clock: VirtualClock) -> None:
    """A stream of two pages (two messages and an edit), a notice and a hidden notice."""
    port.stream_started(SPAN)
    await port.send_text(PINGS, reply_to=None)
    await port.send_text(PINGS * 60, reply_to=None)
    port.stream_ended(SPAN)
    await port.send_notice(notice(identity="Tomo"))  # the persona's, when there is one
    await port.send_hidden_notice(notice(hidden=True))
    for _ in range(20):
        clock.advance(1.0)
        await discord.utils.sleep_until(discord.utils.utcnow())


class Edited:
    """The payload of every edit dpytest saw."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        callbacks.set_callback(self._edited, "edit_message")

    async def _edited(self, channel: Any, message: discord.Message, fields: Any) -> None:
        self.payloads.append(dict(fields["params"].payload))


class TestMentionPolicy:
    """What each request says about mentions."""

    def test_every_message_and_edit_of_the_bot_pings_no_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two pages, an edit, a notice and a thought: each request parses no mention."""
        sent = Payloads(monkeypatch)

        async def main() -> list[dict[str, Any]]:
            await configured()
            edited, clock = Edited(), VirtualClock()
            async with DiscordChannel(
                channel(0), window=EditWindow(), thought_log=channel(1), clock=clock
            ) as port:
                await speak(port, clock)
            return edited.payloads

        edits = run(main)
        assert len(sent.sent) == 4 and len(edits) >= 1  # 2 pages, notice, thought; the edits
        assert [p["allowed_mentions"] for p in [*sent.sent, *edits]] == [REPLY_ONLY] * (
            len(sent.sent) + len(edits)
        )

    def test_every_webhook_post_and_edit_pings_no_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The persona's pages, edits and notice carry the policy to the webhook routes."""

        async def main() -> list[tuple[str, dict[str, Any]]]:
            await configured()
            async with WebhookServer(channel().id) as server, aiohttp.ClientSession() as session:
                monkeypatch.setattr(discord.http.Route, "BASE", server.base_url)
                hook = discord.Webhook.partial(WEBHOOK_ID, TOKEN, session=session)
                voice = WebhookVoice(hook, DiscordPersona(name="Tomo"))
                clock = VirtualClock()
                async with DiscordChannel(
                    channel(), window=EditWindow(), persona=voice, clock=clock
                ) as port:
                    await speak(port, clock)
                return [(r.method, r.body) for r in server.requests]

        requests = run(main)
        methods = [method for method, _ in requests]
        assert methods.count("POST") == 3 and "PATCH" in methods  # 2 pages, the notice; edits
        assert all(body["allowed_mentions"] == REPLY_ONLY for _, body in requests)

    def test_a_bot_author_widens_the_policy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """`mentions=` is what every request carries: here, users may be pinged."""
        sent = Payloads(monkeypatch)
        wider = discord.AllowedMentions(everyone=False, users=True, roles=False)

        async def main() -> None:
            await configured()
            async with DiscordChannel(channel(), window=EditWindow(), mentions=wider) as port:
                await port.send_notice(notice())

        run(main)
        assert [p["allowed_mentions"] for p in sent.sent] == [
            {"parse": ["users"], "replied_user": True}
        ]


class TestBotDefault:
    """`ToolloopBot`'s policy comes from its settings."""

    @pytest.mark.parametrize(("ping", "policy"), [(True, REPLY_ONLY), (False, {"parse": []})])
    def test_the_reply_pings_its_author_only_when_configured(
        self, monkeypatch: pytest.MonkeyPatch, ping: bool, policy: dict[str, Any]
    ) -> None:
        """`ping_replied_user` decides the reply's ping; nothing in the text ever pings."""
        sent = Payloads(monkeypatch)

        async def main() -> None:
            bot = ToolloopBot(
                BotSettings(token="test", ping_replied_user=ping, access=EVERY_MESSAGE),
                provider=ScriptProvider(completed(PINGS)),
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            await dpytest.message("repeat after me", channel=0)
            await bot.turns.wait_idle()

        run(main)
        assert [p["allowed_mentions"] for p in sent.sent] == [policy]
        assert no_pings(replied_user=ping).to_dict() == policy
