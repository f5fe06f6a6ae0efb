"""Discord's rate limit, kept on our side: at most 5 messages or edits per 5 s per channel.

`EditWindow` is pure (it is given the time), so its rule is tested without a
clock; the adapter asks it when the next request (a new message or an edit) may
go and records each one.
`Clock` is the time port the adapter sleeps on: anyio's in a bot, a virtual one
in tests.
"""

from __future__ import annotations

import collections
from typing import Protocol

import anyio

from toolloop.states.errors import InvalidOption

EDITS, PERIOD = 5, 5.0
"""Discord allows 5 messages or edits per 5 seconds in a channel."""


class EditWindow:
    """The times of one channel's last messages and edits, and when the next may go."""

    def __init__(self, edits: int = EDITS, period: float = PERIOD) -> None:
        if edits < 1 or period <= 0:
            raise InvalidOption(
                "an edit window needs edits >= 1 and period > 0 "
                f"(got edits={edits}, period={period})"
            )
        self.period = period
        self._times: collections.deque[float] = collections.deque(maxlen=edits)

    def next_at(self, now: float, *, spread: bool = True) -> float:
        """The earliest time, not before `now`, at which one more request keeps the limit.

        With `spread`, requests are also spread out (one per `period / edits`), so
        a fast stream shows steady progress rather than a burst of five and then
        a pause; a stream's first message, which the model's stream waits for,
        keeps only the limit.
        """
        if not self._times:
            return now
        at = now
        if spread:
            at = max(at, self._times[-1] + self.period / (self._times.maxlen or 1))
        if len(self._times) == self._times.maxlen:
            at = max(at, self._times[0] + self.period)
        return at

    def record(self, at: float) -> None:
        """An edit went at `at` (never earlier than `next_at` said)."""
        self._times.append(at)


class Clock(Protocol):
    """The time the adapter reads and sleeps on."""

    def now(self) -> float: ...

    async def sleep_until(self, deadline: float) -> None: ...


class AnyioClock:
    """The event loop's clock (asyncio's under discord.py)."""

    def now(self) -> float:
        return anyio.current_time()

    async def sleep_until(self, deadline: float) -> None:
        await anyio.sleep_until(deadline)
