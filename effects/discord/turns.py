"""Per-channel turns: one at a time, a queue, follow-ups, genuine stops and the stale timeout.

A message that arrives while its channel's turn runs is a follow-up: it is
queued and the turn's control is told (`request_follow_up`), which interrupts
a first stream and waits behind a tool chain (SPEC 5, 6); when the turn ends,
everything queued meanwhile is answered by the next turn, as one batch. `/kill`
and the stop phrase are genuine stops: the running turn is killed, its
channel's editors stopped and the queue dropped. Each turn gets its own
`MemoryTurnControl`, so a kill can never reach the next turn; only the
follow-up count carries over. A turn that outlives `stale_after` seconds,
sending its last text included, is cancelled. `wait_idle()` waits for every
channel. A turn an earlier process left unfinished in the journal is resumed in
its channel's lane (`resume`), before the messages that arrive meanwhile.

Two ways to shut down, after which no message starts a turn (`closing`):
`close()` stops every turn as `/kill` does, each reply cut short marked as
ended by the shutdown, within a grace time; `suspend()` leaves the running
turns to the journal, cancelled where they stand, for the next start to resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import attrs
import discord

from toolloop.effects.discord.adapter import DiscordChannel
from toolloop.effects.discord.failures import cut_marker, failure_notice
from toolloop.effects.discord.voices import Place
from toolloop.effects.discord.writer import DeliveryError
from toolloop.effects.durable.journal import JournaledTurn
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.states import GenerationTurnResult, StreamError, TurnStatus

log = logging.getLogger("toolloop.discord")
TYPING_EVERY = 8.0
"""Seconds between two typing indicators (Discord shows one for about 10 s)."""
MARK_GRACE = 10.0
"""Seconds the cut marker's one edit may take (a rate-limit slot and Discord's answer)."""
SHUTDOWN_GRACE = 8.0
"""Seconds `close` gives the stopped turns to end (Docker sends SIGKILL 10 s after SIGTERM)."""


@attrs.frozen(kw_only=True)
class TurnRequest:
    """What one turn answers and the ports it runs with."""

    messages: tuple[discord.Message, ...]
    """The batch this turn answers, oldest first; the last is the reply target. Empty for a
    resumed turn, whose journal holds what it answers."""
    channel: DiscordChannel
    control: MemoryTurnControl
    resumed: JournaledTurn | None = None
    """The unfinished turn of an earlier process that this turn carries on."""


Respond = Callable[[TurnRequest], Awaitable[GenerationTurnResult]]
MayStop = Callable[[discord.abc.User, Place, frozenset[int]], bool]
"""Whether a user may stop the reply in a place that these users asked for."""
OpenChannel = Callable[[Place], Awaitable[DiscordChannel]]


def from_a_user(message: discord.Message) -> bool:
    """Not a bot's message, nor a webhook's (the persona's own included)."""
    return not message.author.bot and message.webhook_id is None


@attrs.define
class _Lane:
    """One Discord channel's queue and running turn."""

    pending: list[discord.Message] = attrs.field(factory=list)
    resumed: list[JournaledTurn] = attrs.field(factory=list)
    """Unfinished turns of an earlier process, answered before `pending`."""
    control: MemoryTurnControl | None = None
    channel: DiscordChannel | None = None
    """The running turn's channel port, once opened."""
    task: asyncio.Task[None] | None = None
    follow_ups: int = 0
    requesters: frozenset[int] = frozenset()
    """The authors of the running turn's batch."""


class TurnManager:
    """Runs each Discord channel's turns one at a time (`on_message`, `kill`, `wait_idle`)."""

    def __init__(
        self,
        respond: Respond,
        open_channel: OpenChannel,
        *,
        stop_phrase: str | None = None,
        stale_after: float = 600.0,
        locale: str = "en",
        may_stop: MayStop | None = None,
    ) -> None:
        """`locale` is the language of the failure notices and cut markers (`failures`);
        `may_stop(user, place, requesters)` says who may stop a reply with the stop phrase
        or `kill(..., by=user)` (by default anyone may)."""
        self._respond, self._open = respond, open_channel
        self._locale, self._may_stop = locale, may_stop
        self._stop_phrase = stop_phrase.strip().casefold() if stop_phrase else None
        self._stale_after = stale_after
        self._lanes: dict[int, _Lane] = {}
        self._suspending = False
        """`suspend` cancels the turns: a turn cut short is left as it stands, unmarked."""
        self.closing = False
        """`close` or `suspend` began: no message starts a turn any more."""

    async def on_message(self, message: discord.Message) -> None:
        """A user's message: a stop, the start of a turn, or a follow-up of the running one."""
        if self.closing or not from_a_user(message):
            return
        lane = self._lanes.setdefault(message.channel.id, _Lane())
        if self.is_stop_phrase(message):
            if self.may_stop(message.channel.id, message.author):
                self._stop(lane)
            return
        lane.pending.append(message)
        if lane.control is not None:
            lane.control.request_follow_up()
        if lane.task is None or lane.task.done():
            lane.task = asyncio.create_task(self._drain(lane, message.channel))  # type: ignore[arg-type]

    def resume(self, place: Place, journaled: JournaledTurn) -> None:
        """Carry on an earlier process's unfinished turn in its channel's lane, first."""
        if self.closing:
            return
        lane = self._lanes.setdefault(place.id, _Lane())
        lane.resumed.append(journaled)
        if lane.task is None or lane.task.done():
            lane.task = asyncio.create_task(self._drain(lane, place))

    def is_stop_phrase(self, message: discord.Message) -> bool:
        """The message is the stop phrase (any case, blanks around it ignored)."""
        phrase = self._stop_phrase
        return phrase is not None and message.content.strip().casefold() == phrase

    def may_stop(self, channel_id: int, user: discord.abc.User) -> bool:
        """`user` may stop the channel's running reply (`may_stop` of the constructor)."""
        lane = self._lanes.get(channel_id)
        if lane is None or lane.channel is None or self._may_stop is None:
            return True
        return self._may_stop(user, lane.channel.place, lane.requesters)

    def kill(self, channel_id: int) -> bool:
        """`/kill`: stop the channel's turn and drop its queue; False when nothing ran.

        Check `may_stop` first: this stops whoever asks.
        """
        lane = self._lanes.get(channel_id)
        if lane is None or lane.control is None:
            return False
        self._stop(lane)
        return True

    def stopping(self, channel_id: int) -> bool:
        """The channel's running turn was told to stop (a kill or the stop phrase)."""
        lane = self._lanes.get(channel_id)
        return lane is not None and lane.control is not None and lane.control.killed.is_set()

    def running(self) -> int:
        """How many channels have a turn running or queued."""
        return len(self._running_tasks())

    def busy(self, channel_id: int) -> bool:
        """A turn runs or waits in the channel."""
        lane = self._lanes.get(channel_id)
        return lane is not None and lane.task is not None and not lane.task.done()

    async def wait_idle(self) -> None:
        """Wait until no channel has a turn running or queued."""
        while tasks := self._running_tasks():
            await asyncio.wait(tasks)  # a cancelled wait leaves the turns running

    async def close(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Shut down: stop every channel's turn as `/kill` does (its reply marked as cut by
        the shutdown) and wait until they ended; the turns still running after `grace`
        seconds are cancelled where they stand."""
        self.closing = True
        for lane in self._lanes.values():
            self._stop(lane)
        with anyio.move_on_after(grace) as waited:
            await self.wait_idle()
        if waited.cancelled_caught:
            log.warning("turns still running after %s s, cancelled: %d", grace, self.running())
            await self._cancel_running()

    async def suspend(self) -> None:
        """Shut down leaving the running turns to the journal: each is cancelled where it
        stands, its messages unmarked, for the next start to resume
        (`ToolloopBot.resume_turns`); the queued messages are dropped."""
        self.closing = self._suspending = True
        await self._cancel_running()

    async def _cancel_running(self) -> None:
        """Drop every queue and cancel every running turn; wait until they are gone."""
        for lane in self._lanes.values():
            lane.pending.clear()
            lane.resumed.clear()
        running = self._running_tasks()
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _running_tasks(self) -> list[asyncio.Task[None]]:
        """Every channel's task that has a turn running or queued."""
        return [lane.task for lane in self._lanes.values() if lane.task and not lane.task.done()]

    def _stop(self, lane: _Lane) -> None:
        """A genuine stop: the queue is dropped, the turn killed and its messages' editors
        stopped (a reply still being paginated sends nothing more)."""
        lane.pending.clear()
        lane.resumed.clear()
        if lane.control is not None:
            lane.control.kill()
        if lane.channel is not None:
            lane.channel.stop()

    async def _drain(self, lane: _Lane, place: Place) -> None:
        """Answer the channel's queue, one batch per turn, until it is empty."""
        while lane.resumed or lane.pending:
            resumed = lane.resumed.pop(0) if lane.resumed else None
            if resumed is None:
                batch, lane.pending = tuple(lane.pending), []
                requesters = frozenset(m.author.id for m in batch)
            else:
                user = resumed.turn.user_id
                batch, requesters = (), frozenset({int(user)} if user.isdigit() else ())
            control = MemoryTurnControl()
            control.follow_up_count = lane.follow_ups
            lane.control, lane.requesters = control, requesters
            try:
                await self._turn(lane, place, batch, control, resumed)
            except Exception:
                log.exception("the turn in channel %s failed", place.id)
            finally:
                lane.control, lane.channel = None, None
                lane.follow_ups = control.follow_up_count

    async def _turn(
        self,
        lane: _Lane,
        place: Place,
        batch: tuple[discord.Message, ...],
        control: MemoryTurnControl,
        resumed: JournaledTurn | None = None,
    ) -> None:
        """One turn; the stale timeout covers the channel's opening and its exit too (the
        editors sending the last text), so nothing holds a channel longer. A failure is
        shown and logged, and a reply cut short is marked."""
        opened: DiscordChannel | None = None
        ended: TurnStatus | None = TurnStatus.ERROR
        """What cut the reply short: the turn's status, None for the stale timeout."""
        try:
            with anyio.move_on_after(self._stale_after) as scope:
                async with await self._open(place) as opened:
                    lane.channel = opened
                    if control.killed.is_set():  # killed while the channel was being opened
                        opened.stop()
                    result = await self._answer(opened, place, batch, control, resumed)
                    ended = result.status
            if scope.cancelled_caught:
                ended = None
                stale = self._stale_after
                log.warning(
                    "the turn in channel %s outlived %s s and was cancelled", place.id, stale
                )
            elif result.status is TurnStatus.COMPLETED:
                await send_sticker(place, result)
        finally:
            marker = cut_marker(ended, self._locale, shutdown=self.closing)
            if marker is None and opened is not None and opened.cut_short:  # stopped unshown
                stopped = TurnStatus.STOPPED_BY_USER
                marker = cut_marker(stopped, self._locale, shutdown=self.closing)
            if opened is not None and marker is not None and not self._suspending:
                with anyio.move_on_after(MARK_GRACE):
                    await opened.mark_cut(marker)

    async def _answer(
        self,
        channel: DiscordChannel,
        place: Place,
        batch: tuple[discord.Message, ...],
        control: MemoryTurnControl,
        resumed: JournaledTurn | None = None,
    ) -> GenerationTurnResult:
        """The turn's result; one that failed (or raised) shows an error notice first."""
        try:
            async with typing(channel.place):
                result = await self._respond(
                    TurnRequest(messages=batch, channel=channel, control=control, resumed=resumed)
                )
        except Exception:
            await self._show_failure(channel, None)
            raise
        result = await as_delivered(result, channel)
        if result.status in (TurnStatus.ERROR, TurnStatus.TIMEOUT):
            error = turn_error(result, channel)
            log.warning(
                "the turn in channel %s ended %s: %s",
                place.id,
                result.status.value,
                "no stream error" if error is None else f"{error.type}: {error.message}",
            )
            await self._show_failure(channel, error)
        return result

    async def _show_failure(self, channel: DiscordChannel, error: StreamError | None) -> None:
        notice = failure_notice(error, self._locale)
        if notice is not None:
            with contextlib.suppress(DeliveryError):  # logged by the channel
                await channel.send_notice(notice)


@contextlib.asynccontextmanager
async def typing(place: Place) -> AsyncIterator[None]:
    """Discord's typing indicator in `place` while the block runs (the model thinking, a
    tool running); a refused indicator is logged once and given up, never failing the turn."""
    async with anyio.create_task_group() as group:
        group.start_soon(_keep_typing, place)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


async def _keep_typing(place: Place) -> None:
    while True:
        try:
            await place.typing()  # one indicator, which Discord shows for about 10 s
        except discord.HTTPException as error:
            log.info("no typing indicator in channel %s: HTTP %s", place.id, error.status)
            return
        await anyio.sleep(TYPING_EVERY)


async def as_delivered(
    result: GenerationTurnResult, channel: DiscordChannel
) -> GenerationTurnResult:
    """`result` as Discord holds it, once the channel's last edits were confirmed.

    When Discord refused a message or a stop left text unshown, what the turn
    said (its persona response) is the text Discord shows, and a turn the loop
    saw `completed` whose messages Discord refused is an `error` (SPEC 3: what
    the turn said is only ever delivered text).
    """
    await channel.settle()
    failure = channel.failure()
    if failure is None and not channel.cut_short:
        return result
    said = "\n\n".join(channel.delivered_texts())
    responses = tuple(attrs.evolve(r, text=said) for r in result.persona_responses if said)
    refused = failure is not None and result.status is TurnStatus.COMPLETED
    status = TurnStatus.ERROR if refused else result.status
    return attrs.evolve(result, status=status, persona_responses=responses)


def turn_error(result: GenerationTurnResult, channel: DiscordChannel) -> StreamError | None:
    """Why the turn failed: its last stream's error, else Discord's refusal of its messages."""
    last = result.stream_results[-1].data if result.stream_results else None
    if isinstance(last, StreamError):
        return last
    failure = channel.failure()
    if failure is None:
        return None
    return StreamError(type="channel_send_failed", message=str(failure), retryable=False)


async def send_sticker(place: Place, result: GenerationTurnResult) -> None:
    """The sticker the turn selected, sent by the bot after its text (webhooks cannot)."""
    if result.selected_sticker is None:
        return
    sticker_id = int(result.selected_sticker.id)
    guild = place.guild if isinstance(place, discord.TextChannel | discord.Thread) else None
    sticker = discord.utils.get(guild.stickers, id=sticker_id) if guild is not None else None
    try:
        await place.send(
            stickers=[sticker or discord.Object(id=sticker_id)],  # type: ignore[list-item]
            allowed_mentions=discord.AllowedMentions.none(),
        )
    except discord.HTTPException as error:
        status = error.status
        log.warning(
            "Discord refused sticker %s in channel %s: HTTP %s", sticker_id, place.id, status
        )
