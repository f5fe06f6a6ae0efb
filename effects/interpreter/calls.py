"""The calls the supervisor watches, one at a time: its alarm, a stream's sink, a tool's run."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio import TaskHandle

from toolloop.effects.clock import loop_clock
from toolloop.effects.ports import Channel, StreamSpan, TurnControl
from toolloop.engine import commands as fx
from toolloop.engine.events import StopRequest
from toolloop.states import StreamResult, ToolResult

# Read at each delivery, so a module name: a member read off its Enum class is a
# class attribute lookup, about 900 instructions on CPython 3.11.
_FOLLOW_UP = StopRequest.FOLLOW_UP


class Alarm:
    """When the supervisor wakes: at the earliest armed deadline, or at once on `wake`.

    `now` reads the clock its deadlines are on (made inside the running loop).
    """

    __slots__ = ("_scope", "armed", "now")

    def __init__(self) -> None:
        self.armed = math.inf
        self._scope: anyio.CancelScope | None = None
        self.now = loop_clock()

    def arm(self, deadline: float) -> None:
        """Wake by `deadline`; a later deadline than the armed one is left to the re-arm."""
        if deadline < self.armed:
            self.armed = deadline
            if self._scope is not None:
                self._scope.deadline = deadline

    def wake(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def start(self, until: float) -> anyio.CancelScope:
        """The scope of one wait: it ends at `until` or at `wake`. Call `stop` after it.

        The waiter enters it in its own frame: a coroutine around each wait would
        be one more frame held by every waiting turn.
        """
        self._scope = anyio.move_on_at(until)
        return self._scope

    def stop(self) -> bool:
        """After the wait's scope: True if what it awaited finished (no deadline, no wake)."""
        scope, self._scope = self._scope, None
        assert scope is not None, "stop follows start"
        return not scope.cancelled_caught


class Call:
    """One provider call or tool, awaited inline by its runner; its kill handle too.

    `taken` once the supervisor (a deadline) or the kill decided its outcome:
    the runner then no longer owns it and ends when the call returns.
    """

    __slots__ = ("_alarm", "_runner", "deadline", "effect", "killed", "open", "settled", "taken")

    interruptible = False
    """A follow-up ends this call (SPEC 5): only a stream's, before the chain is active."""

    def __init__(
        self, effect: Any, runner: TaskHandle[None], alarm: Alarm, deadline: float
    ) -> None:
        self.effect, self._runner, self._alarm = effect, runner, alarm
        self.deadline = deadline
        self.killed = self.taken = False
        self.open = True
        self.settled: anyio.Event | None = None
        """Set when a taken call returns, for the supervisor waiting for it to settle."""

    def __call__(self) -> None:
        """The kill handle: end the call and wake the supervisor to decide, both at once."""
        if self.open:  # else a stale handle: the runner has moved on to another call
            self.killed = True
            self.end_now()

    def end_now(self) -> None:
        """Take the call from its runner at once (it is cancelled) and wake the supervisor."""
        self.taken = True
        self.abandon()
        self._alarm.wake()

    def returned(self) -> bool:
        """The runner got the call back: True if its outcome is still the runner's."""
        if self.taken:
            if self.settled is not None:
                self.settled.set()
            return False
        return True

    def abandon(self) -> None:
        """Cancel the call (with its runner); a call that ignores it straggles on."""
        self._runner.cancel()
        self.close()

    def close(self) -> None:
        """The call is over for the loop: its kill handle is inert, a stream's sink drops text."""
        self.open = False


class ToolRun(Call):
    __slots__ = ("started", "timeout_ms")

    def __init__(
        self, effect: fx.DispatchTool, runner: TaskHandle[None], alarm: Alarm, timeout_ms: int
    ) -> None:
        self.started = alarm.now()
        self.timeout_ms = timeout_ms
        # The base named, not super(): a super object per call is measurable.
        Call.__init__(self, effect, runner, alarm, self.started + timeout_ms / 1000)


class Sink(Call):
    """A stream's call, and what its provider reports to: progress pushes the deadline back.

    Inert once its call is over (`close`): a straggling provider can no longer
    write to the channel. Besides a kill or a deadline, a follow-up (`interrupt`)
    and a failed send to the channel end it at once.
    """

    __slots__ = (
        "_channel",
        "_timeout",
        "failure",
        "first_chunk",
        "follow_ups",
        "interrupted",
        "interruptible",
        "parts",
        "span",
        "went_silent",
    )

    def __init__(
        self,
        effect: fx.StreamOnce,
        runner: TaskHandle[None],
        alarm: Alarm,
        channel: Channel,
        span: StreamSpan,
        timeout: float,
        follow_ups: TurnControl | None,
        first_chunk: Callable[[], None] | None,
    ) -> None:
        Call.__init__(self, effect, runner, alarm, alarm.now() + timeout)  # as ToolRun
        self.first_chunk = first_chunk
        """Called at the first `progress`, then dropped: the host's first-chunk event."""
        self._channel, self._timeout = channel, timeout
        self.follow_ups = follow_ups
        """The turn control while the chain is not active: a follow-up ends this stream."""
        self.interruptible = follow_ups is not None
        self.parts: list[str] = []
        self.span = span
        self.interrupted = False
        """A follow-up ended the stream (SPEC 5)."""
        self.failure: Exception | None = None
        """What the channel raised when it could not deliver text (SPEC 5)."""
        self.went_silent = False
        """The rolling inactivity timeout ended it: the provider sent nothing in time (SPEC 5)."""

    def progress(self) -> None:
        self.deadline = self._alarm.now() + self._timeout
        if self.first_chunk is not None:
            first, self.first_chunk = self.first_chunk, None
            first()

    async def deliver(self, text: str) -> None:
        self.check_follow_up()
        if not self.open:
            return
        self.parts.append(text)
        if not self.span.suppressed:
            try:
                await self._channel.send_text(text, reply_to=self.span.reply_to)
            except Exception as error:  # the platform refused or failed the send
                self.parts.pop()  # never delivered
                if self.open:
                    self.failure = error
                    self.end_now()

    def interrupt(self) -> None:
        """End the stream for a follow-up message, as the kill would."""
        if self.open:
            self.interrupted = True
            self.end_now()

    def check_follow_up(self) -> None:
        """Interrupt for a pending follow-up (SPEC 5) without waiting for the supervisor.

        The supervisor runs only once the runner yields, and a provider with its
        body already read delivers the rest and returns without yielding: the runner
        checks at the start, at each delivery and at the end.
        """
        follow_ups = self.follow_ups
        if follow_ups is not None and follow_ups.pending_request() is _FOLLOW_UP:
            self.interrupt()

    async def watch(self, stream: Awaitable[StreamResult]) -> StreamResult:
        """`stream`'s result, unless a follow-up came meanwhile."""
        result = await stream
        self.check_follow_up()
        return result

    @property
    def text(self) -> str:
        return "".join(self.parts)


def failure(error: str) -> ToolResult:
    """A call's failed result, `error` as the model reads it."""
    return ToolResult(success=False, error=error)


class _Superseded(Exception):
    """The runner's call was taken: the loop goes on in another runner, this one ends."""
