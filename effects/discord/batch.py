"""The calls of one batch side by side: a status line per call, edited in place as each settles.

When a reply asks for several tools at once (SPEC 6b), the channel shows one
message with a line per call, in the model's order: running, then done (with
its duration) or failed (with why). `BatchLines` reads the turn's host events
(`ToolStarted`, `ToolFinished`, by their `index` in the batch) and keeps that
message up to date through a background editor, under the channel's rate limit;
the loop never waits for Discord. A reply's only call keeps the quiet look of
before: no lines (its progress notices are the status line).
"""

from __future__ import annotations

import logging
from typing import Any, Self

import anyio
import attrs
import discord
from anyio.abc import TaskGroup

from toolloop.effects.discord.adapter import DiscordChannel
from toolloop.effects.observe import HostEvent, ToolFinished, ToolStarted

log = logging.getLogger("toolloop.discord")
ERROR_SHOWN = 120
"""Characters of a failed call's error its line shows."""


@attrs.frozen
class CallLine:
    """One call of a batch as its line shows it."""

    name: str
    duration_ms: int | None = None
    """None while it runs."""
    error: str | None = None
    """Why it failed; None while it runs or once it succeeded."""
    success: bool = False

    def text(self) -> str:
        name = f"`{self.name}`"
        if self.duration_ms is None:
            return f"⏳ {name} running"
        took = seconds(self.duration_ms)
        if self.success:
            return f"✅ {name} done in {took}"
        why = discord.utils.escape_markdown(cut(self.error or "failed"))
        return f"❌ {name} failed after {took}: {why}"


def seconds(duration_ms: int) -> str:
    """A duration as a person reads it: `850 ms`, `1.2 s`."""
    if duration_ms < 1000:
        return f"{duration_ms} ms"
    return f"{duration_ms / 1000:.1f} s"


def cut(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= ERROR_SHOWN else one_line[: ERROR_SHOWN - 1] + "…"


def render(lines: dict[int, CallLine]) -> str:
    """The message of a batch: its calls' lines in the model's order."""
    return "\n".join(lines[index].text() for index in sorted(lines))


@attrs.define
class _Batch:
    """The calls of one model reply (an attempt's iteration) and their message."""

    lines: dict[int, CallLine] = attrs.field(factory=dict)
    message: discord.Message | None = None
    shown: str = ""
    """The text Discord holds (the last send or edit it confirmed)."""
    failed: bool = False
    """Discord refused the message: the batch's lines are given up (logged once)."""


class BatchLines:
    """The turn's batches, each shown as its calls' status lines (`async with` it around the
    turn, and give `seen` the turn's host events)."""

    def __init__(self, channel: DiscordChannel) -> None:
        self.channel = channel
        self._batches: dict[tuple[int, int], _Batch] = {}
        self._changed = anyio.Event()
        self._open = True
        self._group: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._edit_until_closed)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        """Wait for the last lines to be shown (the turn's stale timeout bounds it)."""
        assert self._group is not None
        self._open = False
        self._changed.set()
        return await self._group.__aexit__(*exc_info)

    def seen(self, event: HostEvent) -> None:
        """A host event of the turn: a call of a batch started or settled."""
        if isinstance(event, ToolStarted):
            batch = self._batches.setdefault((event.attempt, event.iteration), _Batch())
            batch.lines[event.index] = CallLine(event.name)
        elif isinstance(event, ToolFinished):
            batch = self._batches.setdefault((event.attempt, event.iteration), _Batch())
            batch.lines[event.index] = CallLine(
                event.name, event.duration_ms, event.error, event.success
            )
        else:
            return
        self._changed.set()

    def shown(self) -> list[str]:
        """What Discord holds of each batch shown so far, in the order they began."""
        return [batch.shown for batch in self._batches.values() if batch.message is not None]

    async def _edit_until_closed(self) -> None:
        """Bring every batch's message up to date, one request per slot of the channel's
        rate limit, until the turn is over and the last lines are shown."""
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            for batch in list(self._batches.values()):
                await self._show(batch)
            if not self._open and not self._changed.is_set():
                return

    async def _show(self, batch: _Batch) -> None:
        text = render(batch.lines)
        if batch.failed or len(batch.lines) < 2 or text == batch.shown:
            return
        await self.channel.request_slot()
        mentions = self.channel.mentions
        try:
            if batch.message is None:
                batch.message = await self.channel.place.send(text, allowed_mentions=mentions)
            else:
                await batch.message.edit(content=text, allowed_mentions=mentions)
        except discord.HTTPException as error:
            batch.failed = True
            self.channel.refused(error, "batch status lines")
            return
        batch.shown = text
