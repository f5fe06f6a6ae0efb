"""The conversation read from Discord: the reply chain a message ends (as llmcord reads it).

With `conversation = "reply_chain"` the model's context is not the bot's memory
but what Discord holds, so it survives a restart and follows the branch a user
replies to. From the message that triggers the turn, each step goes to:

* the message it replies to (same channel; a deleted one ends the chain);
* for one of the bot's own messages that replies to nothing, the message just
  before it when that is the bot's too: a reply longer than one Discord message
  continues in new ones that do not reply, and their texts are joined;
* for a message in a thread that replies to nothing, the message the thread was
  started from.

At most `limit` messages are read, the trigger included (one request each at
most; discord.py's cache answers for the recent ones).
"""

from __future__ import annotations

from collections.abc import Callable

import discord

from toolloop.effects.discord.messages import thread_opener

Mine = Callable[[discord.Message], bool]
"""Whether a message is the bot's own (its user's, or its persona webhook's)."""


async def reply_chain(message: discord.Message, *, limit: int, mine: Mine) -> list[discord.Message]:
    """`message` and up to `limit - 1` messages it follows, oldest first."""
    chain = [message]
    while len(chain) < limit:
        parent = await parent_of(chain[-1], mine)
        if parent is None or any(parent.id == seen.id for seen in chain):
            break
        chain.append(parent)
    return chain[::-1]


async def parent_of(message: discord.Message, mine: Mine) -> discord.Message | None:
    """The message `message` follows in its conversation, or None where the chain ends."""
    reference = message.reference
    if reference is not None and reference.message_id is not None:
        return await replied_to(message, reference)
    if mine(message):
        before = await previous(message)
        return before if before is not None and mine(before) else None
    if isinstance(message.channel, discord.Thread):
        opener = await thread_opener(message.channel)
        return opener if opener is not None and opener.id != message.id else None
    return None


async def replied_to(
    message: discord.Message, reference: discord.MessageReference
) -> discord.Message | None:
    """The message `reference` points at in `message`'s channel; None when it is gone or
    elsewhere (a forwarded message, another channel)."""
    if isinstance(reference.resolved, discord.Message):
        return reference.resolved
    if reference.channel_id != message.channel.id or reference.message_id is None:
        return None
    try:
        return await message.channel.fetch_message(reference.message_id)
    except discord.HTTPException:
        return None


async def previous(message: discord.Message) -> discord.Message | None:
    """The message just before `message` in its channel, if Discord gives it."""
    try:
        async for before in message.channel.history(before=message, limit=1):
            return before
    except discord.HTTPException:
        return None
    return None
