"""Follow-up interrupts and a failing channel (SPEC 5, amended), under both backends.

The follow-up tests on the scripted provider run on trio's virtual clock too,
where "at once" is exact: the stream ends at the virtual time it was
interrupted, long before any timeout. The same interrupt against the real
adapter and the loopback server is in `test_follow_up_over_http.py`.
"""

from __future__ import annotations

import anyio
import pytest

from tests.effects.harness import (
    BACKENDS,
    Backend,
    Host,
    Script,
    ScriptProvider,
    calling,
    completed,
    run_on,
)
from toolloop.effects.in_memory import RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall
from toolloop.states import (
    GenerationTurnResult,
    JsonObject,
    StreamError,
    StreamResult,
    StreamStatus,
    TurnStatus,
)


def follow_up_after(host: Host, text: str, then: str = "never") -> Script:
    """A stream that delivers `text`, gets a follow-up, waits a minute, then delivers `then`."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        await sink.deliver(text)
        host.control.request_follow_up()
        await anyio.sleep(60)
        await sink.deliver(then)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text=text + then)

    return play


async def _search(args: JsonObject, call: ToolCall) -> JsonObject:
    return {"hits": 3}


def timed_run(host: Host, backend: Backend) -> tuple[GenerationTurnResult, float]:
    """The attempt's result and the seconds it took on the backend's clock."""

    async def main() -> tuple[GenerationTurnResult, float]:
        start = anyio.current_time()
        with anyio.fail_after(600):
            result = await host.run()
        return result, anyio.current_time() - start

    outcome: tuple[GenerationTurnResult, float] = run_on(backend, main)
    return outcome


@pytest.mark.parametrize("backend", BACKENDS)
class TestFollowUpInterrupt:
    def test_a_follow_up_during_the_first_stream_ends_it_at_once(self, backend: Backend) -> None:
        """The stream ends `follow_up_interrupt` with its text so far; the call is cancelled."""
        host = Host(provider=ScriptProvider(completed()))
        host.provider = ScriptProvider(follow_up_after(host, "Let me th"))
        result, took = timed_run(host, backend)
        assert result.status is TurnStatus.FOLLOW_UP_INTERRUPT
        assert result.stream_results[0].accumulated_text == "Let me th"
        assert host.channel.texts == ["Let me th"]
        assert len(host.provider.cancelled_at) == 1
        assert host.control.follow_up_count == 1
        assert host.leftovers() == []
        if backend == "trio":  # virtual time: exactly no time passed
            assert took == 0

    def test_a_follow_up_pending_at_stream_start_interrupts_before_anything_is_said(
        self, backend: Backend
    ) -> None:
        """A follow-up already queued ends the stream at once; its text never reaches anyone."""
        host = Host(provider=ScriptProvider(completed("Hello there.")))
        host.control.request_follow_up()
        result, _ = timed_run(host, backend)
        assert result.status is TurnStatus.FOLLOW_UP_INTERRUPT
        assert result.stream_results[0].accumulated_text == ""
        assert host.channel.texts == []
        assert host.leftovers() == []

    def test_a_follow_up_after_a_tool_ran_does_not_interrupt(self, backend: Backend) -> None:
        """Once the chain is active a follow-up waits for the turn: the stream runs to its end."""
        host = Host(provider=ScriptProvider(calling("search")))
        second = follow_up_after(host, "Three hits", then=".")
        host.provider = ScriptProvider(calling("search"), second)
        host.registry.register(_search, name="search")
        result, took = timed_run(host, backend)
        assert result.status is TurnStatus.COMPLETED
        assert host.channel.texts == ["Three hits", "."]
        assert host.provider.cancelled_at == []
        if backend == "trio":
            assert took == 60

    def test_a_follow_up_queued_while_the_tool_runs_is_cleared_and_the_chain_goes_on(
        self, backend: Backend
    ) -> None:
        """The follow-up that arrives during the tool neither interrupts nor stops the chain."""
        host = Host(provider=ScriptProvider(calling("search"), completed("Found it.")))

        async def search(args: JsonObject, call: ToolCall) -> JsonObject:
            host.control.request_follow_up()
            return {"hits": 3}

        host.registry.register(search, name="search")
        result, _ = timed_run(host, backend)
        assert result.status is TurnStatus.COMPLETED
        assert host.channel.texts == ["Found it."]
        assert host.control.follow_up_count == 0


class FailingChannel(RecordingChannel):
    """A channel that refuses every send once `fail_from` texts went through."""

    fail_from: int = 1

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        if len(self.texts) >= self.fail_from:
            raise PermissionError("403 Missing Permissions")
        await super().send_text(text, reply_to=reply_to)


def chunks(*parts: str) -> ScriptProvider:
    """A stream that delivers `parts` one by one (no checkpoint of its own between them)."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        for part in parts:
            sink.progress()
            await sink.deliver(part)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="".join(parts))

    return ScriptProvider(play)


@pytest.mark.parametrize("backend", BACKENDS)
class TestChannelFailure:
    def test_a_failed_send_ends_the_stream_as_error_naming_the_failure(
        self, backend: Backend
    ) -> None:
        """The stream ends `error` with a StreamError naming the failure; nothing is raised."""
        host = Host(provider=chunks("Hel", "lo", " there"), channel=FailingChannel())
        result, _ = timed_run(host, backend)
        assert result.status is TurnStatus.ERROR
        (stream,) = result.stream_results
        assert stream.data == StreamError(
            type="channel_send_failed",
            message="the channel could not deliver text: PermissionError: 403 Missing Permissions",
            retryable=False,
        )
        assert host.leftovers() == []

    def test_the_text_delivered_before_the_failure_is_kept(self, backend: Backend) -> None:
        """What reached the channel stays there and in the stream; nothing after the failure."""
        host = Host(provider=chunks("Hel", "lo", " there"), channel=FailingChannel())
        result, _ = timed_run(host, backend)
        assert host.channel.texts == ["Hel"]
        assert result.stream_results[0].accumulated_text == "Hel"

    def test_an_earlier_streams_text_stays_the_turns_text(self, backend: Backend) -> None:
        """The turn's text is the earlier stream's, never the failing one's (SPEC 5)."""
        provider = ScriptProvider(calling("search", text="Let me look."), completed("Three hits."))
        host = Host(provider=provider, channel=FailingChannel())
        host.registry.register(_search, name="search")
        result, _ = timed_run(host, backend)
        assert result.status is TurnStatus.ERROR
        assert host.channel.texts == ["Let me look."]
        assert [r.text for r in result.persona_responses] == ["Let me look."]

    def test_a_failure_on_the_first_text_delivers_nothing(self, backend: Backend) -> None:
        """A channel that refuses from the start: `error`, no text, no exception."""
        channel = FailingChannel()
        channel.fail_from = 0
        host = Host(provider=chunks("Hello"), channel=channel)
        result, _ = timed_run(host, backend)
        assert result.status is TurnStatus.ERROR
        assert (host.channel.texts, result.stream_results[0].accumulated_text) == ([], "")
