"""Ports and runners for the interpreter tests: scripted streams, a recording host, two backends.

A stream script is an async function of the request and the sink, so each test
says in a few lines what the provider does and when; the provider records
every call, and whether and when anyio cancelled it. The trio runner uses the
mock clock with autojump, so timeouts of minutes take no real time; the
asyncio runner is the real event loop, for the tests that need no clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import attrs
import trio.testing

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import Observer, run_tool_loop
from toolloop.effects.ports import Notice, StreamRequest, StreamSink
from toolloop.effects.registry import ToolRegistry
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine.events import Event
from toolloop.engine.step import Step
from toolloop.specs.invariants import Registration, registrations_cleaned_up
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    TurnSettings,
)

Backend = Literal["trio", "asyncio"]
BACKENDS: tuple[Backend, ...] = ("trio", "asyncio")
Script = Callable[[StreamRequest, StreamSink], Awaitable[StreamResult]]


def run_on(backend: Backend, main: Callable[[], Awaitable[Any]]) -> Any:
    """Run `main` on trio's virtual clock (autojump) or on asyncio's real loop."""
    if backend == "trio":
        clock = trio.testing.MockClock(autojump_threshold=0)
        return anyio.run(main, backend="trio", backend_options={"clock": clock})
    return anyio.run(main, backend="asyncio")


def completed(text: str = "Done.") -> Script:
    """A stream that delivers `text` and completes."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        await sink.deliver(text)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text=text)

    return play


def calling(name: str = "search", args: dict[str, Any] | None = None, text: str = "") -> Script:
    """A stream that (optionally) says `text`, then asks for tool `name`."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        if text:
            sink.progress()
            await sink.deliver(text)
        call = FunctionCall(name=name, args={} if args is None else args)
        return StreamResult(status=StreamStatus.FUNCTION_CALL, accumulated_text=text, data=call)

    return play


def failing(message: str = "HTTP 500") -> Script:
    """A stream that ends in `error`."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        error = StreamError(type="http_status", message=message)
        return StreamResult(status=StreamStatus.ERROR, data=error)

    return play


def silent(text: str = "", started: anyio.Event | None = None) -> Script:
    """A stream that says `text`, then goes silent forever (until cancelled)."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        if text:
            sink.progress()
            await sink.deliver(text)
        if started is not None:
            started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return play


class ProviderBroke(RuntimeError):
    """What a raising stream script raises."""


def raising(message: str = "connection refused") -> Script:
    """A stream whose provider call raises."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        raise ProviderBroke(message)

    return play


class ScriptProvider:
    """Plays one script per call (the last repeats); records requests and cancellations."""

    def __init__(self, *scripts: Script, descriptor: ProviderDescriptor | None = None) -> None:
        self._scripts = scripts
        self._descriptor = descriptor or ProviderDescriptor()
        self.requests: list[StreamRequest] = []
        self.cancelled_at: list[float] = []
        """The anyio clock when each cancelled call saw its cancellation."""

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        script = self._scripts[min(len(self.requests), len(self._scripts) - 1)]
        self.requests.append(request)
        try:
            return await script(request, sink)
        except anyio.get_cancelled_exc_class():
            self.cancelled_at.append(anyio.current_time())
            raise


@attrs.define
class OrderedChannel(RecordingChannel):
    """A recording channel that also keeps texts and notices in one ordered log."""

    log: list[str] = attrs.field(factory=list)
    """`text:CHUNK` and `notice:KEY` entries, in the order they arrived."""

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self.log.append(f"text:{text}")
        await super().send_text(text, reply_to=reply_to)

    async def send_notice(self, notice: Notice) -> None:
        self.log.append(f"notice:{notice.key}")
        await super().send_notice(notice)


@attrs.define
class Host:
    """One attempt's ports and what the run left behind."""

    provider: ScriptProvider
    registry: ToolRegistry = attrs.field(factory=ToolRegistry)
    channel: RecordingChannel = attrs.field(factory=OrderedChannel)
    control: MemoryTurnControl = attrs.field(
        factory=lambda: MemoryTurnControl(record_registrations=True)
    )
    config: LoopConfig = attrs.field(factory=LoopConfig)
    turn: TurnSettings = attrs.field(factory=TurnSettings)
    stash: ContextStash | None = None
    reply_to: str | None = None
    events: list[tuple[float, Event]] = attrs.field(factory=list)
    """Every event the loop fed to `step`, with the anyio clock when it did."""
    steps: list[Step] = attrs.field(factory=list)
    """What `step` answered to each of them."""
    last_state: IterationState | None = None

    async def run(self) -> GenerationTurnResult:
        return await run_tool_loop(
            turn=self.turn,
            config=self.config,
            provider=self.provider,
            registry=self.registry,
            channel=self.channel,
            control=self.control,
            stash=self.stash,
            reply_to=self.reply_to,
            observer=self._observe(),
        )

    def _observe(self) -> Observer:
        def observe(before: IterationState, event: Event, out: Step) -> None:
            self.events.append((anyio.current_time(), event))
            self.steps.append(out)
            self.last_state = out.state

        return observe

    def leftovers(self) -> list[str]:
        """What the run left registered: live kill handles and registration-log violations."""
        log = registrations(self.control)
        live = [f"kill handle {handle!r} still registered" for handle in self.control.kill_handles]
        return live + registrations_cleaned_up(log)


def registrations(control: MemoryTurnControl) -> list[Registration]:
    """The turn control's registration log as the invariant's records."""
    assert control.registrations is not None, "made without record_registrations=True"
    records = []
    for number, (action, handle) in enumerate(control.registrations):
        assert action in ("register", "deregister"), f"entry {number}: unknown action {action!r}"
        kind: Literal["register", "deregister"] = (
            "register" if action == "register" else "deregister"
        )
        records.append(Registration(action=kind, handle=handle, where=f"entry {number}"))
    return records
