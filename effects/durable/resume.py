"""Journaled attempts, and their resumption after the process died.

`run_journaled` runs an attempt of the tool loop with every event written to
the journal before `step` sees it, and every piece of streamed text the channel
accepted written beside it. `resume` finds the turns a dead process left
unfinished and carries each on from its last event:

* a stream in flight is made again; the text the channel already shows is not
  sent again (the new stream's text is matched against it, and only what goes
  beyond it, or differs from it, is delivered); a channel that recalls what it
  took (`RecallingChannel`) is asked what that is; a channel that reports the
  messages holding each stream (`HoldingChannel`, Discord's) continues the
  same message, and first shows any text it had accepted but not yet shown;
* a tool call in flight runs again only when its tool is registered
  `idempotent=True`; otherwise it settles as a failure that tells the model the
  call was interrupted by a restart and may have run;
* a call waiting for a person's approval is asked about again, through the
  restarted process's approvals port, under a fresh timeout;
* a turn older than `stale_after` seconds is not resumed: it ends with the
  `turn_interrupted` notice.

A finished turn (a result or an error) is deleted from the journal; a
cancelled one (the host shutting down) stays for the next start.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import attrs

from toolloop.effects.durable.journal import HeldMessage, Journal, JournaledTurn
from toolloop.effects.durable.replay import standing
from toolloop.effects.interpreter import Observer, run_tool_loop
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.observe import HostObserver
from toolloop.effects.ports import (
    ApprovalPort,
    Channel,
    Notice,
    Provider,
    StreamSpan,
    ToolInvocation,
    ToolRegistryPort,
    TurnControl,
)
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine import commands as fx
from toolloop.engine.events import Event
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    ToolContext,
    ToolResult,
    ToolSpec,
    TurnSettings,
)

#: A turn left unfinished longer ago than this (seconds) ends with a notice, not resumed.
STALE_AFTER_S = 15 * 60


@attrs.frozen(kw_only=True)
class TurnPorts:
    """What a turn runs against: the host's ports for its channel, as `run_tool_loop` takes them.

    `approvals` is where a person decides on the calls that need approval: a turn
    resumed while such a call waited asks it again there.
    """

    provider: Provider
    registry: ToolRegistryPort
    channel: Channel
    control: TurnControl
    catalog: NoticeCatalog | None = None
    stash: ContextStash | None = None
    reply_to: str | None = None
    verbatim: bool = False
    observer: Observer | None = None
    on_event: HostObserver | None = None
    approvals: ApprovalPort | None = None


HeldReport = Callable[[Hashable, tuple[HeldMessage, ...]], Awaitable[None]]
"""Awaited with a stream (its `StreamSpan`, or the key it was restored under) and the
messages that now hold its text, each time the chat confirmed a send or an edit."""


@runtime_checkable
class HoldingChannel(Protocol):
    """A channel whose text reaches the chat after `send_text` returns, in messages it can
    name and edit later (`DiscordChannel`): the journal keeps what the chat confirmed, and
    a resumed turn continues the same messages. A message the chat made but the journal
    never heard of is found again only if each new message carries an idempotency key that
    is the same for the same stream and page in every process (Discord's nonce)."""

    def report_held(self, report: HeldReport) -> None:
        """From now on, await `report` after each confirmed send or edit."""
        ...

    async def restore(
        self, stream: Hashable, held: tuple[HeldMessage, ...], text: str, *, continues: bool
    ) -> None:
        """Take back the messages `held` of an earlier process's stream and bring them up to
        `text` (which starts with what they hold); `continues`: the next stream is that
        stream made again, its text appended after `text`."""
        ...

    async def settle(self) -> None:
        """Return once the chat confirmed (or refused) all the text accepted so far."""
        ...


@runtime_checkable
class RecallingChannel(Protocol):
    """A channel that can say, from any process, what text it took of a stream (named by its
    `StreamSpan.turn`, attempt and iteration). A stream made again after a crash (the
    journal) or a lost worker (Temporal) goes on after exactly that, so a piece the
    channel took just before the process died is not shown twice (neither the journal's
    commit nor a heartbeat may have carried it)."""

    async def taken(self, stream: StreamSpan) -> str:
        """The text this channel took of `stream` so far, in order ("" for a new stream)."""
        ...


async def run_journaled(
    journal: Journal, key: str, *, turn: TurnSettings, config: LoopConfig, ports: TurnPorts
) -> GenerationTurnResult:
    """Run one attempt with its events journaled under `key` (unique while the turn runs)."""
    await journal.begin(key, config, turn, reply_to=ports.reply_to)
    fresh = JournaledTurn(
        key=key,
        started_at=time.time(),
        config=config,
        turn=turn,
        reply_to=ports.reply_to,
        events=(),
        delivered={},
    )
    return await _run(journal, key, turn, config, ports, fresh)


async def resume_turn(
    journal: Journal, journaled: JournaledTurn, ports: TurnPorts
) -> GenerationTurnResult:
    """Carry on one unfinished turn from its last journaled event (replying to the message
    the turn answered, unless `ports.reply_to` says otherwise)."""
    if ports.reply_to is None:
        ports = attrs.evolve(ports, reply_to=journaled.reply_to)
    return await _run(journal, journaled.key, journaled.turn, journaled.config, ports, journaled)


Outcome = GenerationTurnResult | Exception | None
"""A resumed turn's result, the error it ended with, or None: stale, ended with a notice."""


async def resume(
    journal: Journal,
    ports: Callable[[JournaledTurn], TurnPorts],
    *,
    stale_after: float = STALE_AFTER_S,
) -> dict[str, Outcome]:
    """Resume every unfinished turn of the journal at once; each one's outcome, by key.

    `ports` gives the host's ports for a turn (its channel from `turn.turn.channel_id`).
    """
    outcomes: dict[str, Outcome] = {}
    cutoff = time.time() - stale_after

    async def one(journaled: JournaledTurn) -> None:
        turn_ports = ports(journaled)
        if journaled.started_at < cutoff:
            outcomes[journaled.key] = None
            await end_stale(journal, journaled, turn_ports)
            return
        try:
            outcomes[journaled.key] = await resume_turn(journal, journaled, turn_ports)
        except Exception as error:  # one turn's failure is its outcome, not the others'
            outcomes[journaled.key] = error

    async with anyio.create_task_group() as group:
        for journaled in await journal.unfinished():
            group.start_soon(one, journaled)
    return outcomes


async def end_stale(journal: Journal, journaled: JournaledTurn, ports: TurnPorts) -> None:
    """A turn too old to resume: its channel gets the `turn_interrupted` notice, the journal
    lets it go."""
    catalog = ports.catalog or NoticeCatalog.default()
    minutes = round((time.time() - journaled.started_at) / 60)
    key = fx.NoticeKey.TURN_INTERRUPTED.value
    notice = Notice(
        key=key,
        level=fx.Level.WARNING.value,
        text=catalog.render(key, journaled.turn.locale, {"minutes": minutes}),
        hidden=False,
        iteration=0,
        identity=None,
    )
    await ports.channel.send_notice(notice)
    await journal.finish(journaled.key)


async def _run(
    journal: Journal,
    key: str,
    turn: TurnSettings,
    config: LoopConfig,
    ports: TurnPorts,
    journaled: JournaledTurn,
) -> GenerationTurnResult:
    events = journaled.events
    where = standing(key, config, turn, events)
    recorder = _Recorder(journal, key, events)
    channel = _JournaledChannel(ports.channel, recorder)
    registry = ports.registry
    in_flight = len(events) - 1 if where.streaming else None
    if in_flight is not None:
        channel.shown = journaled.delivered.get(in_flight, "")
        channel.recall = isinstance(ports.channel, RecallingChannel)
    if isinstance(ports.channel, HoldingChannel):
        ports.channel.report_held(channel.held)
        channel.shown = await _restore(ports.channel, journaled, in_flight) or channel.shown
    if where.in_flight:
        registry = _ResumedRegistry(registry, list(where.in_flight))
    try:
        result = await run_tool_loop(
            turn=turn,
            config=config,
            provider=ports.provider,
            registry=registry,
            channel=channel,
            control=ports.control,
            catalog=ports.catalog,
            stash=ports.stash,
            reply_to=ports.reply_to,
            verbatim=ports.verbatim,
            observer=ports.observer,
            on_event=ports.on_event,
            approvals=ports.approvals,
            recorder=recorder,
            start_from=where.start_from,
        )
    except Exception:
        await journal.finish(key)
        raise
    if isinstance(ports.channel, HoldingChannel):
        await ports.channel.settle()  # the turn is let go once the chat holds all its text
    await journal.finish(key)
    return result


async def _restore(
    channel: HoldingChannel, journaled: JournaledTurn, in_flight: int | None
) -> str | None:
    """Give the channel back the messages of the earlier process's streams, each brought up
    to the text it had accepted; the stream in flight's text (what its remaking skips)."""
    shown = None
    for after, held in sorted(journaled.held.items()):
        accepted = journaled.delivered.get(after, "")
        confirmed = "".join(message.text for message in held)
        text = accepted if len(accepted) > len(confirmed) else confirmed
        if after == in_flight:
            shown = text
            await channel.restore(after, held, text, continues=True)
        elif text != confirmed:
            await channel.restore(after, held, text, continues=False)
    return shown


class _Recorder:
    """Appends each event to the journal; a resumed attempt's first event is already there."""

    def __init__(self, journal: Journal, key: str, events: tuple[Event, ...]) -> None:
        self.journal, self.key = journal, key
        self.count = len(events)
        """Events journaled so far: a stream answers event `count - 1`."""
        self._replayed: Event | None = events[-1] if events else None

    async def __call__(self, event: Event) -> None:
        if event is self._replayed:  # `StartFrom.event`: stepped again, journaled once
            self._replayed = None
            return
        await self.journal.append(self.key, self.count, event)
        self.count += 1

    async def delivered(self, text: str) -> None:
        await self.journal.delivered(self.key, self.count - 1, text)


@attrs.define
class _JournaledChannel:
    """The host's channel, with each piece of text it accepted journaled after it.

    Each stream reaches the host's channel named by the turn's key (`StreamSpan.turn`).
    `shown`: text a stream in flight at the crash delivered, which the channel still
    shows; the stream made again skips as much of its text as matches it.
    """

    inner: Channel
    recorder: _Recorder
    shown: str = ""
    recall: bool = False
    """The first stream is the one in flight at the crash, and the host's channel recalls
    what it took of it (`RecallingChannel`): that, not the journal's `shown`, is skipped."""
    streams: dict[Hashable, int] = attrs.field(factory=dict)
    """Each stream of this attempt or restored from the earlier one: the event it answers."""
    named: dict[StreamSpan, StreamSpan] = attrs.field(factory=dict)
    """Each open stream of the loop, as the host's channel knows it: named by the turn."""

    def stream_started(self, stream: StreamSpan) -> None:
        named = stream if stream.turn else attrs.evolve(stream, turn=self.recorder.key)
        self.named[stream] = named
        self.streams[named] = self.recorder.count - 1
        self.inner.stream_started(named)

    def stream_ended(self, stream: StreamSpan) -> None:
        # Only the first stream of a resumed attempt repeats text.
        self.shown, self.recall = "", False
        self.inner.stream_ended(self.named.pop(stream, stream))

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        if self.recall and isinstance(self.inner, RecallingChannel):
            self.recall = False
            [stream] = self.named.values()
            self.shown = await self.inner.taken(stream)
        if self.shown:
            self.shown, text = unshown(self.shown, text)
            if not text:
                return
        await self.inner.send_text(text, reply_to=reply_to)
        await self.recorder.delivered(text)

    async def held(self, stream: Hashable, messages: tuple[HeldMessage, ...]) -> None:
        """A `HoldingChannel`'s report: the messages that hold the stream, journaled."""
        after = stream if isinstance(stream, int) else self.streams[stream]
        await self.recorder.journal.held(self.recorder.key, after, messages)

    async def send_notice(self, notice: Notice) -> None:
        await self.inner.send_notice(notice)

    async def send_hidden_notice(self, notice: Notice) -> None:
        await self.inner.send_hidden_notice(notice)

    def delivered_message_ids(self) -> Sequence[str]:
        return self.inner.delivered_message_ids()

    async def delete_messages(self, ids: Sequence[str]) -> None:
        await self.inner.delete_messages(ids)


def unshown(shown: str, text: str) -> tuple[str, str]:
    """A piece of a stream made again, against what the channel `shown` of its first run:
    what stays shown and unmatched, and what of `text` goes beyond it or differs from it."""
    same = _common_prefix(shown, text)
    return (shown[same:] if same == len(text) else ""), text[same:]


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


@attrs.define
class _ResumedRegistry:
    """The host's registry; a call in flight at the crash runs again only if idempotent."""

    inner: ToolRegistryPort
    in_flight: list[FunctionCall]

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        if call in self.in_flight:
            self.in_flight.remove(call)
            if not runs_again(self.inner, call.name.strip()):
                return interrupted(call.name.strip())
        return await self.inner.execute(call, context, invocation)

    def specs(self, provider: ProviderDescriptor) -> tuple[ToolSpec, ...]:
        return self.inner.specs(provider)

    def requires_follow_up(
        self, tool: str, provider: ProviderDescriptor, server: str | None
    ) -> bool:
        return self.inner.requires_follow_up(tool, provider, server)

    def redact(self, tool: str, args: JsonObject | None) -> JsonObject | None:
        return self.inner.redact(tool, args)

    def exclusive(self, tool: str) -> bool:
        return self.inner.exclusive(tool)

    def timeout_ms(self, tool: str) -> int | None:
        return self.inner.timeout_ms(tool)

    def needs_approval(self, call: FunctionCall, context: ToolContext) -> bool:
        return self.inner.needs_approval(call, context)

    def asks_approval(self) -> bool:
        return self.inner.asks_approval()


def interrupted(tool: str) -> ToolResult:
    """The failure of a non-idempotent call that a crash interrupted: it may have run."""
    return ToolResult(
        success=False,
        error=(
            f"Tool {tool} was interrupted by a restart of the bot and may have run: "
            "check its effect before calling it again"
        ),
    )


def runs_again(registry: Any, tool: str) -> bool:
    """A call in flight when its process or worker died runs again: `ToolRegistry.idempotent`;
    a registry without the notion runs nothing twice."""
    check = getattr(registry, "idempotent", None)
    return bool(check(tool)) if callable(check) else False
