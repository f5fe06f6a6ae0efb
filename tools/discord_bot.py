"""`toolloop discord`: a Discord bot with the OpenAI-compatible provider and the demo's two tools.

Configured by the environment or a TOML file (`toolloop.effects.discord.settings`):
`DISCORD_TOKEN` is required; without `TOOLLOOP_BASE_URL` the embedded demo model is served on
loopback (and `OPENAI_API_KEY` is not read), so a bot token alone gives a working bot. A key
the provider refuses is one line naming the variable. SIGTERM and SIGINT close the bot,
suspending its turns to the journal or stopping them (`toolloop.effects.discord.shutdown`),
and it exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import discord

from toolloop.effects.discord.bot import ToolloopBot
from toolloop.effects.discord.settings import JOURNAL, TOKEN, BotSettings, MissingSetting
from toolloop.effects.discord.shutdown import closing_on_signals
from toolloop.effects.durable.journal import Journal, JournalError
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.tools import demo_model
from toolloop.tools.demo import demo_registry


def main(env: Mapping[str, str] | None = None, config: Path | None = None) -> int:
    """Run the bot until SIGTERM or SIGINT closes it (`shutdown`), then 0; 2 with a one-line
    error when the configuration is wrong.

    `config` is a TOML file of settings, each overridden by its environment variable.
    """
    env = os.environ if env is None else env
    try:
        settings = (
            BotSettings.from_env(env) if config is None else BotSettings.from_file(config, env)
        )
    except ValueError as error:  # MissingSetting included
        kind = "missing setting" if isinstance(error, MissingSetting) else "bad setting"
        print(f"toolloop discord: {kind}: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(settings))
    except demo_model.BadKey as error:
        print(f"toolloop discord: bad setting: {error}", file=sys.stderr)
        return 2
    except JournalError as error:
        print(f"toolloop discord: bad setting: {JOURNAL}: {error}", file=sys.stderr)
        return 2
    except (discord.LoginFailure, discord.PrivilegedIntentsRequired) as error:
        print(f"toolloop discord: {refused_login(error)}", file=sys.stderr)
        return 2
    return 0


def refused_login(error: discord.ClientException) -> str:
    """What to do when Discord refused the bot's login, in one line."""
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return (
            "Discord refused the Message Content Intent: switch it on (Discord Developer "
            "Portal > your application > Bot > Privileged Gateway Intents)"
        )
    return (
        f"Discord refused {TOKEN}: it is not a valid bot token (Discord Developer Portal > "
        "your application > Bot > Reset Token)"
    )


def model_provider(settings: BotSettings, url: str) -> OpenAICompatProvider:
    """The provider at `url` (`demo_model.endpoint`): the settings' endpoint, which is sent
    images when `vision` says its model reads them, or the embedded demo model."""
    return demo_model.provider(
        url,
        base_url=settings.base_url,
        model=settings.model,
        key=settings.api_key,
        accepts_images=settings.vision,
    )


async def serve(settings: BotSettings) -> None:
    """Log in and answer messages until the bot is closed (SIGTERM and SIGINT close it); the
    journal, if there is one, is opened first (a file that cannot be one is refused before
    the login)."""
    journal = None if settings.journal is None else await Journal.open(settings.journal)
    try:
        with demo_model.endpoint(settings.base_url) as url:
            provider = model_provider(settings, url)
            registry = demo_registry()
            async with (
                provider,
                ToolloopBot(settings, provider=provider, registry=registry, journal=journal) as bot,
            ):
                with closing_on_signals(bot):
                    await bot.start(settings.token)
    finally:
        if journal is not None:
            await journal.close()
