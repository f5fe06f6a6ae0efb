"""The conversation read from Discord's reply chain: it survives a restart, follows the
branch replied to, joins the bot's multi-message replies, and is bounded."""

from __future__ import annotations

from typing import Any

import discord
import discord.ext.test as dpytest
from discord.ext.test import backend
from discord.ext.test import factories as facts

from tests.discord.conftest import EVERY_MESSAGE, configured, run, thread_from
from tests.effects.harness import ScriptProvider, completed
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.registry import ToolRegistry


def posted(author: Any, content: str, reply_to: int | None = None) -> dict[str, Any]:
    """A message already in channel 0's history (as after a restart: the bot never saw it)."""
    place = dpytest.get_config().channels[0]
    data: dict[str, Any] = facts.make_message_dict(place, author, content=content)
    if reply_to is not None:
        data["message_reference"] = {
            "message_id": reply_to,
            "channel_id": place.id,
            "guild_id": place.guild.id,
        }
    history = backend._cur_config.messages  # type: ignore[attr-defined]
    history.setdefault(place.id, []).append(data)
    return data


def asked_after_a_restart(limit: int = 25) -> list[tuple[str, Any]]:
    """(author, content) of each context item a freshly started bot gives the model when a
    user replies to the second message of its earlier two-message answer."""
    provider = ScriptProvider(completed("Berlin."))

    async def main() -> None:
        bot = ToolloopBot(
            BotSettings(
                token="test",
                access=EVERY_MESSAGE,
                conversation="reply_chain",
                reply_chain_messages=limit,
            ),
            provider=provider,
            registry=ToolRegistry(),
            intents=discord.Intents.all(),
        )
        await configured(bot)
        alice, bob = dpytest.get_config().members
        me = bot.user
        posted(bob, "Anyone for lunch?")
        question = posted(alice, "What is the capital of France?")
        first = posted(me, "Paris is the capital of France,", reply_to=question["id"])
        second = posted(me, "and its largest city.")  # a reply's next page replies to nothing
        trigger = posted(alice, "And of Germany?", reply_to=second["id"])
        assert first["id"] < second["id"] < trigger["id"]
        backend.get_state().parse_message_create(trigger)
        await dpytest.run_all_events()
        await bot.turns.wait_idle()

    run(main)
    (request,) = provider.requests
    return [(i.author, i.content) for i in request.once.context if i.kind != "system"]


class TestReplyChain:
    """`conversation = "reply_chain"` reads the conversation from Discord."""

    def test_a_restarted_bot_reads_the_reply_chain_from_discord(self) -> None:
        """Nothing in memory: the question, the bot's two-message answer joined as one
        reply, then the follow-up; the unrelated message before them is left out."""
        alice = "TestUser0_0_nick"
        assert asked_after_a_restart() == [
            (alice, "What is the capital of France?"),
            ("FakeApp", "Paris is the capital of France,\nand its largest city."),
            (alice, "And of Germany?"),
        ]

    def test_the_chain_is_bounded(self) -> None:
        """`reply_chain_messages = 2`: the trigger and the one message it replies to."""
        assert asked_after_a_restart(limit=2) == [
            ("FakeApp", "and its largest city."),
            ("TestUser0_0_nick", "And of Germany?"),
        ]

    def test_the_transcript_is_not_kept(self) -> None:
        """With the reply chain, the bot holds no conversation of its own."""

        async def main() -> dict[int, Any]:
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE, conversation="reply_chain"),
                provider=ScriptProvider(completed("Hi.")),
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            await dpytest.message("Hello", channel=0)
            await bot.turns.wait_idle()
            return {k: v for k, v in bot.transcripts.items() if v}

        assert run(main) == {}

    def test_a_thread_message_that_replies_to_nothing_follows_the_threads_opener(
        self,
    ) -> None:
        """In a thread started from "Plan the trip to Kyoto", "And hotels?" replies to
        nothing: the chain goes on to the message the thread was started from."""
        provider = ScriptProvider(completed("Two ryokans."))

        async def main() -> list[Any]:
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE, conversation="reply_chain"),
                provider=provider,
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            config = dpytest.get_config()
            opener = await dpytest.message("Plan the trip to Kyoto", channel=0)
            await bot.turns.wait_idle()
            provider.requests.clear()
            thread = thread_from(opener, "Kyoto")
            data = facts.make_message_dict(thread, config.members[1], content="And hotels?")
            data["guild_id"] = thread.guild.id
            backend.get_state().parse_message_create(data)
            await dpytest.run_all_events()
            await bot.turns.wait_idle()
            (request,) = provider.requests
            return [item.content for item in request.once.context if item.kind != "system"]

        assert run(main) == ["Plan the trip to Kyoto", "And hotels?"]
