"""The approval tests' scene: a bot whose model asks for `purge`, on the loopback Discord.

The bot's messages go to `DiscordServer` through discord.py's real HTTP client;
a press or a modal submission is a real INTERACTION_CREATE payload parsed by
discord.py's gateway parser (`DiscordServer.press`, `submit`), answered through
the real interaction callback route. The tool `purge` requires approval; the
model is the scripted provider: it asks for `purge`, then says what it read.
Shared by `test_approvals.py` (the request, decisions, who may answer) and
`test_approvals_retired.py` (requests withdrawn, expired, resumed, refused).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import EVERY_MESSAGE, channel, configured
from tests.discord.discord_server import APPLICATION_ID, Callback, DiscordServer
from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.discord import Access, BotSettings, ToolloopBot
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import JsonObject

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


def member_id(index: int) -> int:
    return member(index).id


def old_channel(prompt: dict[str, Any]) -> int:
    return int(prompt["channel_id"])
