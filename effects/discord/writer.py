"""One stream's Discord messages: the reader appends text, an editor task shows it.

The reader (the interpreter's sink, through `DiscordChannel.send_text`) awaits
only the stream's first message, so a channel Discord refuses fails the stream
at once (SPEC 5, the channel fails); after that it only appends, and the
writer's editor brings the message up to date at each slot of the channel's
rate limit, coalescing the edits a wait saved. A page that outgrows 2000
characters is cut (`split.cut_page`) and the text continues in a new message.
A deleted message continues in a new one; a 429 or a 5xx is retried at the next
slot a few times in a row; any other refusal is the stream's `DeliveryError`.
Each new message names its place in the stream (its page, and how many deleted
messages it replaces), from which the channel derives the message's nonce: a
stream made again after a restart asks for the same page with the same nonce and
gets the message made before back (Discord's `enforce_nonce`), edited to the
text it should hold, instead of a second one.
What Discord confirmed each message holds is kept, for the journal (`held`) and
for what the turn said (`delivered`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Protocol

import anyio
import discord

from toolloop.effects.discord.split import LIMIT, Fence, Page, cut_page, last_page, open_fence
from toolloop.effects.discord.voices import Sent
from toolloop.effects.durable.journal import HeldMessage
from toolloop.effects.ports import StreamSpan
from toolloop.states.errors import ToolloopError

log = logging.getLogger("toolloop.discord")
UNKNOWN_MESSAGE = 10008
"""Discord's JSON error code for a message that no longer exists (someone deleted it)."""
RETRIES = 3
"""Transient refusals (429 after discord.py's own retries, 5xx) in a row before giving up."""


class DeliveryError(ToolloopError, RuntimeError):
    """Discord refused or failed a send: the stream ends `error` with this (SPEC 5)."""

    def __init__(self, channel_id: int, what: str, error: discord.HTTPException) -> None:
        super().__init__(
            f"Discord refused the {what} in channel {channel_id}: "
            f"HTTP {error.status} ({error.text or type(error).__name__})"
        )
        self.channel_id, self.status = channel_id, error.status


class WriterHost(Protocol):
    """What a writer needs of its channel (`DiscordChannel`): the rate limit, new messages,
    the mention policy, and where refusals and confirmed messages are told."""

    channel_id: int
    mentions: discord.AllowedMentions

    async def request_slot(self, *, spread: bool = True) -> None: ...

    async def new_message(
        self, content: str, stream: StreamSpan | None, page: tuple[int, int]
    ) -> discord.Message: ...

    async def reported(self, writer: StreamWriter) -> None: ...

    def refused(self, error: discord.HTTPException, what: str) -> DeliveryError: ...

    def forget(self, ids: set[int]) -> None: ...


class StreamWriter:
    """One stream's messages: the reader appends, the editor task shows what was appended.

    Every request (a new message or an edit) waits for a slot of the channel's
    rate limit, and a page that is cut is never sent again, so the messages a
    stream costs are bounded by its text (`split.cut_page`).
    """

    def __init__(
        self, channel: WriterHost, span: StreamSpan | None, key: Hashable | None = None
    ) -> None:
        self.channel, self.span = channel, span
        self.key: Hashable = span if key is None else key
        """What the writer's reports name: its stream, or the key it was restored under."""
        self.tail = ""
        """The text of the stream's current page, sent or not yet."""
        self.fence: Fence | None = None
        """The code fence the current page reopens."""
        self.shown = ""
        """What the current message shows."""
        self.message: Sent | None = None
        self.messages: list[Sent] = []
        self.done_text = ""
        """The stream's text on its finished pages, as Discord confirmed them."""
        self.pages: list[tuple[int, str]] = []
        """Each finished page's message id and the text it holds."""
        self.page_no = 0
        """The current page's index in the stream (what its message's nonce names)."""
        self.renewed = 0
        """Messages of the stream that were deleted and continued in a new one."""
        self.shown_body = ""
        """The part of `tail` the current message shows, as Discord confirmed it."""
        self.failure: DeliveryError | None = None
        self.closed = False
        self._refusals = 0
        """Transient refusals in a row."""
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._turn = anyio.Lock()
        """Held by whoever sends: the reader for the first message, else the editor."""

    async def append(self, text: str) -> None:
        """The reader's side: a refusal fails it; only the stream's first message is awaited."""
        if self.failure is not None:
            raise self.failure
        self.tail += text
        if not self.messages and not self._scope.cancel_called:
            async with self._turn:
                while not self.messages and not self.caught_up():
                    await self._step(spread=False)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def adopt(self, held: list[tuple[Sent, str]], text: str) -> None:
        """Continue an earlier process's messages of the stream, which hold the start of `text`:
        the last one is the current page, edited up to the rest of `text` (none: a new one)."""
        if not held:
            self.tail = text
            return
        *finished, (last, shown) = held
        self.messages = [message for message, _ in held]
        self.pages = [(message.id, body) for message, body in finished]
        self.page_no = len(finished)
        self.done_text = "".join(body for _, body in finished)
        self.fence = open_fence(self.done_text)
        self.message, self.shown_body = last, shown
        self.shown = last_page(shown, fence=self.fence).content
        self.tail = text[len(self.done_text) :]

    def held(self) -> tuple[HeldMessage, ...]:
        """The messages holding the stream's text as Discord confirmed it, in order."""
        pages = [*self.pages]
        if self.message is not None:
            pages.append((self.message.id, self.shown_body))
        return tuple(HeldMessage(message_id=str(i), text=text) for i, text in pages)

    def stop(self) -> None:
        """Stop editing at once: no further request is made."""
        self._scope.cancel()

    async def abandon(self) -> None:
        """Stop editing and wait until the editor has (the messages are about to be deleted)."""
        self.stop()
        await self._done.wait()

    def forget(self, ids: set[int]) -> None:
        """The messages `ids` are deleted: the stream's text shown there is shown no more."""
        self.messages = [m for m in self.messages if m.id not in ids]
        self.pages = [(i, body) for i, body in self.pages if i not in ids]
        if self.message is not None and self.message.id in ids:
            self.message, self.shown, self.shown_body = None, "", ""
        if not self.messages:
            self.done_text = ""

    @property
    def delivered(self) -> str:
        """The stream's text that Discord holds."""
        return self.done_text + self.shown_body

    async def settled(self) -> None:
        """Return once the editor has ended: caught up, failed or stopped."""
        await self._done.wait()

    async def mark(self, marker: str) -> None:
        """Edit the stream's last message to end with `marker` in Discord's small print.

        The message keeps the text Discord confirmed it shows (what the turn said);
        text it had not shown yet stays unshown. Called once the editor has stopped.
        """
        message = self.message or self.messages[-1]
        shown = self.shown if message is self.message else getattr(message, "content", "") or ""
        suffix = f"\n-# {marker}"
        if len(shown) + len(suffix) > LIMIT:
            shown = shown[: LIMIT - len(suffix) - 1] + "…"
        await self.channel.request_slot(spread=False)
        await message.edit(content=shown + suffix, allowed_mentions=self.channel.mentions)

    async def edit_until_closed(self) -> None:
        """The editor: on each wake, catch the messages up; end once closed and caught up."""
        with self._scope:
            try:
                while self.failure is None and not (self.closed and self.caught_up()):
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    async with self._turn:
                        while self.failure is None and not self.caught_up():
                            await self._step()
            except DeliveryError as failure:
                self.failure = failure
        self._done.set()

    def caught_up(self) -> bool:
        """The messages show all the stream's text."""
        if cut_page(self.tail, fence=self.fence) is not None:  # a full page is still to send
            return False
        return last_page(self.tail, fence=self.fence).content == self.shown

    def _page(self) -> Page:
        return cut_page(self.tail, fence=self.fence) or last_page(self.tail, fence=self.fence)

    async def _step(self, *, spread: bool = True) -> None:
        """One request: finish a full page (the next one starts), or show the latest text.

        The text is read after the rate-limit slot, so the edits a wait saved are
        coalesced. The writer moves on only once Discord confirmed the request; a
        transient refusal leaves it where it was, for the next slot.
        """
        await self.channel.request_slot(spread=spread)
        page = self._page()
        whole = page.body == self.tail
        sent = self.message
        if page.content:  # a page of nothing but whitespace is not sent
            try:
                sent = await self._send(page.content, self.message)
            except _Transient:
                return
            if self.message is None and sent.content != page.content:
                # The nonce gave back the page's message an earlier process made: edit it next.
                self.message, self.shown, self.shown_body = sent, sent.content, ""
                await self.channel.reported(self)
                return
        if whole:
            self.message, self.shown, self.shown_body = sent, page.content, page.body
        else:
            self.tail, self.fence = self.tail[len(page.body) :], page.carried
            self.message, self.shown, self.shown_body = None, "", ""
            self.done_text += page.body
            self.page_no += 1
            if sent is not None:
                self.pages.append((sent.id, page.body))
        await self.channel.reported(self)

    async def _send(self, content: str, message: Sent | None) -> discord.Message:
        """`content` as the stream's next message, or as `message`'s new text.

        A deleted message continues in a new one; a 429 or a 5xx (after discord.py's
        own retries) is `_Transient` up to `RETRIES` times in a row; anything else,
        or one more, is the stream's `DeliveryError`.
        """
        try:
            if message is None:
                made = await self.channel.new_message(
                    content, self.span, (self.page_no, self.renewed)
                )
                self.messages.append(made)
                return self._confirmed(made)
            return self._confirmed(
                await message.edit(content=content, allowed_mentions=self.channel.mentions)
            )
        except discord.NotFound as error:
            if message is None or error.code != UNKNOWN_MESSAGE:
                raise self._failed(error) from error
            log.warning(
                "message %s in channel %s was deleted: the reply continues in a new one",
                message.id,
                self.channel.channel_id,
            )
            self.channel.forget({message.id})
            self.renewed += 1
            return await self._send(content, None)
        except discord.HTTPException as error:
            if (error.status == 429 or error.status >= 500) and self._refusals < RETRIES:
                self._refusals += 1
                self.channel.refused(error, "message")
                raise _Transient from error
            raise self._failed(error) from error

    def _confirmed(self, message: discord.Message) -> discord.Message:
        self._refusals = 0
        return message

    def _failed(self, error: discord.HTTPException) -> DeliveryError:
        self.failure = self.channel.refused(error, "message")
        return self.failure


class _Transient(Exception):
    """Discord refused a request for now: the writer tries again at its next slot."""
