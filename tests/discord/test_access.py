"""Who may talk to the bot: the answer policy, allow- and block-lists, who may stop a reply.

Messages come in through dpytest (discord.py's own `on_message`); a reply to
the bot's message is built as Discord sends one (`message_reference` and the
`referenced_message`), since dpytest makes no replies.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import discord
import discord.ext.test as dpytest
import pytest
from discord.ext.test import backend
from discord.ext.test import factories as facts

from tests.discord.conftest import channel, configured, contents, run
from tests.effects.harness import ScriptProvider, completed, silent
from toolloop.effects.discord import Access, BadSetting, BotSettings, ToolloopBot
from toolloop.effects.registry import ToolRegistry


class Bot:
    """A ToolloopBot with `access`, on dpytest, answering "Yes." to every turn."""

    def __init__(self, access: Access, *, stop_phrase: str | None = None, script: Any = None):
        self.provider = ScriptProvider(*([script] if script else []), *[completed("Yes.")] * 5)
        self.client = ToolloopBot(
            BotSettings(token="test", access=access, stop_phrase=stop_phrase),
            provider=self.provider,
            registry=ToolRegistry(),
            intents=discord.Intents.all(),
        )

    @property
    def me(self) -> int:
        assert self.client.user is not None
        return self.client.user.id

    def prompts(self) -> list[list[str]]:
        """The user messages each model request saw, in order."""
        return [
            [i.content for i in r.once.context if i.kind != "system"]
            for r in self.provider.requests
        ]


def member(index: int) -> discord.Member:
    found = dpytest.get_config().members[index]
    assert isinstance(found, discord.Member)
    return found


async def reply_to(target: discord.Message, content: str, author: int = 0) -> None:
    """`author` replies to `target` in its channel, as Discord delivers a reply."""
    place = target.channel
    data = facts.make_message_dict(place, member(author), content=content)
    data["type"] = 19  # a reply
    data["message_reference"] = {"message_id": target.id, "channel_id": place.id}
    data["referenced_message"] = facts.dict_from_message(target)
    backend.get_state().parse_message_create(data)
    backend._cur_config.messages.setdefault(place.id, []).append(data)  # type: ignore[attr-defined]
    await dpytest.run_all_events()


async def said(bot: Bot, content: str, *, place: Any = 0, author: int = 0) -> list[str]:
    """Send `content` and wait: the channel's messages afterwards."""
    await dpytest.message(content, channel=place, member=author)
    await bot.client.turns.wait_idle()
    target = dpytest.get_config().channels[place] if isinstance(place, int) else place
    return contents(target)


class TestAnswerPolicy:
    """By default: mentioned or replied to, plus direct messages."""

    def test_a_message_not_addressed_to_the_bot_is_not_answered(self) -> None:
        """A plain message in a server channel: no turn, nothing in the transcript."""

        async def main() -> tuple[list[str], int]:
            bot = Bot(Access())
            await configured(bot.client)
            texts = await said(bot, "hi everyone")
            return texts, len(bot.client.transcripts.get(channel(0).id, []))

        assert run(main) == (["hi everyone"], 0)

    def test_a_mention_is_answered_without_the_mention_in_the_prompt(self) -> None:
        """`<@bot> what time is it?` reaches the model as `what time is it?`."""

        async def main() -> tuple[list[str], list[list[str]]]:
            bot = Bot(Access())
            await configured(bot.client)
            texts = await said(bot, f"<@{bot.me}> what time is it?")
            return texts, bot.prompts()

        texts, prompts = run(main)
        assert texts[-1] == "Yes." and prompts == [["what time is it?"]]

    def test_a_reply_to_the_bots_message_is_answered(self) -> None:
        """A Discord reply to one of the bot's messages addresses the bot; one to a user's
        message does not."""

        async def main() -> list[str]:
            bot = Bot(Access())
            await configured(bot.client)
            earlier = await channel(0).send("Earlier answer.")
            users = await dpytest.message("a user's message", channel=0, member=1)
            await reply_to(users, "not for the bot")
            await reply_to(earlier, "and then?")
            await bot.client.turns.wait_idle()
            return contents(channel(0))

        assert run(main) == [
            "Earlier answer.",
            "a user's message",
            "not for the bot",
            "and then?",
            "Yes.",
        ]

    @pytest.mark.parametrize("allowed", [True, False])
    def test_a_direct_message_is_answered_as_one_unless_switched_off(self, allowed: bool) -> None:
        """A DM is answered with `direct_message` set in the turn (SPEC 6 step 8); with the
        DM switch off it is not answered."""

        async def main() -> tuple[list[str], list[bool]]:
            bot = Bot(Access(direct_messages=allowed))
            await configured(bot.client)
            dm = await member(0).create_dm()
            texts = await said(bot, "hello", place=dm)
            return texts, [r.turn.direct_message for r in bot.provider.requests]

        texts, flags = run(main)
        assert (texts, flags) == ((["hello", "Yes."], [True]) if allowed else (["hello"], []))

    def test_every_message_is_answered_in_a_listed_channel_only(self) -> None:
        """`answer_channels`: plain messages there are answered, elsewhere not."""

        async def main() -> tuple[list[str], list[str]]:
            bot = Bot(Access())
            await configured(bot.client)
            access = Access(answer_channels=frozenset({channel(1).id}))
            bot.client.settings = attrs.evolve(bot.client.settings, access=access)
            return await said(bot, "one", place=0), await said(bot, "two", place=1)

        assert run(main) == (["one"], ["two", "Yes."])


class TestLists:
    """Allow-lists narrow who and where; block-lists always win."""

    @pytest.mark.parametrize(
        ("lists", "answered"),
        [
            ({"allow_users": "member1"}, [False, True]),
            ({"block_users": "member1"}, [True, False]),
            ({"allow_roles": "role"}, [False, True]),
            ({"block_roles": "role"}, [True, False]),
            ({"allow_users": "member0", "block_roles": "role"}, [True, False]),
            ({"allow_channels": "channel1"}, [False, False]),
            ({"block_channels": "channel0"}, [False, False]),
        ],
    )
    def test_who_and_where(self, lists: dict[str, str], answered: list[bool]) -> None:
        """Member 0 and member 1 (who has the role) each mention the bot in channel 0."""

        async def main() -> list[bool]:
            bot = Bot(Access())
            await configured(bot.client)
            role = backend.make_role("helpers", channel(0).guild)
            await dpytest.add_role(member(1), role)
            ids = {
                "member0": member(0).id,
                "member1": member(1).id,
                "role": role.id,
                "channel0": channel(0).id,
                "channel1": channel(1).id,
            }
            access = Access(**{k: frozenset({ids[v]}) for k, v in lists.items()})
            bot.client.settings = attrs.evolve(bot.client.settings, access=access)
            out = []
            for author in (0, 1):
                before = len(bot.provider.requests)
                await said(bot, f"<@{bot.me}> hi", author=author)
                out.append(len(bot.provider.requests) > before)
            return out

        assert run(main) == answered


class TestStopping:
    """Only the people who asked and moderators may stop a reply."""

    def stopped(self, stop: str, by: int) -> tuple[bool, str, Bot]:
        """Member 0 starts a turn that goes silent; member `by` stops it with `stop`
        ("/kill" or the stop phrase): whether it ended, `/kill`'s answer, the bot."""
        started = anyio.Event()
        bot = Bot(Access(), stop_phrase="halt", script=silent("Thinking", started=started))
        replies: list[str] = []

        async def main() -> bool:
            await configured(bot.client)
            await dpytest.message(f"<@{bot.me}> go", channel=0)
            await started.wait()
            if stop == "/kill":
                replies.append(bot.client.kill_reply(channel(0).id, member(by)))
            else:
                await dpytest.message("HALT", channel=0, member=by)
            killed = bot.client.turns.stopping(channel(0).id)
            if not killed:  # a stop that was refused changed nothing: end the test's turn
                bot.client.turns.kill(channel(0).id)
            with anyio.fail_after(5):
                await bot.client.turns.wait_idle()
            return killed

        ended = run(main)
        return ended, (replies or [""])[0], bot

    @pytest.mark.parametrize("stop", ["/kill", "stop phrase"])
    def test_the_requester_may_stop_it(self, stop: str) -> None:
        """The author of the message being answered stops the reply; the stop phrase never
        reaches the transcript."""
        ended, reply, bot = self.stopped(stop, by=0)
        assert ended and reply in ("Stopped.", "")
        assert [i.content for i in bot.client.transcripts[channel(0).id]] == ["go", "Thinking"]

    @pytest.mark.parametrize("stop", ["/kill", "stop phrase"])
    def test_someone_else_may_not(self, stop: str) -> None:
        """Another member's /kill is refused with a reason, their stop phrase ignored (and
        kept out of the transcript too)."""
        ended, reply, bot = self.stopped(stop, by=1)
        assert not ended
        assert reply in ("Only the person who asked, or a moderator, can stop this reply.", "")
        assert [i.content for i in bot.client.transcripts[channel(0).id]] == ["go", "Thinking"]

    def test_a_moderator_role_may(self) -> None:
        """A member with a configured moderator role stops anyone's reply."""

        async def main() -> bool:
            await configured()
            role = backend.make_role("mods", channel(0).guild)
            await dpytest.add_role(member(1), role)
            access = Access(moderator_roles=frozenset({role.id}))
            return access.may_stop(member(1), channel(0), {member(0).id})

        assert run(main) is True

    def test_manage_messages_may(self) -> None:
        """A member who may manage messages in the channel stops anyone's reply; one who may
        not, does not."""

        async def main() -> tuple[bool, bool]:
            await configured()
            access = Access()
            before = access.may_stop(member(1), channel(0), {member(0).id})
            janitor = discord.Permissions(104324161, manage_messages=True)  # dpytest's default
            role = backend.make_role("janitors", channel(0).guild, permissions=janitor.value)
            await dpytest.add_role(member(1), role)  # a role without moderator status
            return before, access.may_stop(member(1), channel(0), {member(0).id})

        assert run(main) == (False, True)


class TestSettings:
    """The access lists from the environment."""

    def test_id_lists_and_switches_are_read(self) -> None:
        """Ids separated by commas or blanks; the DM switch and answer-all."""
        settings = BotSettings.from_env(
            {
                "DISCORD_TOKEN": "abc",
                "TOOLLOOP_ALLOW_USERS": "11, 22 33",
                "TOOLLOOP_MODERATOR_ROLES": "44",
                "TOOLLOOP_DIRECT_MESSAGES": "no",
                "TOOLLOOP_ANSWER_ALL": "yes",
            }
        )
        assert settings.access == Access(
            allow_users=frozenset({11, 22, 33}),
            moderator_roles=frozenset({44}),
            direct_messages=False,
            answer_all=True,
        )

    def test_a_bad_id_names_its_variable(self) -> None:
        """One bad item in a list is an error naming the variable and quoting the item."""
        with pytest.raises(
            BadSetting,
            match=r"^TOOLLOOP_BLOCK_ROLES must be a whole number written with the digits 0-9, "
            r"got '#mods'$",
        ):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", "TOOLLOOP_BLOCK_ROLES": "12,#mods"})
