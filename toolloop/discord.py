"""The Discord host (extra `toolloop-engine[discord]`, discord.py 2.x): docs/discord.md.

`ToolloopBot` is a whole bot on the loop; `DiscordChannel` and `TurnManager`
are its parts for a bot of your own. Importing this module imports
discord.py; `import toolloop` does not.
"""

from toolloop.effects.discord import (
    Access,
    AnyioClock,
    ApprovalButton,
    BadSetting,
    BatchLines,
    BotSettings,
    BotVoice,
    ChannelEvent,
    ChannelObserver,
    Clock,
    DeliveryError,
    DiscordApprovals,
    DiscordChannel,
    DiscordPersona,
    EditWindow,
    MissingSetting,
    Page,
    ToolloopBot,
    TurnApprovals,
    TurnManager,
    TurnRequest,
    Voice,
    WebhookVoice,
    addressed,
    closing_on_signals,
    cut_page,
    image_urls,
    no_pings,
    notice_embed,
    paginate,
    prompt,
    read_message,
    reply_chain,
)

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    # a whole bot
    "ToolloopBot",
    "BotSettings",
    "DiscordPersona",
    "closing_on_signals",
    # who it answers, what it reads of a message and a conversation, whom it may ping
    "Access",
    "addressed",
    "read_message",
    "image_urls",
    "prompt",
    "reply_chain",
    "no_pings",
    # who approves a tool call, with buttons in the channel
    "DiscordApprovals",
    "TurnApprovals",
    "ApprovalButton",
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
    "paginate",
    "Page",
    "notice_embed",
    "BatchLines",
    # what it tells an observer
    "ChannelEvent",
    "ChannelObserver",
    # errors
    "DeliveryError",
    "MissingSetting",
    "BadSetting",
]
