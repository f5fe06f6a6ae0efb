"""Approval buttons (SPEC 6c) on discord.py's own objects, against the loopback Discord.

The bot's messages go to `DiscordServer` through discord.py's real HTTP client;
a press or a modal submission is a real INTERACTION_CREATE payload parsed by
discord.py's gateway parser (`DiscordServer.press`, `submit`), answered through
the real interaction callback route. The tool `purge` requires approval; the
model is the scripted provider: it asks for `purge`, then says what it read.
The approval timeout runs its real 300 s on looptime's virtual event loop clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import discord
import discord.ext.test as dpytest
import looptime
import pytest
from discord.ext.test import backend

from tests.discord.conftest import EVERY_MESSAGE, channel, configured, embeds, run
from tests.discord.discord_server import APPLICATION_ID, Callback, DiscordServer, refusal
from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.discord import Access, BotSettings, DiscordApprovals, ToolloopBot
from toolloop.effects.discord.approvals import (
    EXPIRED,
    NOT_YOURS,
    TEMPLATE,
    TIMED_OUT,
    WITHDRAWN,
    PromptKey,
    call_key,
    opened,
    request_embed,
)
from toolloop.effects.in_memory import MemoryKillSignal
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import ApprovalDecision, ApprovalRequest, JsonObject, Verdict, args_digest

PURGE = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "token": {"type": "string", "writeOnly": True},
    },
}
ARGS = {"count": 5, "token": "s3cret"}


def member(index: int) -> discord.Member:
    found = dpytest.get_config().members[index]
    assert isinstance(found, discord.Member)
    return found


def purge_registry(ran: list[JsonObject]) -> ToolRegistry:
    """`purge`, which records its arguments, and waits for a person before each call."""

    async def purge(args: JsonObject, call: ToolCall) -> JsonObject:
        ran.append(args)
        return {"purged": args["count"]}

    registry = ToolRegistry()
    registry.register(purge, name="purge", parameters=PURGE, requires_approval=True)
    return registry


class Scene:
    """A bot whose model asks for `purge`, on dpytest's objects and the loopback Discord."""

    def __init__(self, server: DiscordServer, bot: ToolloopBot, provider: ScriptProvider) -> None:
        self.server, self.bot, self.provider = server, bot, provider
        self.ran: list[JsonObject] = []

    def prompts(self) -> list[dict[str, Any]]:
        """The channel's messages with buttons: the approval requests."""
        return self.server.with_components(channel(0).id)

    async def asked(self) -> dict[str, Any]:
        """The request message as it is once the bot posted it (a copy: later edits apply
        to the server's)."""
        await until(lambda: bool(self.prompts()))
        return copy.deepcopy(self.prompts()[-1])

    async def press(self, label: str, by: int) -> Callback:
        """Member `by` presses the request's button labelled `label`."""
        prompt = await self.asked()
        return await self.server.press(
            self.bot, int(prompt["id"]), custom_id(prompt, label), member(by)
        )

    def said(self) -> list[str]:
        """What the bot's messages without buttons say (its replies)."""
        return [
            m["content"]
            for m in self.server.messages.values()
            if m["channel_id"] == str(channel(0).id) and not m.get("components")
        ]


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 10 s) for something another task does."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)


def custom_id(prompt: dict[str, Any], label: str) -> str:
    buttons = [b for row in prompt["components"] for b in row["components"]]
    return next(b["custom_id"] for b in buttons if b["label"] == label)


def buttons(prompt: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each button's label and whether it is disabled."""
    return [
        (b["label"], b.get("disabled", False))
        for row in prompt["components"]
        for b in row["components"]
    ]


def footer(prompt: dict[str, Any]) -> str | None:
    embed = prompt["embeds"][0]
    text: str | None = embed.get("footer", {}).get("text")
    return text


@contextlib.asynccontextmanager
async def scene(
    monkeypatch: pytest.MonkeyPatch, access: Access = EVERY_MESSAGE, *scripts: Any
) -> AsyncIterator[Scene]:
    """A started bot (its `setup_hook` run) whose model asks for `purge` with `ARGS`."""
    async with DiscordServer() as server:
        provider = ScriptProvider(*(scripts or (calling("purge", ARGS), completed("Done."))))
        ran: list[JsonObject] = []
        bot = await started(server, monkeypatch, provider, purge_registry(ran), access)
        playing = Scene(server, bot, provider)
        playing.ran = ran
        yield playing
        bot.turns.kill(channel(0).id)
        await bot.turns.wait_idle()
        await bot.http.close()


async def started(
    server: DiscordServer,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptProvider,
    registry: ToolRegistry,
    access: Access = EVERY_MESSAGE,
) -> ToolloopBot:
    bot = ToolloopBot(
        BotSettings(token="test", access=access),
        provider=provider,
        registry=registry,
        intents=discord.Intents.all(),
    )
    await configured(bot)
    await server.connect(bot, monkeypatch)
    bot._connection.application_id = APPLICATION_ID
    await bot.setup_hook()
    return bot


def read_by_model(provider: ScriptProvider) -> str:
    """The response of the call, as the model's second request carried it."""
    return str(provider.requests[1].once.function_history[-1].response)


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


def member_name(index: int) -> str:
    return member(index).display_name


def text_inputs(modal: Callback) -> list[str]:
    """The custom ids of a modal's text inputs."""
    found: list[str] = []

    def walk(component: dict[str, Any]) -> None:
        if component["type"] == 4:
            found.append(component["custom_id"])
        for child in [*component.get("components", []), *[component.get("component")]]:
            if child:
                walk(child)

    for row in modal.data["components"]:
        walk(row)
    return found


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
            async with DiscordServer() as server:
                ran: list[JsonObject] = []
                provider = ScriptProvider(calling("purge", ARGS), completed("Done."))
                bot = ToolloopBot(
                    BotSettings(token="test", access=EVERY_MESSAGE),
                    provider=provider,
                    registry=purge_registry(ran),
                    intents=discord.Intents.all(),
                )
                await configured(bot)
                role = backend.make_role("approvers", channel(0).guild)
                await dpytest.add_role(member(1), role)
                bot.approvals.access = Access(answer_all=True, approver_roles=frozenset({role.id}))
                await server.connect(bot, monkeypatch)
                bot._connection.application_id = APPLICATION_ID
                await bot.setup_hook()
                playing = Scene(server, bot, provider)
                await dpytest.message("clean up", channel=0)
                answer = await playing.press("Approve", by=1)
                await bot.turns.wait_idle()
                await bot.http.close()
                return answer, ran

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


def member_id(index: int) -> int:
    return member(index).id


def old_channel(prompt: dict[str, Any]) -> int:
    return int(prompt["channel_id"])


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
