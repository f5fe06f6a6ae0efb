"""The ports: what the interpreter needs from its host, as typing Protocols.

The loop talks to the world only through these (SPEC section 1). Everything is
written against anyio, so the same adapters run under trio and asyncio.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from toolloop.engine.effects import StreamOnce
from toolloop.states import ProviderDescriptor, StreamResult, ToolSpec, TurnSettings


@attrs.frozen(kw_only=True)
class StreamRequest:
    """Everything one provider call needs: the turn, the loop's state and the tools."""

    turn: TurnSettings
    once: StreamOnce
    """The engine's effect: history, model parts, context, tail directives, suppression."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools exposed to the model this attempt."""
    reply_to: str | None = None
    """The message the reply answers; None for scene turns."""
    verbatim: bool = False
    """Run the verbatim parser over the visible text (SPEC 10, decided per attempt)."""


class StreamSink(Protocol):
    """Where a provider reports what it streams; given to it by the interpreter."""

    def progress(self) -> None:
        """Call on every received token or chunk: it restarts the inactivity timer."""

    async def deliver(self, text: str) -> None:
        """Send visible text to the channel (the sink drops it while text is suppressed)."""


class Provider(Protocol):
    """A model that streams one reply per call.

    `stream` is cancelled through anyio cancellation (the inactivity timeout, the
    kill handle, the host): an adapter must then close its HTTP request. Errors
    it cannot map to a `StreamResult` propagate to the loop's caller (SPEC 5).
    """

    @property
    def descriptor(self) -> ProviderDescriptor:
        """Which provider this is; policies read its API family."""
        ...

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Run one provider call and report how it ended."""
        ...
