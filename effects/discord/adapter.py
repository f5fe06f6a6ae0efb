"""The Channel port on Discord: one message per stream, edits coalesced under the rate limit.

Each stream (`stream_started` .. `stream_ended`) gets its own messages, kept by
a `writer.StreamWriter` whose editor task shows the text as often as the
channel's `EditWindow` allows (5 messages or edits per 5 s), always ending on
the last text, so a slow or rate-limited edit never slows the model's stream.
`stop` (a kill, a shutdown) ends every editor at once. Who sends is a `Voice`
(`voices`): the bot, or the persona's webhook when one is configured; every
message and edit carries the channel's mention policy. Notices are embeds (a
tool's progress and "still working" update one status line in place); hidden
notices go to the thought-log channel, or nowhere. Ids are discord.py's ints;
the port's ids are their decimal strings.

With a journal (`toolloop.effects.durable`), the channel reports the messages
that hold each stream's text each time Discord confirmed a send or an edit
(`report_held`), and a resumed turn gives it those messages back (`restore`):
the stream made again continues the same message.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Hashable, Sequence
from typing import Any, Self

import anyio
import discord
from anyio.abc import TaskGroup

from toolloop.effects.discord.rate import AnyioClock, Clock, EditWindow
from toolloop.effects.discord.voices import BotVoice, Place, Sent, Voice, no_pings, notice_embed
from toolloop.effects.discord.writer import DeliveryError, StreamWriter
from toolloop.effects.durable.journal import HeldMessage
from toolloop.effects.durable.resume import HeldReport
from toolloop.effects.ports import Notice, StreamSpan
from toolloop.states.errors import UsageError

log = logging.getLogger("toolloop.discord")
STATUS_NOTICES = frozenset({"tool_progress", "still_working"})
"""Notices that update one status line in place rather than adding a message each."""


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
        self._writers: list[StreamWriter] = []
        self._current: StreamWriter | None = None
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
        self._continued: StreamWriter | None = None
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
        writer = StreamWriter(self, stream)
        self._start(writer)
        self._current = writer

    def _start(self, writer: StreamWriter) -> None:
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
        writer = StreamWriter(self, None, key=stream)
        writer.adopt(list(zip(messages, (message.text for message in held), strict=True)), text)
        self._start(writer)
        writer.wake()
        if continues:
            self._continued = writer
        else:
            writer.close()

    async def reported(self, writer: StreamWriter) -> None:
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

    async def new_message(
        self, content: str, stream: StreamSpan | None, page: tuple[int, int]
    ) -> discord.Message:
        """A stream's next message (`page`: its page and renewal, `StreamWriter`); the turn's
        first one replies to the stream's target. The bot's message of a stream named by its
        turn (`StreamSpan.turn`) or its target carries a nonce derived from them and `page`,
        which Discord enforces: asking again (a stream made again after a restart) gets the
        same message back."""
        target = None if stream is None else stream.reply_to
        reply_to = None if self._replied or target is None else int(target)
        self._replied = True
        voice = self.persona or self.bot
        nonce = None
        if voice is self.bot and stream is not None and (stream.turn or target) is not None:
            nonce = page_nonce(self.channel_id, stream, page)
        message = await voice.send(
            content=content, reply_to=reply_to, mentions=self.mentions, nonce=nonce
        )
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


def page_nonce(channel_id: int, stream: StreamSpan, page: tuple[int, int]) -> str:
    """The nonce of a stream's message: the same for the same channel, turn, target, attempt,
    iteration and page in every process, 25 characters (Discord's limit for a string)."""
    turn, at = (stream.turn, stream.reply_to), (stream.attempt, stream.iteration)
    name = f"{channel_id}/{turn}/{at}/{page}"
    return hashlib.sha256(name.encode()).hexdigest()[:25]
