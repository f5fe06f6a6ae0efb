"""The Discord host (extra `toolloop-engine[discord]`, discord.py 2.x): docs/discord.md.

`ToolloopBot` is a whole bot on the loop; `DiscordChannel` and `TurnManager`
are its parts for a bot of your own. Importing this module imports
discord.py; `import toolloop` does not.
"""

from toolloop.effects.discord import (
    AnyioClock,
    BotSettings,
    BotVoice,
    Clock,
    DeliveryError,
    DiscordChannel,
    EditWindow,
    MissingSetting,
    Persona,
    ToolloopBot,
    TurnManager,
    TurnRequest,
    Voice,
    WebhookVoice,
    cut_page,
    notice_embed,
)

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    # a whole bot
    "ToolloopBot",
    "BotSettings",
    "Persona",
    # its parts, for a bot of your own
    "DiscordChannel",
    "TurnManager",
    "TurnRequest",
    "EditWindow",
    "Voice",
    "BotVoice",
    "WebhookVoice",
    "Clock",
    "AnyioClock",
    "cut_page",
    "notice_embed",
    # errors
    "DeliveryError",
    "MissingSetting",
]
