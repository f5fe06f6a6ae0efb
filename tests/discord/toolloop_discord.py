"""`toolloop discord` against the loopback Discord: `python -m tests.discord.toolloop_discord
API_URL GATEWAY_URL`.

The command itself (`toolloop.tools.discord_bot.main`), configured by its
environment as a bot author configures it; only Discord's two addresses,
which discord.py keeps as class attributes rather than settings, point at the
test's server (`discord_server.DiscordServer`: its REST routes and its gateway).
"""

from __future__ import annotations

import sys

import discord
import yarl

from toolloop.tools import discord_bot

if __name__ == "__main__":
    discord.http.Route.BASE = sys.argv[1]
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(sys.argv[2])
    sys.exit(discord_bot.main())
