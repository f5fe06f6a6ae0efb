"""Who speaks in a Discord channel, and how: the bot or the persona's webhook, no pings.

A turn's messages are sent by a `Voice`: the bot itself (`BotVoice`, which can
reply to the message it answers) or the persona's webhook (`WebhookVoice`,
which speaks with the persona's name and avatar but cannot reply). Each voice
also takes back a message it sent in an earlier process, so a resumed turn
edits it on. Every message carries a mention policy (`no_pings()` by default),
so the model's text never pings `@everyone`, a role or a user; a notice is an
embed coloured by its level (`notice_embed`).
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs
import discord

from toolloop.effects.ports import Notice

Place = discord.TextChannel | discord.Thread | discord.DMChannel
"""Where a turn runs: a text channel, a thread or a direct message."""
Sent = discord.Message | discord.PartialMessage
"""A message the turn sent: a partial one is taken back from an earlier process."""
COLOURS = {
    "info": discord.Colour.blue(),
    "warning": discord.Colour.orange(),
    "error": discord.Colour.red(),
}
"""The embed colour of each notice level."""


@attrs.frozen(kw_only=True)
class DiscordPersona:
    """The webhook identity the persona speaks with."""

    name: str
    avatar_url: str | None = None


class Voice(Protocol):
    """Who sends a new message: the bot itself or the persona's webhook."""

    async def send(
        self,
        *,
        content: str | None = None,
        embed: discord.Embed | None = None,
        reply_to: int | None,
        mentions: discord.AllowedMentions,
        nonce: str | None = None,
    ) -> discord.Message:
        """A new message; `nonce`, when the voice can enforce one, makes asking twice
        within Discord's few minutes give back the first message."""
        ...

    async def sent(self, message_id: int) -> Sent:
        """A message this voice sent earlier, to edit (`DiscordChannel.restore`)."""
        ...


@attrs.frozen
class BotVoice:
    """The bot's own messages in `channel`; they can reply to a message."""

    channel: Place

    async def send(
        self,
        *,
        content: str | None = None,
        embed: discord.Embed | None = None,
        reply_to: int | None,
        mentions: discord.AllowedMentions,
        nonce: str | None = None,
    ) -> discord.Message:
        reference = None
        if reply_to is not None:
            reference = discord.MessageReference(
                message_id=reply_to, channel_id=self.channel.id, fail_if_not_exists=False
            )
        return await self.channel.send(
            content=content,
            embed=embed,  # type: ignore[arg-type]
            reference=reference,  # type: ignore[arg-type]
            allowed_mentions=mentions,
            nonce=nonce,  # type: ignore[arg-type]
        )

    async def sent(self, message_id: int) -> Sent:
        return self.channel.get_partial_message(message_id)


@attrs.frozen
class WebhookVoice:
    """The persona's messages through a channel's webhook (a webhook cannot reply)."""

    webhook: discord.Webhook
    persona: DiscordPersona
    thread: discord.Thread | None = None

    async def send(
        self,
        *,
        content: str | None = None,
        embed: discord.Embed | None = None,
        reply_to: int | None,
        mentions: discord.AllowedMentions,
        nonce: str | None = None,
    ) -> discord.Message:
        """Discord's webhooks take no nonce: a persona's message is made on each ask."""
        options: dict[str, Any] = {
            "username": self.persona.name,
            "wait": True,
            "allowed_mentions": mentions,
        }
        if self.persona.avatar_url is not None:
            options["avatar_url"] = self.persona.avatar_url
        if self.thread is not None:
            options["thread"] = self.thread
        if content is not None:
            options["content"] = content
        if embed is not None:
            options["embed"] = embed
        message: discord.Message = await self.webhook.send(**options)
        return message

    async def sent(self, message_id: int) -> Sent:
        """The webhook's message (only the webhook may edit it): one request."""
        thread = self.thread if self.thread is not None else discord.utils.MISSING
        return await self.webhook.fetch_message(message_id, thread=thread)


def no_pings(*, replied_user: bool = True) -> discord.AllowedMentions:
    """The host's default mention policy: the model's `@everyone`, `@here`, `<@user>` and
    `<@&role>` ping no one; a reply pings its author only with `replied_user`."""
    return discord.AllowedMentions(
        everyone=False, users=False, roles=False, replied_user=replied_user
    )


def notice_embed(notice: Notice) -> discord.Embed:
    """A notice as Discord shows it: its localized text, coloured by its level."""
    return discord.Embed(description=notice.text, colour=COLOURS.get(notice.level))
