"""Interpreter rules on trio's virtual clock: settle, stragglers, stash, and the cleanup log.

Every timeout here is minutes long and takes no real time: trio's mock clock
jumps ahead whenever all tasks wait, so the times asserted are virtual and
exact. The cleanup tests check the turn control's registration log with
`specs.invariants.registrations_cleaned_up`, on both backends where no clock
is needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from tests.effects.harness import (
    BACKENDS,
    Backend,
    Host,
    ProviderBroke,
    ScriptProvider,
    calling,
    completed,
    failing,
    raising,
    run_on,
    silent,
)
from toolloop.effects.in_memory import RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall
from toolloop.effects.registry.stash import ContextStash
from toolloop.engine.events import StashTaken, ToolSettled
from toolloop.states import (
    ContextItem,
    GenerationTurnResult,
    JsonObject,
    StreamResult,
    StreamStatus,
    TurnStatus,
)

INACTIVITY, SETTLE, TOOL_TIMEOUT = 120.0, 5.0, 300.0
"""The default timeouts, in seconds."""


def run_at(host: Host, *actions: tuple[float, Callable[[], None]]) -> GenerationTurnResult:
    """Run the attempt on the virtual clock, doing each action at its virtual time."""

    async def main() -> GenerationTurnResult:
        async with anyio.create_task_group() as group:
            for at, action in actions:
                group.start_soon(_later, at, action)
            result = await host.run()
            group.cancel_scope.cancel()
        return result

    result: GenerationTurnResult = run_on("trio", main)
    return result


async def _later(at: float, action: Callable[[], None]) -> None:
    await anyio.sleep_until(at)
    action()


class TestStragglers:
    def test_kill_during_the_settle_is_a_stop_without_the_notice(self) -> None:
        """A kill while the abandoned call settles ends it at once as `stopped_by_user`."""
        host = Host(provider=ScriptProvider(silent("partial")))
        result = run_at(host, (INACTIVITY + 2, host.control.kill))
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert host.provider.cancelled_at == [INACTIVITY + 2]
        assert host.channel.every_notice == []

    def test_provider_ignoring_cancellation_does_not_hold_the_loop(self) -> None:
        """A shielded provider call is abandoned at the settle bound; its late text is dropped."""
        finished: list[float] = []

        async def stubborn(request: StreamRequest, sink: StreamSink) -> StreamResult:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(INACTIVITY + SETTLE + 10)
            finished.append(anyio.current_time())
            await sink.deliver("too late")
            return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="too late")

        host = Host(provider=ScriptProvider(stubborn))

        async def main() -> tuple[GenerationTurnResult, float]:
            return await host.run(), anyio.current_time()

        result, returned_at = run_on("trio", main)
        assert result.status is TurnStatus.TIMEOUT
        assert host.events[-1][0] == INACTIVITY + SETTLE
        assert (finished, returned_at) == ([INACTIVITY + SETTLE + 10], INACTIVITY + SETTLE + 10)
        assert host.channel.texts == []

    def test_shielded_tool_fails_at_the_deadline_and_run_returns_after_it(self) -> None:
        """A tool ignoring cancellation fails at 300 s; `run_tool_loop` returns when it is done."""
        finished: list[float] = []

        async def search(args: JsonObject, call: ToolCall) -> None:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(400)
            finished.append(anyio.current_time())

        host = Host(provider=ScriptProvider(calling("search"), completed()))
        host.registry.register(search, name="search")

        async def main() -> tuple[GenerationTurnResult, float]:
            return await host.run(), anyio.current_time()

        result, returned_at = run_on("trio", main)
        assert result.status is TurnStatus.COMPLETED
        [(at, event)] = [(t, e) for t, e in host.events if isinstance(e, ToolSettled)]
        assert (at, event.result.error) == (TOOL_TIMEOUT, "Tool search timed out after 300 s")
        assert (finished, returned_at) == ([400.0], 400.0)


class TestStash:
    ITEM = ContextItem(kind="enrichment", content="the video's transcript")

    def restarting(self, stash: ContextStash, wait: float = 0.0) -> Any:
        """A tool that stashes the item once, then asks for a restart with its key."""
        keys: list[str] = []

        async def fetch(args: JsonObject, call: ToolCall) -> JsonObject:
            if not keys:
                keys.append(stash.put(self.ITEM))
            await anyio.sleep(wait)
            return {"type": "context_restart_youtube", "pending_context_key": keys[0]}

        return fetch

    def test_stashed_item_is_taken_once(self) -> None:
        """The first restart gets the item; the same key a second time finds nothing."""
        stash = ContextStash()
        provider = ScriptProvider(calling("fetch"), calling("fetch"), completed())
        host = Host(provider=provider, stash=stash)
        host.registry.register(self.restarting(stash), name="fetch")
        run_at(host)
        taken = [event.item for _, event in host.events if isinstance(event, StashTaken)]
        assert taken == [self.ITEM, None]
        counts = [request.once.context.count(self.ITEM) for request in provider.requests]
        assert counts == [0, 1, 1]

    def test_expired_item_is_not_taken(self, caplog: pytest.LogCaptureFixture) -> None:
        """An item older than the stash's lifetime is gone; the turn goes on with a warning."""
        stash = ContextStash(ttl_s=10)
        provider = ScriptProvider(calling("fetch"), completed())
        host = Host(provider=provider, stash=stash)
        host.registry.register(self.restarting(stash, wait=11), name="fetch")
        with caplog.at_level(logging.WARNING, logger="toolloop"):
            result = run_at(host)
        assert result.status is TurnStatus.COMPLETED
        assert [event.item for _, event in host.events if isinstance(event, StashTaken)] == [None]
        assert self.ITEM not in provider.requests[1].once.context
        assert "Stashed context item is missing or expired" in caplog.text


class ChannelBroke(ConnectionError):
    """What the broken channel raises on `send_text`."""


class BrokenChannel(RecordingChannel):
    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        raise ChannelBroke("the channel is gone")


async def _hang(args: JsonObject, call: ToolCall) -> None:
    await anyio.sleep_forever()


def _search_then(*scripts: Any) -> Host:
    host = Host(provider=ScriptProvider(calling("search"), *scripts))
    host.registry.register(_hang, name="search")
    return host


async def _kill_when_tool_runs(host: Host) -> None:
    """Kill the turn once the tool is running (its kill handle is the one registered)."""
    while not any(isinstance(e, ToolSettled) for _, e in host.events):
        if host.control.kill_handles and len(host.provider.requests) == 1:
            host.control.kill()
            return
        await anyio.sleep(0)


async def _cancel_when_streaming(host: Host, scope: anyio.CancelScope) -> None:
    while not host.control.kill_handles:
        await anyio.sleep(0)
    scope.cancel()


Drive = Callable[[Host], Awaitable[None]]


def _plain(script: Callable[[], Any]) -> Callable[[], Host]:
    """A host whose provider plays one script, without tools."""
    return lambda: Host(provider=ScriptProvider(script()))


async def _returns(host: Host) -> None:
    await host.run()


async def _raises(host: Host) -> None:
    with pytest.raises(ProviderBroke):
        await host.run()


async def _killed_in_stream(host: Host) -> None:
    started = anyio.Event()
    host.provider = ScriptProvider(silent("so far", started=started))
    async with anyio.create_task_group() as group:
        group.start_soon(host.run)
        await started.wait()
        host.control.kill()


async def _killed_in_tool(host: Host) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(host.run)
        await _kill_when_tool_runs(host)


async def _cancelled_outside(host: Host) -> None:
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(host.run)
            await _cancel_when_streaming(host, scope)
    assert scope.cancelled_caught


EXITS: dict[str, tuple[Callable[[], Host], Drive, bool]] = {
    # name: (the host, how the run is driven, needs the virtual clock)
    "success": (lambda: _search_then(completed()), _returns, True),
    "error": (_plain(failing), _returns, False),
    "inactivity timeout": (_plain(silent), _returns, True),
    "tool timeout": (lambda: _search_then(completed()), _returns, True),
    "kill in stream": (_plain(completed), _killed_in_stream, False),
    "kill in tool": (lambda: _search_then(completed()), _killed_in_tool, False),
    "outside cancellation": (_plain(silent), _cancelled_outside, False),
    "provider raises": (_plain(raising), _raises, False),
    "channel fails": (
        lambda: Host(provider=ScriptProvider(completed()), channel=BrokenChannel()),
        _returns,
        False,
    ),
}  # fmt: skip
CASES = [
    pytest.param(backend, name, id=f"{name}-{backend}")
    for name, (_, _, timed) in EXITS.items()
    for backend in BACKENDS
    if backend == "trio" or not timed
]


class TestCleanup:
    @pytest.mark.parametrize(("backend", "exit_name"), CASES)
    def test_every_exit_deregisters_everything_it_registered(
        self, backend: Backend, exit_name: str
    ) -> None:
        """On each exit the registration log is balanced and no kill handle is left."""
        make, drive, _ = EXITS[exit_name]
        host = make()
        run_on(backend, lambda: drive(host))
        assert host.control.registrations, "the exit was reached before anything registered"
        assert host.leftovers() == []

    @pytest.mark.parametrize("during", ["stream", "tool"])
    def test_asyncio_task_cancel_ends_the_loop_and_leaves_nothing(self, during: str) -> None:
        """`task.cancel()` on the task awaiting `run_tool_loop` ends it promptly, clean."""
        cancelled: list[str] = []

        async def search(args: JsonObject, call: ToolCall) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.append("tool")

        host = Host(provider=ScriptProvider(silent() if during == "stream" else calling("search")))
        host.registry.register(search, name="search")

        async def main() -> None:
            task = asyncio.create_task(host.run())
            while len(host.control.registrations) < (1 if during == "stream" else 3):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert host.leftovers() == []
        if during == "stream":
            assert len(host.provider.cancelled_at) == 1
        else:
            assert cancelled == ["tool"]
