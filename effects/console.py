"""A channel for a terminal: streamed text as it arrives, each notice on a line of its own.

The channel a script, a notebook or a first program needs: nothing to
subclass, nothing to collect afterwards. Hidden notices (the thought log)
are shown only when asked for; a terminal cannot delete what it printed, so
a superseded attempt's text stays and its deletion is noted instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from toolloop.effects.ports import Notice, StreamSpan


class ConsoleChannel:
    """The `Channel` port on a text stream (default: standard output), flushed on every write."""

    def __init__(self, out: TextIO | None = None, *, show_hidden: bool = False) -> None:
        self._out = out
        self.show_hidden = show_hidden
        """Print hidden notices (the thought log) too, marked `(hidden)`."""
        self._ids: list[str] = []
        self._mid_line = False

    def stream_started(self, stream: StreamSpan) -> None:
        pass

    def stream_ended(self, stream: StreamSpan) -> None:
        if self._mid_line:
            self._write("\n")

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self._ids.append(f"console-{len(self._ids) + 1}")
        self._write(text)

    async def send_notice(self, notice: Notice) -> None:
        self._line(f"[{notice.level}] {notice.text}")

    async def send_hidden_notice(self, notice: Notice) -> None:
        if self.show_hidden:
            self._line(f"[{notice.level}] (hidden) {notice.text}")

    def delivered_message_ids(self) -> Sequence[str]:
        return tuple(self._ids)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        self._line(f"[info] (the {len(ids)} chunks above were superseded by the next attempt)")

    def _line(self, text: str) -> None:
        self._write(("\n" if self._mid_line else "") + text + "\n")

    def _write(self, text: str) -> None:
        out = self._out or sys.stdout  # read per write: a test or a notebook may swap it
        out.write(text)
        out.flush()
        if text:
            self._mid_line = not text.endswith("\n")
