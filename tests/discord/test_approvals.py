"""Approval buttons (SPEC 6c): the request, the decisions and who may give them.

Against the loopback Discord with discord.py's real HTTP client and gateway
parser (`approval_scene`); the requests withdrawn, expired, resumed after a
restart or refused are in `test_approvals_retired.py`.
"""

from __future__ import annotations

from typing import Any

import discord.ext.test as dpytest
import pytest
from discord.ext.test import backend

from tests.discord.approval_scene import (
    ARGS,
    buttons,
    custom_id,
    footer,
    member,
    member_name,
    read_by_model,
    scene,
    text_inputs,
)
from tests.discord.conftest import channel, configured, run
from tests.discord.discord_server import Callback
from toolloop.effects.discord import Access, BotSettings
from toolloop.effects.discord.approvals import (
    EXPIRED,
    NOT_YOURS,
    TEMPLATE,
    PromptKey,
    call_key,
)
from toolloop.states import ApprovalRequest, JsonObject, Verdict, args_digest


class TestTheRequest:
    """What the channel shows when a call waits."""

    def test_it_shows_the_tool_its_redacted_arguments_and_who_asked_with_two_buttons(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A reply to the trigger naming `purge`, the arguments with the secret redacted,
        the user mentioned, and live Approve and Deny buttons whose ids name the turn, the
        call and the digest's prefix."""

        async def main() -> tuple[dict[str, Any], int, int, str]:
            async with scene(monkeypatch) as bot:
                trigger = await dpytest.message("clean up", channel=0)
                prompt = await bot.asked()
                call = bot.bot.approvals.pending()[0].call_id
                await bot.press("Approve", by=0)
                await bot.bot.turns.wait_idle()
                return prompt, trigger.id, member(0).id, call

        prompt, trigger, user, call = run(main)
        embed = prompt["embeds"][0]
        assert embed["title"] == "Run purge?"
        assert '"count": 5' in embed["description"]
        assert '"token": "[redacted]"' in embed["description"]
        assert "s3cret" not in str(prompt)
        assert embed["fields"] == [{"name": "Asked by", "value": f"<@{user}>", "inline": True}]
        assert buttons(prompt) == [("Approve", False), ("Deny", False)]
        key = PromptKey(trigger, call_key(call), args_digest(ARGS)[:12])
        assert [custom_id(prompt, "Approve"), custom_id(prompt, "Deny")] == [
            f"toolloop:approve:{key.turn}:{key.call}:{key.digest}",
            f"toolloop:deny:{key.turn}:{key.call}:{key.digest}",
        ]

    def test_a_custom_id_fits_discord_for_any_call_id(self) -> None:
        """A long or unusual call id is carried hashed: the id stays within 100 characters
        and matches the template discord.py routes by."""
        request = ApprovalRequest(
            tool="purge",
            call_id="call:" + "x" * 200,
            args={},
            channel_id="1",
            user_id="2",
            digest=args_digest({}),
        )
        key = PromptKey.of(2**64 - 1, request)
        for verdict in Verdict:
            made = key.custom_id(verdict)
            assert len(made) <= 100
            assert TEMPLATE.fullmatch(made)
        assert call_key("call_abc-1.2") == "call_abc-1.2"


class TestDecisions:
    """Approve runs the call; Deny's reason is what the model reads."""

    def test_approve_runs_the_tool_and_disables_the_buttons(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The asker approves: the interaction updates the request (buttons disabled, the
        outcome named), the tool runs with its real arguments, the model reads its result."""

        async def main() -> tuple[Callback, dict[str, Any], list[JsonObject], str, list[str]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                answer = await bot.press("Approve", by=0)
                await bot.bot.turns.wait_idle()
                return answer, bot.prompts()[-1], bot.ran, read_by_model(bot.provider), bot.said()

        answer, prompt, ran, read, said = run(main)
        assert answer.type == 7
        assert buttons(prompt) == [("Approve", True), ("Deny", True)]
        assert footer(prompt) == f"Approved by {member_name(0)}"
        assert ran == [ARGS]
        assert read == "{'purged': 5}"
        assert said == ["Done."]

    def test_deny_asks_a_reason_and_the_model_reads_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Deny opens a modal; its reason is in the denial the model reads, the tool never
        runs, and the request says who denied it and why."""

        async def main() -> tuple[Callback, Callback, dict[str, Any], list[JsonObject], str]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                modal = await bot.press("Deny", by=0)
                fields = text_inputs(modal)
                answer = await bot.server.submit(
                    bot.bot, modal, {fields[0]: "  not in this channel "}, member(0)
                )
                await bot.bot.turns.wait_idle()
                return modal, answer, bot.prompts()[-1], bot.ran, read_by_model(bot.provider)

        modal, answer, prompt, ran, read = run(main)
        assert modal.type == 9
        assert modal.data["title"] == "Deny the tool call"
        assert answer.type == 7
        assert ran == []
        assert "tool_call_denied" in read
        assert "A person declined this tool call: not in this channel" in read
        assert buttons(prompt) == [("Approve", True), ("Deny", True)]
        assert footer(prompt) == f"Denied by {member_name(0)}: not in this channel"

    def test_a_press_after_the_decision_answers_expired(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A second press that raced the first (the buttons were not yet disabled) decides
        nothing: it is told privately that the request expired; the tool ran once."""

        async def main() -> tuple[Callback, list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                prompt = await bot.asked()
                approve = custom_id(prompt, "Approve")
                await bot.press("Approve", by=0)
                late = await bot.server.press(bot.bot, int(prompt["id"]), approve, member(0))
                await bot.bot.turns.wait_idle()
                return late, bot.ran

        late, ran = run(main)
        assert (late.type, late.data["content"], late.ephemeral) == (4, EXPIRED, True)
        assert ran == [ARGS]


class TestWhoMayAnswer:
    """The asker, or a member with an approver role; anyone else is refused."""

    def test_another_user_is_refused_privately(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Another member's Approve and Deny are answered with an ephemeral refusal; the
        request stays open, and its asker's approval then runs the tool."""

        async def main() -> tuple[list[Callback], list[JsonObject], list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                refused = [await bot.press("Approve", by=1), await bot.press("Deny", by=1)]
                before = list(bot.ran)
                await bot.press("Approve", by=0)
                await bot.bot.turns.wait_idle()
                return refused, before, bot.ran

        refused, before, after = run(main)
        assert [(c.type, c.data["content"], c.ephemeral) for c in refused] == [
            (4, NOT_YOURS, True)
        ] * 2
        assert before == []
        assert after == [ARGS]

    def test_a_member_with_an_approver_role_may(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With `approver_roles`, a member holding that role approves another's call."""

        async def main() -> tuple[Callback, list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                role = backend.make_role("approvers", channel(0).guild)
                await dpytest.add_role(member(1), role)
                bot.bot.approvals.access = Access(
                    answer_all=True, approver_roles=frozenset({role.id})
                )
                await dpytest.message("clean up", channel=0)
                answer = await bot.press("Approve", by=1)
                await bot.bot.turns.wait_idle()
                return answer, bot.ran

        answer, ran = run(main)
        assert answer.type == 7
        assert ran == [ARGS]

    def test_may_approve_in_a_direct_message_is_the_asker_only(self) -> None:
        """Roles count only for a guild member: a plain user other than the asker may not."""

        async def main() -> tuple[bool, bool]:
            await configured()
            access = Access(approver_roles=frozenset({1}))
            user = member(1)._user
            return access.may_approve(user, member(1).id), access.may_approve(user, member(0).id)

        assert run(main) == (True, False)

    def test_the_approver_roles_are_read_from_the_environment(self) -> None:
        """`TOOLLOOP_APPROVER_ROLES` is a list of role ids, like the other lists."""
        settings = BotSettings.from_env(
            {"DISCORD_TOKEN": "abc", "TOOLLOOP_APPROVER_ROLES": "55, 66"}
        )
        assert settings.access.approver_roles == frozenset({55, 66})
