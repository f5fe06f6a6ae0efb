"""Approval requests that end without a plain decision (SPEC 6c): withdrawn by a kill,
expired with nobody answering, asked again after a restart, or refused.

Against the loopback Discord with discord.py's real HTTP client and gateway
parser (`approval_scene`). The approval timeout runs its real 300 s on looptime's
virtual event loop clock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio
import discord
import discord.ext.test as dpytest
import looptime
import pytest

from tests.discord.approval_scene import (
    ARGS,
    Scene,
    buttons,
    custom_id,
    footer,
    member,
    member_id,
    member_name,
    old_channel,
    purge_registry,
    read_by_model,
    scene,
    started,
    text_inputs,
    until,
)
from tests.discord.conftest import EVERY_MESSAGE, channel, configured, embeds, run
from tests.discord.discord_server import Callback, DiscordServer, refusal
from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.discord import BotSettings, DiscordApprovals, ToolloopBot
from toolloop.effects.discord.approvals import (
    EXPIRED,
    TEMPLATE,
    TIMED_OUT,
    WITHDRAWN,
    PromptKey,
    opened,
    request_embed,
)
from toolloop.effects.in_memory import MemoryKillSignal
from toolloop.effects.registry import ToolRegistry
from toolloop.states import ApprovalDecision, ApprovalRequest, JsonObject, Verdict, args_digest


class TestRetired:
    """A request nobody answers is retired with its buttons disabled."""

    def test_a_kill_withdraws_the_request(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """`/kill` while the call waits: the request says it was withdrawn, its buttons are
        disabled, and the tool never ran."""

        async def main() -> tuple[str, dict[str, Any], list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                await bot.asked()
                reply = bot.bot.kill_reply(channel(0).id)
                await bot.bot.turns.wait_idle()
                return reply, bot.prompts()[-1], bot.ran

        reply, prompt, ran = run(main)
        assert reply == "Stopped."
        assert footer(prompt) == WITHDRAWN
        assert buttons(prompt) == [("Approve", True), ("Deny", True)]
        assert ran == []

    def test_nobody_answering_within_the_timeout_expires_the_request(self) -> None:
        """The loop's own `TOOL_APPROVAL_TIMEOUT_MS` (300 s by default) runs out on a virtual
        event loop clock (looptime; dpytest answers in memory, so no socket waits on it):
        the request says it expired, its buttons are disabled, and the model reads that
        nobody approved the call in time."""

        async def main() -> tuple[list[discord.Embed], list[JsonObject], str, float]:
            ran: list[JsonObject] = []
            provider = ScriptProvider(calling("purge", ARGS), completed("Nobody answered."))
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE),
                provider=provider,
                registry=purge_registry(ran),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            started_at = asyncio.get_running_loop().time()
            await dpytest.message("clean up", channel=0)
            await bot.turns.wait_idle()
            waited = asyncio.get_running_loop().time() - started_at
            return embeds(channel(0)), ran, read_by_model(provider), waited

        loop = looptime.new_event_loop(start=0)
        try:
            shown, ran, read, waited = loop.run_until_complete(main())
        finally:
            loop.close()
        assert [(e.title, e.footer.text) for e in shown] == [("Run purge?", TIMED_OUT)]
        assert ran == []
        assert "Nobody approved this tool call within 300 s" in read
        assert 300 <= waited < 310

    def test_a_press_after_a_restart_answers_expired(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The bot asked, then a new bot instance started (the process restarted; no turn
        resumed): a press on the old request reaches the new bot through its registered
        dynamic items, is answered "This request expired." privately, and the dead buttons
        are disabled."""

        async def main() -> tuple[Callback, dict[str, Any], list[JsonObject]]:
            async with DiscordServer() as server:
                ran: list[JsonObject] = []
                provider = ScriptProvider(calling("purge", ARGS), completed("Done."))
                before = await started(server, monkeypatch, provider, purge_registry(ran))
                await dpytest.message("clean up", channel=0)
                old = Scene(server, before, provider)
                prompt = await old.asked()
                after = await started(server, monkeypatch, ScriptProvider(), purge_registry(ran))
                answer = await server.press(
                    after, int(prompt["id"]), custom_id(prompt, "Approve"), member(0)
                )
                await until(lambda: footer(server.messages[int(prompt["id"])]) is not None)
                shown = dict(server.messages[int(prompt["id"])])
                before.turns.kill(old_channel(prompt))
                await before.turns.wait_idle()
                await before.http.close()
                await after.http.close()
                return answer, shown, ran

        answer, shown, ran = run(main)
        assert (answer.type, answer.data["content"], answer.ephemeral) == (4, EXPIRED, True)
        assert footer(shown) == "Expired"
        assert shown["embeds"][0]["title"] == "Run purge?"
        assert buttons(shown) == [("Approve", True), ("Deny", True)]
        assert ran == []


class TestAfterARestart:
    """A turn that runs again after a restart (resumed from a journal) asks again under the
    same button ids, so the request's earlier message still reaches it."""

    def test_a_press_on_the_earlier_message_reaches_the_turn_asking_again(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The request's message from before the restart (posted by the process that died)
        and the one the resumed turn posts: Approve on the earlier one decides the waiting
        `ask` with the request's full digest, and both messages show the decision."""

        async def main() -> tuple[ApprovalDecision, dict[str, Any], dict[str, Any], Callback]:
            async with DiscordServer() as server:
                bot = await started(server, monkeypatch, ScriptProvider(), ToolRegistry())
                trigger = await dpytest.message("clean up", channel=0)
                request = ApprovalRequest(
                    tool="purge",
                    call_id="call_1",
                    args={"count": 5},
                    channel_id=str(channel(0).id),
                    user_id=str(member(0).id),
                    digest=args_digest({"count": 5}),
                )
                key = PromptKey.of(trigger.id, request)
                earlier = await channel(0).send(
                    embed=request_embed(request, None), view=opened(key)
                )
                port = bot.approvals.for_turn(trigger, MemoryKillSignal())
                decisions: list[ApprovalDecision] = []

                async def resumed() -> None:
                    decisions.append(await port.ask(request))

                async with anyio.create_task_group() as group:
                    group.start_soon(resumed)
                    await until(lambda: len(server.with_components(channel(0).id)) == 2)
                    await until(lambda: bool(bot.approvals.pending()))
                    answer = await server.press(
                        bot, earlier.id, key.custom_id(Verdict.APPROVE), member(0)
                    )
                await until(lambda: all(footer(m) for m in server.with_components(channel(0).id)))
                first, again = server.with_components(channel(0).id)
                await bot.http.close()
                return decisions[0], first, again, answer

        decision, first, again, answer = run(main)
        assert answer.type == 7
        assert decision == ApprovalDecision(
            verdict=Verdict.APPROVE, digest=args_digest({"count": 5}), by=str(member_id(0))
        )
        for shown in (first, again):
            assert footer(shown) == f"Approved by {member_name(0)}"
            assert buttons(shown) == [("Approve", True), ("Deny", True)]


def test_the_template_matches_only_approval_ids() -> None:
    """The dynamic item's template takes the two verdicts and nothing else."""
    assert TEMPLATE.fullmatch("toolloop:approve:1:call_1:0123456789ab")
    assert not TEMPLATE.fullmatch("toolloop:maybe:1:call_1:0123456789ab")
    assert not TEMPLATE.fullmatch("toolloop:approve:1:call_1:0123456789")
    assert not TEMPLATE.fullmatch("toolloop:reason:1:call_1:0123456789ab")


class TestRefusals:
    """Presses the bot cannot route, and a request Discord refuses to show."""

    def test_a_button_for_other_arguments_answers_expired(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A button of the same turn and call whose digest prefix is not the waiting
        request's (a prompt for other arguments) decides nothing: privately "expired"; the
        request stays open and its own button then runs the tool."""

        async def main() -> tuple[Callback, list[JsonObject], list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                prompt = await bot.asked()
                real = TEMPLATE.fullmatch(custom_id(prompt, "Approve"))
                assert real is not None
                other = PromptKey(int(real["turn"]), real["call"], "0" * 12)
                stale = await channel(0).send("an older request", view=opened(other))
                approve = other.custom_id(Verdict.APPROVE)
                answer = await bot.server.press(bot.bot, stale.id, approve, member(0))
                before = list(bot.ran)
                own = custom_id(prompt, "Approve")
                await bot.server.press(bot.bot, int(prompt["id"]), own, member(0))
                await bot.bot.turns.wait_idle()
                return answer, before, bot.ran

        answer, before, after = run(main)
        assert (answer.type, answer.data["content"], answer.ephemeral) == (4, EXPIRED, True)
        assert (before, after) == ([], [ARGS])

    def test_a_client_without_approvals_answers_expired_and_logs_why(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A bot of one's own that registered the buttons but keeps no `client.approvals`:
        a press is answered privately, and the log says what is missing."""

        async def main() -> Callback:
            async with DiscordServer() as server:
                client = await configured()
                await server.connect(client, monkeypatch)
                DiscordApprovals.install(client)
                key = PromptKey(1, "call_1", "0" * 12)
                message = await channel(0).send("a request", view=opened(key))
                answer = await server.press(
                    client, message.id, key.custom_id(Verdict.APPROVE), member(0)
                )
                await client.http.close()
                return answer

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            answer = run(main)
        assert (answer.type, answer.data["content"], answer.ephemeral) == (4, EXPIRED, True)
        assert "an approval button was pressed, but the client has no `approvals`" in [
            r.getMessage() for r in caplog.records
        ]

    def test_a_request_discord_refuses_fails_the_turn_visibly(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Discord refuses the request's message (403): the tool never runs, the turn fails
        with a notice in the channel, and the log names the channel and the status."""

        async def main() -> tuple[list[JsonObject], list[str], int]:
            async with scene(monkeypatch) as bot:
                bot.server.plan(
                    "POST", refusal(403, 50013, "Missing Permissions"), containing="Run purge?"
                )
                await dpytest.message("clean up", channel=0)
                await bot.bot.turns.wait_idle()
                notices = [
                    e["description"]
                    for m in bot.server.messages.values()
                    for e in m.get("embeds") or []
                ]
                return bot.ran, notices, channel(0).id

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            ran, notices, place = run(main)
        assert ran == []
        assert len(notices) == 1
        assert (
            f"Discord refused the approval request for purge in channel {place}: "
            "HTTP 403 (Missing Permissions)"
        ) in [r.getMessage() for r in caplog.records]

    def test_a_reason_submitted_after_the_request_was_withdrawn_answers_expired(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Deny's form was open when the reply was stopped: its submission decides nothing
        and is answered privately "expired"; the request still says it was withdrawn."""

        async def main() -> tuple[Callback, dict[str, Any], list[JsonObject]]:
            async with scene(monkeypatch) as bot:
                await dpytest.message("clean up", channel=0)
                modal = await bot.press("Deny", by=0)
                bot.bot.kill_reply(channel(0).id)
                await bot.bot.turns.wait_idle()
                fields = text_inputs(modal)
                answer = await bot.server.submit(bot.bot, modal, {fields[0]: "too late"}, member(0))
                return answer, bot.prompts()[-1], bot.ran

        answer, prompt, ran = run(main)
        assert (answer.type, answer.data["content"], answer.ephemeral) == (4, EXPIRED, True)
        assert footer(prompt) == WITHDRAWN
        assert buttons(prompt) == [("Approve", True), ("Deny", True)]
        assert ran == []
