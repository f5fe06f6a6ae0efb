"""A journal that crashes the attempt at its n-th write, and the world a turn leaves behind.

The crash is a cancellation of everything running, raised right before or
right after the write commits: what the journal holds is then exactly what a
`kill -9` at that instant leaves (tests/durable/test_kill9.py kills for real).
"""

from __future__ import annotations

from typing import Any, Literal

import anyio

from toolloop.durable import Journal
from toolloop.engine.events import Event

When = Literal["before", "after"]


class CrashingJournal(Journal):
    """Counts its writes (events and delivered text); crashes at write number `crash_at`."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.kinds = []

    crash_at: int | None = None
    when: When = "after"
    writes: int = 0
    kinds: list[str]
    """`event` or `text` for each write so far, in order."""
    scope: anyio.CancelScope | None = None

    async def append(self, key: str, seq: int, event: Event) -> None:
        await self._crashing("event", super().append, key, seq, event)

    async def delivered(self, key: str, after: int, text: str) -> None:
        await self._crashing("text", super().delivered, key, after, text)

    async def _crashing(self, kind: str, write: Any, *args: Any) -> None:
        crash = self.writes == self.crash_at
        self.writes += 1
        self.kinds.append(kind)
        if crash and self.when == "before":
            await self._crash()
        await write(*args)
        if crash:
            await self._crash()

    async def _crash(self) -> None:
        assert self.scope is not None, "crash inside `with journal.scope`"
        self.scope.cancel()
        await anyio.sleep(0)  # the cancellation is delivered here
        raise AssertionError("the crash did not cancel the attempt")
