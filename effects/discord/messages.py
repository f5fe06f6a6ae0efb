"""What the model reads of a user's Discord message: its text and its attachments.

The bot's own mention is taken out. A text attachment (a `text/*` type, JSON,
or a known text file ending) up to `TEXT_BYTES` is inlined under its name; an
image goes to a provider that accepts images as its URL (`image_urls`, at most
`IMAGES` of `IMAGE_BYTES` each); any other attachment is named with its size
and marked as not read, so the model knows it is there. A message with neither
text nor attachments (a sticker, an embed only) reads as empty, and the bot
does not answer it. A thread's first turn reads the message the thread was
started from as context.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import discord

TEXT_BYTES = 100_000
"""The largest text attachment inlined; a larger one is named, not read."""
TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|x-yaml|toml)\b)")
TEXT_ENDINGS = (".txt", ".md", ".py", ".json", ".csv", ".log", ".yaml", ".yml", ".toml", ".xml")
IMAGES = 4
"""The most images of one message sent to the model; any more are named, not sent."""
IMAGE_BYTES = 20_000_000
"""The largest image sent (OpenAI's own limit); a larger one is named, not sent."""
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
IMAGE_ENDINGS = (".png", ".jpg", ".jpeg", ".gif", ".webp")
"""The image formats vision models read (by content type, or by name without one)."""


def prompt(message: discord.Message, me: int) -> str:
    """The message's text as the model reads it: the bot's own mention taken out."""
    return re.sub(rf"<@!?{me}>", "", message.content).strip()


async def read_message(message: discord.Message, me: int, *, sent: Collection[str] = ()) -> str:
    """The message's text and its attachments, as the model reads them ("" for nothing);
    the attachments whose URL is in `sent` go to the model as images, so are not named."""
    parts = [prompt(message, me)]
    attachments = [a for a in message.attachments if a.url not in sent]
    parts += [await read_attachment(attachment) for attachment in attachments]
    return "\n\n".join(part for part in parts if part)


def image_urls(message: discord.Message) -> tuple[str, ...]:
    """The URLs of the message's first `IMAGES` image attachments of `IMAGE_BYTES` at most,
    for a provider that accepts images (its descriptor's `accepts_images`)."""
    fitting = [a.url for a in message.attachments if is_image(a) and a.size <= IMAGE_BYTES]
    return tuple(fitting[:IMAGES])


def is_image(attachment: discord.Attachment) -> bool:
    """An image a vision model reads, by its content type, or by its name without one."""
    if attachment.content_type:
        return attachment.content_type.partition(";")[0].strip().lower() in IMAGE_TYPES
    return attachment.filename.lower().endswith(IMAGE_ENDINGS)


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
