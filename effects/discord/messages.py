"""What the model reads of a user's Discord message: its text and its attachments.

The bot's own mention is taken out. A text attachment (a `text/*` type, JSON,
or a known text file ending) up to `TEXT_BYTES` is inlined under its name; any
other attachment is named with its size and marked as not read, so the model
knows it is there. A message with neither text nor attachments (a sticker, an
embed only) reads as empty, and the bot does not answer it. A thread's first
turn reads the message the thread was started from as context.
"""

from __future__ import annotations

import re

import discord

TEXT_BYTES = 100_000
"""The largest text attachment inlined; a larger one is named, not read."""
TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|x-yaml|toml)\b)")
TEXT_ENDINGS = (".txt", ".md", ".py", ".json", ".csv", ".log", ".yaml", ".yml", ".toml", ".xml")


def prompt(message: discord.Message, me: int) -> str:
    """The message's text as the model reads it: the bot's own mention taken out."""
    return re.sub(rf"<@!?{me}>", "", message.content).strip()


async def read_message(message: discord.Message, me: int) -> str:
    """The message's text and its attachments, as the model reads them ("" for nothing)."""
    parts = [prompt(message, me)]
    parts += [await read_attachment(attachment) for attachment in message.attachments]
    return "\n\n".join(part for part in parts if part)


async def read_attachment(attachment: discord.Attachment) -> str:
    """A text attachment inlined under its name; anything else named and marked not read."""
    if is_text(attachment) and attachment.size <= TEXT_BYTES:
        try:
            data = await attachment.read()
            if len(data) <= TEXT_BYTES:
                return f"[attachment: {attachment.filename}]\n{data.decode('utf-8')}"
        except (discord.HTTPException, UnicodeDecodeError):
            pass
    return f"[attachment: {attachment.filename}, {size(attachment.size)}, not read]"


def is_text(attachment: discord.Attachment) -> bool:
    """Text by its content type, or by its name when Discord gave none."""
    if attachment.content_type:
        return bool(TEXT_TYPES.match(attachment.content_type))
    return attachment.filename.lower().endswith(TEXT_ENDINGS)


def size(count: int) -> str:
    """A byte count as people read it: 512 B, 3 KB, 2 MB."""
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if count >= scale:
            return f"{round(count / scale)} {unit}"
    return f"{count} B"


async def thread_opener(thread: discord.Thread) -> discord.Message | None:
    """The message a thread was started from (its id is the thread's), or None: a thread
    started on its own, or an opener Discord will not give."""
    if thread.starter_message is not None:
        return thread.starter_message
    if not isinstance(thread.parent, discord.TextChannel):
        return None
    try:
        return await thread.parent.fetch_message(thread.id)
    except discord.HTTPException:
        return None
