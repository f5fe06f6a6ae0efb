"""The interpreter's timing rules (SPEC 5, 6), kill, notices and final effects.

Virtual-time tests run on trio's MockClock with autojump (`run_on("trio", ...)`):
a 300-second tool timeout takes no real time and the times asserted are
virtual and exact. The kill tests need no clock and run under both backends.
Settle kills, stragglers, the stash and the cleanup of every exit are in
`test_interpreter_timing.py`.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import attrs
import pytest

from tests.effects.harness import (
    BACKENDS,
    Backend,
    Host,
    OrderedChannel,
    Script,
    ScriptProvider,
    calling,
    completed,
    run_on,
    silent,
)
from toolloop.effects import interpreter
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import ImpersonationAborted, driver
from toolloop.effects.ports import (
    KillHandle,
    Notice,
    StreamRequest,
    StreamSink,
    ToolInvocation,
)
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.commands import Level, NoticeKey, ResetFollowUpCount, SendNotice
from toolloop.engine.events import StreamEnded, ToolSettled
from toolloop.engine.step import Step, step
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    JsonObject,
    LoopConfig,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolContext,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

INACTIVITY, SETTLE, TOOL_TIMEOUT = 120.0, 5.0, 300.0
"""The default timeouts, in seconds."""


def timed(host: Host) -> tuple[GenerationTurnResult, float]:
    """Run the host's attempt on the virtual clock: its result and the virtual seconds taken."""

    async def main() -> tuple[GenerationTurnResult, float]:
        return await host.run(), anyio.current_time()

    result: tuple[GenerationTurnResult, float] = run_on("trio", main)
    return result


def silent_after(text: str, *, for_s: float, late: str) -> Script:
    """A stream that delivers `text`, says nothing for `for_s` s, then delivers `late`."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        await sink.deliver(text)
        await anyio.sleep(for_s)
        await sink.deliver(late)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text=text + late)

    return play


def trickling(chunks: list[str], every_s: float) -> Script:
    """A stream that delivers one chunk every `every_s` seconds, with progress each time."""

    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        for chunk in chunks:
            await anyio.sleep(every_s)
            sink.progress()
            await sink.deliver(chunk)
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="".join(chunks))

    return play


def with_tool(host: Host, function: Any, **options: Any) -> Host:
    """`host` with `function` registered as the `search` tool."""
    host.registry.register(function, name="search", **options)
    return host


def settled(host: Host) -> list[tuple[float, ToolResult]]:
    """When each tool settled and the result the loop was told."""
    return [(at, event.result) for at, event in host.events if isinstance(event, ToolSettled)]


async def _hang(args: JsonObject, call: ToolCall) -> None:
    await anyio.sleep_forever()


class TestInactivityTimeout:
    """Stage 01: the rolling inactivity timeout and the abandoned-stream settle."""

    def test_a_slow_but_active_stream_is_not_killed(self) -> None:
        """Chunks 100 s apart (500 s in all) complete: each progress restarts the 120 s timer."""
        host = Host(provider=ScriptProvider(trickling(["a", "b", "c", "d", "e"], 100)))
        result, took = timed(host)
        assert (result.status, host.channel.text, took) == (TurnStatus.COMPLETED, "abcde", 500)
        assert host.channel.every_notice == []

    def test_a_silent_stream_times_out_with_the_notice(self) -> None:
        """Silent for 120 s: `timeout` with the text so far, the error, and the warning."""
        host = Host(provider=ScriptProvider(silent("half a sen")))
        result, took = timed(host)
        assert (result.status, took) == (TurnStatus.TIMEOUT, INACTIVITY + SETTLE)
        (stream,) = result.stream_results
        assert stream.accumulated_text == "half a sen"
        assert stream.data == StreamError(
            type="timeout", message="no data from the provider for 120 s"
        )
        (notice,) = host.channel.every_notice
        assert (notice.key, notice.level, notice.hidden) == (
            "stream_inactivity_timeout",
            "warning",
            False,
        )
        assert "120 s" in notice.text

    def test_the_interpreter_reports_the_silence_and_the_step_sends_the_notice(self) -> None:
        """The interpreter decides nothing: it reports `StreamEnded(went_silent=True)`, and
        the notice the channel gets is the first effect of the step that event takes."""
        host = Host(provider=ScriptProvider(silent("half a sen")))
        timed(host)
        _, event = host.events[-1]
        assert isinstance(event, StreamEnded) and event.went_silent
        notice, *_ = host.steps[-1].effects
        assert isinstance(notice, SendNotice)
        assert (notice.key, notice.details) == (
            NoticeKey.STREAM_INACTIVITY_TIMEOUT,
            {"seconds": "120"},
        )
        assert [n.key for n in host.channel.every_notice] == ["stream_inactivity_timeout"]

    def test_a_timeout_the_provider_reports_itself_sends_no_inactivity_notice(self) -> None:
        """Only the loop's own timer makes a silent stream: a provider returning `timeout`
        ends the turn `timeout` without the notice, as before."""
        error = StreamError(type="timeout", message="upstream gave up")

        async def gives_up(request: StreamRequest, sink: StreamSink) -> StreamResult:
            return StreamResult(status=StreamStatus.TIMEOUT, data=error)

        host = Host(provider=ScriptProvider(gives_up))
        result, took = timed(host)
        assert (result.status, took) == (TurnStatus.TIMEOUT, 0)
        _, event = host.events[-1]
        assert isinstance(event, StreamEnded) and not event.went_silent
        assert host.channel.every_notice == []

    def test_suppressed_user_errors_send_no_inactivity_notice(self) -> None:
        """Under `suppress_user_errors` the timeout says nothing in the channel."""
        host = Host(provider=ScriptProvider(silent()), turn=TurnSettings(suppress_user_errors=True))
        result, _ = timed(host)
        assert result.status is TurnStatus.TIMEOUT
        assert host.channel.every_notice == []

    def test_a_pending_stop_at_the_timeout_is_a_stop_and_waits_for_nothing(self) -> None:
        """A stop requested while silent: `stopped_by_user` at 120 s, no settle, no notice."""
        host = Host(provider=ScriptProvider(silent("partial")))
        host.control.request_stop()
        result, took = timed(host)
        assert (result.status, took) == (TurnStatus.STOPPED_BY_USER, INACTIVITY)
        assert result.stream_results[0].accumulated_text == "partial"
        assert host.channel.every_notice == []

    def test_an_abandoned_stream_that_settles_in_time_has_its_message_delivered(self) -> None:
        """Text sent 3 s after the timeout (within the 5 s settle) reaches the channel first."""
        channel = OrderedChannel()
        provider = ScriptProvider(silent_after("a", for_s=INACTIVITY + 3, late="b"))
        host = Host(provider=provider, channel=channel)
        result, took = timed(host)
        assert (result.status, took) == (TurnStatus.TIMEOUT, INACTIVITY + 3)
        assert channel.log == ["text:a", "text:b", "notice:stream_inactivity_timeout"]

    def test_the_settle_is_bounded(self) -> None:
        """A call still silent when the 5 s settle ends is cancelled; its late text never lands."""
        host = Host(provider=ScriptProvider(silent_after("a", for_s=INACTIVITY + 60, late="b")))
        result, took = timed(host)
        assert (result.status, took) == (TurnStatus.TIMEOUT, INACTIVITY + SETTLE)
        assert host.channel.texts == ["a"]
        assert host.provider.cancelled_at == [INACTIVITY + SETTLE]

    def test_the_settle_bound_is_configurable_down_to_zero(self) -> None:
        """With `STREAM_ABANDONED_SETTLE_TIMEOUT_MS=0` the call is cancelled at the timeout."""
        host = Host(
            provider=ScriptProvider(silent("a")),
            config=LoopConfig(stream_abandoned_settle_timeout_ms=0),
        )
        _, took = timed(host)
        assert took == INACTIVITY
        assert host.provider.cancelled_at == [INACTIVITY]

    def test_a_notice_that_fails_to_send_is_logged_and_the_turn_goes_on(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The channel raising on the inactivity notice still gives the `timeout` result."""

        @attrs.define
        class NoticesBroken(RecordingChannel):
            async def send_notice(self, notice: Notice) -> None:
                raise ConnectionError("webhook gone")

        host = Host(provider=ScriptProvider(silent("a")), channel=NoticesBroken())
        with caplog.at_level(logging.ERROR, logger="toolloop"):
            result, _ = timed(host)
        assert result.status is TurnStatus.TIMEOUT
        assert "could not send the stream_inactivity_timeout notice" in caplog.text
        assert "webhook gone" in caplog.text


class TestToolTimeout:
    """Stage 02: the fresh per-call timeout, on virtual time."""

    def test_a_hanging_tool_fails_after_300_s_with_the_exact_error(self) -> None:
        """The failure says `timed out after 300 s`, and the model streams again."""
        host = with_tool(Host(provider=ScriptProvider(calling("search"), completed())), _hang)
        result, took = timed(host)
        failure = ToolResult(success=False, error="Tool search timed out after 300 s")
        assert settled(host) == [(TOOL_TIMEOUT, failure)]
        assert (result.status, took) == (TurnStatus.COMPLETED, TOOL_TIMEOUT)

    def test_the_timeout_is_fresh_per_call_and_whole_seconds_only_when_whole(self) -> None:
        """Two hanging calls each get the full 12.5 s, and the error says `12.5 s`."""
        host = with_tool(
            Host(
                provider=ScriptProvider(calling("search"), calling("search"), completed()),
                config=LoopConfig(tool_execution_timeout_ms=12_500),
            ),
            _hang,
        )
        timed(host)
        error = "Tool search timed out after 12.5 s"
        assert [(at, r.error) for at, r in settled(host)] == [(12.5, error), (25.0, error)]

    def test_a_kill_during_a_shielded_tool_is_reported_at_once(self) -> None:
        """A kill 10 s into a tool shielded for 60 s: `was killed` at 10 s; the run ends at 60 s."""

        async def stubborn(args: JsonObject, call: ToolCall) -> None:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(60)

        host = with_tool(Host(provider=ScriptProvider(calling("search"))), stubborn)

        async def main() -> tuple[GenerationTurnResult, float]:
            async with anyio.create_task_group() as group:
                group.start_soon(_kill_at, host, 10.0)
                result = await host.run()
            return result, anyio.current_time()

        result, ended = run_on("trio", main)
        killed = ToolResult(success=False, error="Tool search was killed")
        assert settled(host) == [(10.0, killed)]
        assert (result.status, ended) == (TurnStatus.STOPPED_BY_USER, 60.0)
        assert host.leftovers() == []


async def _kill_at(host: Host, at: float) -> None:
    await anyio.sleep_until(at)
    host.control.kill()


def blocking(point: anyio.Event, cancelled: list[str]) -> Any:
    """A tool that signals `point`, then waits until cancelled (and records that it was)."""

    async def search(args: JsonObject, call: ToolCall) -> None:
        point.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append("tool")

    return search


@pytest.mark.parametrize("backend", BACKENDS)
class TestKill:
    """The kill handle, under both backends: the kill comes while the call is live."""

    def test_a_kill_during_a_stream_stops_with_the_text_so_far(self, backend: Backend) -> None:
        """`/kill` mid-stream cancels the call at once; the result keeps the delivered text."""
        host = Host(provider=ScriptProvider(silent("so far")))

        async def main() -> GenerationTurnResult:
            point = anyio.Event()
            host.provider = ScriptProvider(silent("so far", started=point))
            async with anyio.create_task_group() as group:
                group.start_soon(_kill_when, point, host)
                result = await host.run()
            return result

        result = run_on(backend, main)
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert result.stream_results[0].accumulated_text == "so far"
        assert len(host.provider.cancelled_at) == 1
        assert host.leftovers() == []

    def test_a_kill_between_calls_ends_the_next_stream_before_it_delivers(
        self, backend: Backend
    ) -> None:
        """`/kill` while no call is live (a hidden notice is being sent): the next stream
        ends at once as stopped, and the model's next reply never reaches the channel."""
        host = Host(provider=ScriptProvider(calling("search", text="Looking."), completed("No.")))
        with_tool(host, failing_tool("upstream 503"))

        class KillingChannel(OrderedChannel):
            async def send_hidden_notice(self, notice: Notice) -> None:
                host.control.kill()
                await super().send_hidden_notice(notice)

        host.channel = KillingChannel()
        result = run_on(backend, host.run)
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert host.channel.texts == ["Looking."]
        assert [r.status for r in result.stream_results] == [
            StreamStatus.FUNCTION_CALL,
            StreamStatus.STOPPED_BY_USER,
        ]
        assert host.leftovers() == []

    def test_a_kill_during_a_tool_cancels_it_and_adds_nothing(self, backend: Backend) -> None:
        """`/kill` mid-tool: the tool is cancelled, the turn stops, the model is not asked again."""
        cancelled: list[str] = []
        host = Host(provider=ScriptProvider(calling("search"), completed()))

        async def main() -> GenerationTurnResult:
            point = anyio.Event()
            with_tool(host, blocking(point, cancelled))
            async with anyio.create_task_group() as group:
                group.start_soon(_kill_when, point, host)
                result = await host.run()
            return result

        result = run_on(backend, main)
        assert result.status is TurnStatus.STOPPED_BY_USER
        assert [r.error for _, r in settled(host)] == ["Tool search was killed"]
        assert (len(host.provider.requests), cancelled) == (1, ["tool"])
        assert host.leftovers() == []

    def test_the_tool_sees_the_turns_kill_signal(self, backend: Backend) -> None:
        """The invocation's `killed` event is the turn control's, set by the kill."""
        seen: list[bool] = []

        async def search(args: JsonObject, call: ToolCall) -> None:
            host.control.kill()
            seen.append(call.killed.is_set())

        host = with_tool(Host(provider=ScriptProvider(calling("search"))), search)
        run_on(backend, host.run)
        assert seen == [True]

    def test_a_stale_kill_handle_does_nothing(self, backend: Backend) -> None:
        """The stream's handle, called by a host that kept it, does not touch the tool after it."""

        class KeepingControl(MemoryTurnControl):
            def register_kill(self, handle: KillHandle) -> None:
                kept.append(handle)
                super().register_kill(handle)

        async def search(args: JsonObject, call: ToolCall) -> JsonObject:
            kept[0]()
            await anyio.sleep(0)
            return {"hits": 1}

        kept: list[KillHandle] = []
        provider = ScriptProvider(calling("search"), completed())
        host = with_tool(
            Host(provider=provider, control=KeepingControl(record_registrations=True)), search
        )

        async def main() -> GenerationTurnResult:
            with anyio.fail_after(60):
                return await host.run()

        assert run_on(backend, main).status is TurnStatus.COMPLETED
        assert [r for _, r in settled(host)] == [ToolResult(success=True, data={"hits": 1})]
        assert host.leftovers() == []


async def _kill_when(point: anyio.Event, host: Host) -> None:
    await point.wait()
    host.control.kill()


class RegistryBroke(RuntimeError):
    """What a registry that breaks its contract raises."""


class RaisingRegistry(ToolRegistry):
    """A registry whose `execute` raises, which the port promises never to do."""

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        raise RegistryBroke("registry bug")


@pytest.mark.parametrize("backend", BACKENDS)
class TestPortFailures:
    """What a port raises is the port's failure: propagated, or logged for a notice."""

    def test_a_registry_exception_propagates_after_cleanup(self, backend: Backend) -> None:
        """A raising registry is a broken port, not a failed tool: the loop raises it."""
        host = Host(provider=ScriptProvider(calling("search")), registry=RaisingRegistry())

        async def main() -> None:
            with pytest.raises(RegistryBroke, match=r"^registry bug$"):
                await host.run()

        run_on(backend, main)
        assert host.leftovers() == []

    def test_a_failed_progress_notice_does_not_fail_the_tool(self, backend: Backend) -> None:
        """A tool's `notify` on a broken channel is logged; the tool's result stands."""

        @attrs.define
        class NoticesBroken(RecordingChannel):
            async def send_notice(self, notice: Notice) -> None:
                raise ConnectionError("webhook gone")

        async def search(args: JsonObject, call: ToolCall) -> JsonObject:
            await call.notify("searching…")
            return {"hits": 1}

        provider = ScriptProvider(calling("search"), completed())
        host = with_tool(Host(provider=provider, channel=NoticesBroken()), search)
        result = run_on(backend, host.run)
        assert result.status is TurnStatus.COMPLETED
        assert [r for _, r in settled(host)] == [ToolResult(success=True, data={"hits": 1})]


def failing_tool(error: str) -> Any:
    async def search(args: JsonObject, call: ToolCall) -> ToolResult:
        return ToolResult(success=False, error=error)

    return search


SECRET_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "token": {"type": "string", "writeOnly": True}},
}


class TestNotices:
    """Notices are rendered from the catalog, redacted, truncated and sent to the right place."""

    def run_failing(self, error: str, **turn: Any) -> Host:
        host = Host(
            provider=ScriptProvider(
                calling("search", {"query": "cats", "token": "hunter2"}), completed()
            ),
            turn=TurnSettings(**turn),
        )
        with_tool(host, failing_tool(error), parameters=SECRET_SCHEMA)
        run_on("trio", host.run)
        return host

    def test_the_failed_tool_notice_is_hidden_with_secrets_redacted(self) -> None:
        """The thought log gets the reason, the redacted arguments and the data."""
        host = self.run_failing("nope")
        (thought,) = host.channel.thoughts
        assert (thought.key, thought.level, thought.hidden) == ("tool_call_failed", "error", True)
        assert thought.text == (
            'Tool search failed: nope. Arguments: {"query": "cats", "token": "[redacted]"}. '
            "Data: null"
        )
        assert host.channel.notices == []

    def test_the_failed_tool_notice_is_cut_to_1800_characters(self) -> None:
        """A 5,000-character reason leaves an 1800-character notice."""
        (thought,) = self.run_failing("x" * 5000).channel.thoughts
        assert len(thought.text) == 1800
        assert thought.text.startswith("Tool search failed: xxx")

    def test_notices_use_the_turns_locale_and_the_personas_identity(self) -> None:
        """A Japanese turn's tool-error-loop notice is Japanese, with the refresh tip, as Tomo."""
        host = Host(provider=ScriptProvider(calling("search")), turn=TurnSettings(locale="ja"))
        with_tool(host, failing_tool("nope"))
        result = run_on("trio", host.run)
        assert result.status is TurnStatus.ERROR
        (notice,) = host.channel.notices
        assert notice.key == "tool_error_loop"
        assert "コンテキストを更新" in notice.text
        assert notice.identity == "Tomo"

    def test_notices_under_user_impersonation_use_the_bots_identity(self) -> None:
        """Speaking as the user, a notice goes out under the bot's own identity (None)."""
        host = Host(
            provider=ScriptProvider(silent()),
            turn=TurnSettings(user_impersonation=True),
        )
        run_on("trio", host.run)
        assert [n.identity for n in host.channel.notices] == [None]

    @pytest.mark.parametrize(("surface", "shown"), [(True, ["searching…"]), (False, [])])
    def test_progress_notices_follow_surface_user_errors(
        self, surface: bool, shown: list[str]
    ) -> None:
        """A tool's progress notice is shown only when the turn surfaces user errors."""

        async def search(args: JsonObject, call: ToolCall) -> None:
            await call.notify("searching…")

        host = Host(
            provider=ScriptProvider(calling("search"), completed()),
            turn=TurnSettings(surface_user_errors=surface),
        )
        run_on("trio", with_tool(host, search).run)
        assert [n.text for n in host.channel.notices] == shown


class TestFinalEffects:
    """The loop returns `Finish`, raises `RaiseError` and refuses effects it does not know."""

    def test_the_tool_error_loop_under_impersonation_raises(self) -> None:
        """Impersonation turns the error cap into `ImpersonationAborted` with the abort message."""
        host = Host(
            provider=ScriptProvider(calling("search")),
            turn=TurnSettings(user_impersonation=True),
        )
        with_tool(host, failing_tool("nope"))

        async def main() -> ImpersonationAborted:
            with pytest.raises(ImpersonationAborted, match="impersonation") as raised:
                await host.run()
            return raised.value

        error = run_on("trio", main)
        assert str(error).startswith("User impersonation aborted")
        assert host.leftovers() == []

    def test_an_unknown_effect_is_a_type_error_naming_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An effect missing from the performer table is refused, naming it and a likely cause."""

        @attrs.frozen
        class Teleport:
            """An effect no interpreter knows."""

        def step_with_teleport(state: IterationState, event: Any) -> Step:
            out = step(state, event)
            effects: tuple[Any, ...] = (Teleport(), *out.effects)
            return attrs.evolve(out, effects=effects)

        monkeypatch.setattr(driver, "step", step_with_teleport)
        host = Host(provider=ScriptProvider(completed()))

        async def main() -> None:
            with pytest.raises(TypeError, match=r"^received unrecognized effect Teleport .*newer"):
                await host.run()

        run_on("trio", main)

    def test_an_unknown_effect_ending_a_step_is_a_type_error_naming_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An unknown effect in the awaited place is refused as one anywhere else is."""

        @attrs.frozen
        class Teleport:
            """An effect no interpreter knows."""

        def step_ending_in_teleport(state: IterationState, event: Any) -> Step:
            return attrs.evolve(step(state, event), effects=(Teleport(),))

        monkeypatch.setattr(driver, "step", step_ending_in_teleport)
        host = Host(provider=ScriptProvider(completed()))

        async def main() -> None:
            with pytest.raises(TypeError, match=r"^received unrecognized effect Teleport .*newer"):
                await host.run()

        run_on("trio", main)
        assert host.leftovers() == []

    @pytest.mark.parametrize(
        "last",
        [
            ResetFollowUpCount(),
            SendNotice(key=NoticeKey.STILL_WORKING, level=Level.INFO, hidden=True, iteration=0),
        ],
        ids=["performed-at-once", "awaited"],
    )
    def test_a_step_ending_in_a_fire_and_forget_effect_is_a_type_error_naming_it(
        self, monkeypatch: pytest.MonkeyPatch, last: Any
    ) -> None:
        """A step whose last effect answers nothing is a broken core: the error names it."""

        def step_ending_unanswered(state: IterationState, event: Any) -> Step:
            return attrs.evolve(step(state, event), effects=(last,))

        monkeypatch.setattr(driver, "step", step_ending_unanswered)
        host = Host(provider=ScriptProvider(completed()))
        name = type(last).__name__

        async def main() -> None:
            with pytest.raises(TypeError, match=rf"^a step ended with {name}, which answers"):
                await host.run()

        run_on("trio", main)
        assert host.leftovers() == []

    def test_the_reply_target_and_verbatim_flag_reach_the_provider(self) -> None:
        """`reply_to` and `verbatim` are in the request; streamed text replies to the target."""
        provider = ScriptProvider(completed("hi"))
        channel = ReplyChannel()

        async def main() -> None:
            await interpreter.run_tool_loop(
                turn=TurnSettings(),
                config=LoopConfig(),
                provider=provider,
                registry=ToolRegistry(),
                channel=channel,
                control=Host(provider=provider).control,
                reply_to="m42",
                verbatim=True,
            )

        run_on("trio", main)
        (request,) = provider.requests
        assert (request.reply_to, request.verbatim, channel.replies) == ("m42", True, ["m42"])


@attrs.define
class ReplyChannel(RecordingChannel):
    """Keeps the reply target of every text chunk."""

    replies: list[str | None] = attrs.field(factory=list)

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        self.replies.append(reply_to)
        await super().send_text(text, reply_to=reply_to)
