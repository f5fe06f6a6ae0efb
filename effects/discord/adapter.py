"""The Channel port on Discord: one message per stream, edits coalesced under the rate limit.

Each stream (`stream_started` .. `stream_ended`) gets its own message. The
reader (the interpreter's sink) awaits only a stream's first message, so that a
channel Discord refuses fails the stream at once (SPEC 5, the channel fails);
after that `send_text` only appends, and a background editor per stream brings
the message up to date as often as the channel's `EditWindow` allows (5
messages or edits per 5 s), always ending on the last text. A slow or
rate-limited edit therefore never slows the model's stream. A message that
outgrows 2000 characters is cut on a paragraph, line, sentence or word
(`split.cut_page`) and continues in a new one. A refusal seen by an editor fails
the stream's next `send_text`. `stop` (a kill, a shutdown) ends every editor at
once.

Every message and edit carries the channel's mention policy (`no_pings()` by
default), so the model's text never pings `@everyone`, a role or a user.
Notices are embeds coloured by level (a tool's progress and "still working" update
one status line in place); the persona's webhook speaks the
persona's text and notices when one is configured. Hidden notices go to the
thought-log channel, or nowhere. Ids are discord.py's ints; the port's ids are
their decimal strings.

With a journal (`toolloop.effects.durable`), the channel reports the messages
that hold each stream's text each time Discord confirmed a send or an edit
(`report_held`), and a resumed turn gives it those messages back (`restore`):
the stream made again continues the same message.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Hashable, Sequence
from typing import Any, Protocol, Self

import anyio
import attrs
import discord
from anyio.abc import TaskGroup

from toolloop.effects.discord.rate import AnyioClock, Clock, EditWindow
from toolloop.effects.discord.split import LIMIT, Fence, Page, cut_page, last_page, open_fence
from toolloop.effects.durable.journal import HeldMessage
from toolloop.effects.durable.resume import HeldReport
from toolloop.effects.ports import Notice, StreamSpan
from toolloop.states.errors import ToolloopError, UsageError

log = logging.getLogger("toolloop.discord")
Place = discord.TextChannel | discord.Thread | discord.DMChannel
"""Where a turn runs: a text channel, a thread or a direct message."""
Sent = discord.Message | discord.PartialMessage
"""A message the turn sent: a partial one is taken back from an earlier process."""
UNKNOWN_MESSAGE = 10008
"""Discord's JSON error code for a message that no longer exists (someone deleted it)."""
RETRIES = 3
STATUS_NOTICES = frozenset({"tool_progress", "still_working"})
"""Notices that update one status line in place rather than adding a message each."""
"""Transient refusals (429 after discord.py's own retries, 5xx) in a row before giving up."""
COLOURS = {
    "info": discord.Colour.blue(),
    "warning": discord.Colour.orange(),
    "error": discord.Colour.red(),
}
"""The embed colour of each notice level."""


class DeliveryError(ToolloopError, RuntimeError):
    """Discord refused or failed a send: the stream ends `error` with this (SPEC 5)."""

    def __init__(self, channel_id: int, what: str, error: discord.HTTPException) -> None:
        super().__init__(
            f"Discord refused the {what} in channel {channel_id}: "
            f"HTTP {error.status} ({error.text or type(error).__name__})"
        )
        self.channel_id, self.status = channel_id, error.status


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
    ) -> discord.Message: ...

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
    ) -> discord.Message:
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


class DiscordChannel:
    """One turn's Channel port on a Discord channel or thread (`async with` it around the turn).

    Leaving the block waits for every stream's editor to send its last text, unless
    `stop` was called.
    """

    def __init__(
        self,
        channel: Place,
        *,
        window: EditWindow,
        persona: Voice | None = None,
        thought_log: discord.abc.Messageable | None = None,
        clock: Clock | None = None,
        mentions: discord.AllowedMentions | None = None,
    ) -> None:
        """`mentions` is sent with every message and edit (default `no_pings()`)."""
        self.channel_id, self.place = channel.id, channel
        self.mentions = no_pings() if mentions is None else mentions
        self.bot = BotVoice(channel)
        self.persona = persona
        self.thought_log = thought_log
        self.window = window
        self.clock: Clock = clock or AnyioClock()
        self.messages: list[Sent] = []
        """Every text message the turn delivered, in order."""
        self._writers: list[_Writer] = []
        self._current: _Writer | None = None
        self._replied = False
        self._group: TaskGroup | None = None
        self._stopped = False
        self._exited = False
        self._status: dict[int, discord.Message] = {}
        """Each voice's status line of progress notices since the last stream began."""
        self.cut_short = False
        """`stop` came while text was still to be shown: the reply is cut short."""
        self.report: HeldReport | None = None
        """Told the messages holding a stream after each confirmed send or edit."""
        self._continued: _Writer | None = None
        """A restored stream that the next stream continues."""

    async def __aenter__(self) -> Self:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._group is not None
        for writer in self._writers:  # a turn cancelled outside a stream leaves none open
            writer.close()
        try:
            return await self._group.__aexit__(*exc_info)
        finally:
            self._exited = True

    def stop(self) -> None:
        """Stop every stream's editor at once (a kill, a shutdown): no further request is made,
        and leaving the block no longer waits for the last text."""
        self._stopped = True
        self.cut_short = self.cut_short or any(not w.caught_up() for w in self._writers)
        for writer in self._writers:
            writer.stop()

    # -- the Channel port ------------------------------------------------------------------

    def stream_started(self, stream: StreamSpan) -> None:
        if self._group is None:
            raise UsageError("use the DiscordChannel as `async with DiscordChannel(...)`")
        self._status.clear()
        if self._continued is not None:  # the stream made again after a restart
            self._current, self._continued = self._continued, None
            self._current.span = self._current.key = stream
            return
        writer = _Writer(self, stream)
        self._start(writer)
        self._current = writer

    def _start(self, writer: _Writer) -> None:
        assert self._group is not None
        if self._stopped:
            writer.stop()
        self._writers.append(writer)
        self._group.start_soon(writer.edit_until_closed)

    def stream_ended(self, stream: StreamSpan) -> None:
        if self._current is not None and self._current.span == stream:
            self._current.close()
            self._current = None

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        writer = self._current
        if writer is None:
            raise UsageError("send_text outside a stream: the interpreter starts one first")
        await writer.append(text)

    async def send_notice(self, notice: Notice) -> None:
        """An embed; a progress notice edits the status line already shown since the last
        stream began, if there is one, rather than adding a message."""
        voice = self.persona if notice.identity is not None and self.persona else self.bot
        embed, status = notice_embed(notice), notice.key in STATUS_NOTICES
        shown = self._status.get(id(voice)) if status else None
        await self.request_slot(spread=False)
        try:
            if shown is not None:
                with contextlib.suppress(discord.NotFound):  # deleted: a new line follows
                    await shown.edit(embed=embed, allowed_mentions=self.mentions)
                    return
            message = await voice.send(embed=embed, reply_to=None, mentions=self.mentions)
        except discord.HTTPException as error:
            raise self.refused(error, f"{notice.key} notice") from error
        if status:
            self._status[id(voice)] = message

    async def send_hidden_notice(self, notice: Notice) -> None:
        if self.thought_log is None:
            return
        try:
            await self.thought_log.send(embed=notice_embed(notice), allowed_mentions=self.mentions)
        except discord.HTTPException as error:
            raise self.refused(error, f"{notice.key} thought") from error

    async def mark_cut(self, marker: str) -> None:
        """End the turn's last message with `marker` (a reply cut short), after the `async
        with` block: one edit, keeping the text Discord confirmed it shows, a refusal
        logged."""
        if not self._exited:
            raise UsageError("mark_cut is for after the turn's `async with DiscordChannel`")
        last = next((w for w in reversed(self._writers) if w.messages), None)
        if last is None:
            return
        try:
            await last.mark(marker)
        except discord.HTTPException as error:
            self.refused(error, "cut marker")

    # -- the journal (`toolloop.effects.durable.resume.HoldingChannel`) -----------------------

    def report_held(self, report: HeldReport) -> None:
        self.report = report

    async def restore(
        self, stream: Hashable, held: tuple[HeldMessage, ...], text: str, *, continues: bool
    ) -> None:
        """Take back an earlier process's messages of a stream and edit them up to `text`;
        with `continues`, the next stream appends to them. A webhook's message that is gone
        (deleted meanwhile) starts the stream's text afresh in a new message."""
        if self._group is None:
            raise UsageError("use the DiscordChannel as `async with DiscordChannel(...)`")
        voice = self.persona or self.bot
        try:
            messages = [await voice.sent(int(message.message_id)) for message in held]
        except discord.NotFound:
            log.warning(
                "a message of channel %s was deleted: the reply starts anew", self.channel_id
            )
            messages, held = [], ()
        self.messages += messages
        self._replied = True
        writer = _Writer(self, None, key=stream)
        writer.adopt(list(zip(messages, (message.text for message in held), strict=True)), text)
        self._start(writer)
        writer.wake()
        if continues:
            self._continued = writer
        else:
            writer.close()

    async def reported(self, writer: _Writer) -> None:
        """The writer's messages changed on Discord: tell the journal, if there is one."""
        if self.report is not None:
            await self.report(writer.key, writer.held())

    def delivered_message_ids(self) -> Sequence[str]:
        return tuple(str(message.id) for message in self.messages)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        """Stop the superseded streams' editors, then delete their messages (failures logged)."""
        doomed = {int(i) for i in ids}
        for writer in self._writers:
            if any(message.id in doomed for message in writer.messages):
                await writer.abandon()
        deleting = [m for m in self.messages if m.id in doomed]
        self.forget(doomed)
        for message in deleting:
            try:
                await message.delete()
            except discord.HTTPException as error:
                self.refused(error, "deletion")

    # -- what the turn said ----------------------------------------------------------------

    async def settle(self) -> None:
        """Wait until every stream's editor has ended: its last text confirmed by Discord,
        refused, or stopped. Then `delivered_texts` is what Discord holds."""
        for writer in self._writers:
            await writer.settled()

    def delivered_texts(self) -> list[str]:
        """Each stream's text that Discord holds (confirmed sends and edits), in order;
        streams that showed nothing are left out."""
        return [w.delivered for w in self._writers if w.delivered.strip()]

    def failure(self) -> DeliveryError | None:
        """The first refusal that ended a stream's messages, if any."""
        return next((w.failure for w in self._writers if w.failure is not None), None)

    def forget(self, ids: set[int]) -> None:
        """The messages `ids` are gone (deleted, by us or by someone): no stream holds them."""
        self.messages = [m for m in self.messages if m.id not in ids]
        for writer in self._writers:
            writer.forget(ids)

    # -- what the writers share ------------------------------------------------------------

    async def new_message(self, content: str, stream: StreamSpan | None) -> discord.Message:
        """A stream's next message; the turn's first one replies to the stream's target."""
        target = None if stream is None else stream.reply_to
        reply_to = None if self._replied or target is None else int(target)
        self._replied = True
        voice = self.persona or self.bot
        message = await voice.send(content=content, reply_to=reply_to, mentions=self.mentions)
        self.messages.append(message)
        return message

    async def request_slot(self, *, spread: bool = True) -> None:
        """Wait until one more message or edit keeps the channel's rate limit, and take it
        (`EditWindow.next_at`)."""
        at = self.window.next_at(self.clock.now(), spread=spread)
        if at > self.clock.now():
            await self.clock.sleep_until(at)
        self.window.record(self.clock.now())

    def refused(self, error: discord.HTTPException, what: str) -> DeliveryError:
        """The failure, logged with the channel and the HTTP status."""
        failure = DeliveryError(self.channel_id, what, error)
        log.warning("%s", failure)
        return failure


class _Writer:
    """One stream's messages: the reader appends, the editor task shows what was appended.

    Every request (a new message or an edit) waits for a slot of the channel's
    rate limit, and a page that is cut is never sent again, so the messages a
    stream costs are bounded by its text (`split.cut_page`).
    """

    def __init__(
        self, channel: DiscordChannel, span: StreamSpan | None, key: Hashable | None = None
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
        return cut_page(self.tail, fence=self.fence) is None and self._page().content == self.shown

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
        if whole:
            self.message, self.shown, self.shown_body = sent, page.content, page.body
        else:
            self.tail, self.fence = self.tail[len(page.body) :], page.carried
            self.message, self.shown, self.shown_body = None, "", ""
            self.done_text += page.body
            if sent is not None:
                self.pages.append((sent.id, page.body))
        await self.channel.reported(self)

    async def _send(self, content: str, message: Sent | None) -> Sent:
        """`content` as the stream's next message, or as `message`'s new text.

        A deleted message continues in a new one; a 429 or a 5xx (after discord.py's
        own retries) is `_Transient` up to `RETRIES` times in a row; anything else,
        or one more, is the stream's `DeliveryError`.
        """
        try:
            if message is None:
                message = await self.channel.new_message(content, self.span)
                self.messages.append(message)
            else:
                message = await message.edit(
                    content=content, allowed_mentions=self.channel.mentions
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
            return await self._send(content, None)
        except discord.HTTPException as error:
            if (error.status == 429 or error.status >= 500) and self._refusals < RETRIES:
                self._refusals += 1
                self.channel.refused(error, "message")
                raise _Transient from error
            raise self._failed(error) from error
        self._refusals = 0
        return message

    def _failed(self, error: discord.HTTPException) -> DeliveryError:
        self.failure = self.channel.refused(error, "message")
        return self.failure


class _Transient(Exception):
    """Discord refused a request for now: the writer tries again at its next slot."""
