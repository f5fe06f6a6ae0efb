"""In-memory ports with real state: a turn control and a channel that records what it got.

A bot that keeps its channel state in memory can use them as they are (its
`/kill` command calls `MemoryTurnControl.kill()`); the scenario runner and the
tests use them to observe a run.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import attrs

from toolloop.effects.ports import KillHandle, Notice, StreamSpan
from toolloop.engine.events import StopRequest

REGISTRATION_LOG = 1000
"""How many kill-handle registrations `MemoryTurnControl` remembers."""


class MemoryKillSignal:
    """A kill signal whose event exists only while a tool waits on it.

    An idle turn holds a flag, not an `anyio.Event` (on asyncio, 760 bytes with
    its waiter queue): a bot keeps a turn control per channel, and most turns
    are never killed.
    """

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        if self._set:
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


class MemoryTurnControl:
    """The turn state of one channel, kept in memory."""

    __slots__ = (
        "_follow_up",
        "_follow_up_waiters",
        "_killed",
        "follow_up_count",
        "kill_handles",
        "registrations",
        "request",
        "retained",
        "stop_context_queued",
        "stop_response_queued",
        "tool_chain_active",
        "tool_usage",
    )

    def __init__(
        self, *, stop_context_queued: bool = False, record_registrations: bool = False
    ) -> None:
        self.request = StopRequest.NONE
        self.stop_context_queued = stop_context_queued
        self.stop_response_queued = False
        self.follow_up_count = 0
        self.tool_chain_active = False
        self.tool_usage: list[str] = []
        self.retained: list[str] = []
        self.kill_handles: list[KillHandle] = []
        self.registrations: collections.deque[tuple[str, str]] | None = (
            collections.deque(maxlen=REGISTRATION_LOG) if record_registrations else None
        )
        """With `record_registrations`: ("register" | "deregister", handle name), in
        order, for the cleanup invariant (`specs.invariants.registrations_cleaned_up`).

        Off by default: a bot's controls need no log. Only the last
        `REGISTRATION_LOG` entries; one attempt makes at most 400.
        """
        self._killed = MemoryKillSignal()
        self._follow_up: anyio.Event | None = None
        """Exists only while someone waits for a follow-up; set once one is pending."""
        self._follow_up_waiters = 0

    # -- what the host does ----------------------------------------------------------------

    def kill(self) -> None:
        """A genuine stop (`/kill`): ends the current call at once and signals the tools."""
        self._request(StopRequest.STOP)
        self._killed.set()
        for handle in list(self.kill_handles):
            handle()

    def new_turn(self) -> None:
        """Start the channel's next turn: a fresh kill signal, nothing pending, no chain.

        The follow-up count and the stop-response queue carry over: they belong
        to the channel, not to one turn.
        """
        if self._killed.is_set():
            self._killed = MemoryKillSignal()
        self._request(StopRequest.NONE)
        self.tool_chain_active = False

    def request_stop(self) -> None:
        """A stop request that waits for the next check (no call is cut short)."""
        self._request(StopRequest.STOP)

    def request_follow_up(self) -> None:
        """A follow-up message queued for the channel: it interrupts a stream before a chain."""
        self._request(StopRequest.FOLLOW_UP)

    def _request(self, request: StopRequest) -> None:
        """Hold `request`, signalling a follow-up to whoever waits for one."""
        self.request = request
        waiting = self._follow_up
        if waiting is not None:
            if request is StopRequest.FOLLOW_UP:
                waiting.set()
            elif waiting.is_set():  # a stop replaced the follow-up: waiters wait anew
                self._follow_up = anyio.Event()

    # -- the TurnControl port --------------------------------------------------------------

    def pending_request(self) -> StopRequest:
        return self.request

    async def wait_for_follow_up(self) -> None:
        # A waiter woken by a follow-up that a stop then replaced waits again on the new event.
        self._follow_up_waiters += 1
        try:
            while self.request is not StopRequest.FOLLOW_UP:
                if self._follow_up is None:
                    self._follow_up = anyio.Event()
                await self._follow_up.wait()
        finally:
            self._follow_up_waiters -= 1
            if not self._follow_up_waiters:
                self._follow_up = None  # held by a waiting turn only, not by an idle channel

    def clear_stop_request(self) -> None:
        self._request(StopRequest.NONE)

    def queue_stop_response(self) -> None:
        self.stop_response_queued = True

    def reset_follow_up_count(self) -> None:
        self.follow_up_count = 0

    def increment_follow_up_count(self) -> None:
        self.follow_up_count += 1

    def set_tool_chain_active(self) -> None:
        self.tool_chain_active = True

    def count_tool_usage(self, name: str) -> None:
        self.tool_usage.append(name)

    def retain_affordance(self, name: str) -> None:
        self.retained.append(name)

    def register_kill(self, handle: KillHandle) -> None:
        self.kill_handles.append(handle)
        if self.registrations is not None:
            self.registrations.append(("register", f"kill:{id(handle)}"))

    def deregister_kill(self, handle: KillHandle) -> None:
        self.kill_handles.remove(handle)
        if self.registrations is not None:
            self.registrations.append(("deregister", f"kill:{id(handle)}"))

    @property
    def killed(self) -> MemoryKillSignal:
        return self._killed


@attrs.define
class RecordingChannel:
    """A channel that keeps everything it was sent; each text chunk is one message."""

    texts: list[str] = attrs.field(factory=list)
    notices: list[Notice] = attrs.field(factory=list)
    thoughts: list[Notice] = attrs.field(factory=list)
    deleted: list[str] = attrs.field(factory=list)
    ids: list[str] = attrs.field(factory=list)
    every_notice: list[Notice] = attrs.field(factory=list)
    """Visible and hidden notices together, in the order they were sent."""
    streams: dict[StreamSpan, str] = attrs.field(factory=dict)
    """Each stream's text, as one message per stream: every stream started, in order."""
    ended: list[StreamSpan] = attrs.field(factory=list)
    """Every stream ended, in order."""
    _open: StreamSpan | None = attrs.field(default=None, init=False)

    def stream_started(self, stream: StreamSpan) -> None:
        self.streams[stream] = ""
        self._open = stream

    def stream_ended(self, stream: StreamSpan) -> None:
        self.ended.append(stream)
        self._open = None

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self.texts.append(text)
        self.ids.append(f"m{len(self.ids) + 1}")
        if self._open is not None:
            self.streams[self._open] += text

    async def send_notice(self, notice: Notice) -> None:
        self.notices.append(notice)
        self.every_notice.append(notice)

    async def send_hidden_notice(self, notice: Notice) -> None:
        self.thoughts.append(notice)
        self.every_notice.append(notice)

    def delivered_message_ids(self) -> Sequence[str]:
        return tuple(self.ids)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        self.deleted.extend(ids)

    @property
    def text(self) -> str:
        """Everything delivered, joined."""
        return "".join(self.texts)
