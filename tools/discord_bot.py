"""`toolloop discord`: a Discord bot with the OpenAI-compatible provider and the demo's two tools.

Configured by the environment (`toolloop.effects.discord.settings`): `DISCORD_TOKEN`
is required; without `TOOLLOOP_BASE_URL` the embedded demo model is served on
loopback, so a bot token alone gives a working bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping

from toolloop.effects.discord.bot import ToolloopBot
from toolloop.effects.discord.settings import BotSettings, MissingSetting
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.tools import demo_model
from toolloop.tools.demo import demo_registry


def main(env: Mapping[str, str] | None = None) -> int:
    """Run the bot until interrupted; 2 with a one-line error when the configuration is wrong."""
    try:
        settings = BotSettings.from_env(os.environ if env is None else env)
    except ValueError as error:  # MissingSetting included
        kind = "missing setting" if isinstance(error, MissingSetting) else "bad setting"
        print(f"toolloop discord: {kind}: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))
    return 0


async def serve(settings: BotSettings) -> None:
    """Log in and answer messages until the bot is closed."""
    with demo_model.endpoint(settings.base_url) as url:
        provider = OpenAICompatProvider(
            base_url=url,
            model=settings.model or demo_model.MODEL,
            api_key=settings.api_key,
            name="demo" if settings.base_url is None else "endpoint",
        )
        async with (
            provider,
            ToolloopBot(settings, provider=provider, registry=demo_registry()) as bot,
        ):
            await bot.start(settings.token)
