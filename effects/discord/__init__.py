"""toolloop on Discord (extra `toolloop-engine[discord]`, discord.py 2.x): the channel adapter,
the per-channel turn manager, the approval buttons and a bot that runs the tool loop
(docs/discord.md)."""

from toolloop.effects.discord.access import Access, addressed
from toolloop.effects.discord.adapter import DiscordChannel
from toolloop.effects.discord.approvals import ApprovalButton, DiscordApprovals, TurnApprovals
from toolloop.effects.discord.batch import BatchLines
from toolloop.effects.discord.bot import ChannelEvent, ChannelObserver, ToolloopBot
from toolloop.effects.discord.chain import reply_chain
from toolloop.effects.discord.messages import image_urls, prompt, read_message
from toolloop.effects.discord.rate import AnyioClock, Clock, EditWindow
from toolloop.effects.discord.settings import BadSetting, BotSettings, MissingSetting
from toolloop.effects.discord.shutdown import closing_on_signals
from toolloop.effects.discord.split import Page, cut_page, paginate
from toolloop.effects.discord.turns import TurnManager, TurnRequest
from toolloop.effects.discord.voices import (
    BotVoice,
    DiscordPersona,
    Voice,
    WebhookVoice,
    no_pings,
    notice_embed,
)
from toolloop.effects.discord.writer import DeliveryError

__all__ = [
    "Access",
    "AnyioClock",
    "ApprovalButton",
    "BadSetting",
    "BatchLines",
    "BotSettings",
    "BotVoice",
    "ChannelEvent",
    "ChannelObserver",
    "Clock",
    "DeliveryError",
    "DiscordApprovals",
    "DiscordChannel",
    "DiscordPersona",
    "EditWindow",
    "MissingSetting",
    "Page",
    "ToolloopBot",
    "TurnApprovals",
    "TurnManager",
    "TurnRequest",
    "Voice",
    "WebhookVoice",
    "addressed",
    "closing_on_signals",
    "cut_page",
    "image_urls",
    "no_pings",
    "notice_embed",
    "paginate",
    "prompt",
    "read_message",
    "reply_chain",
]
