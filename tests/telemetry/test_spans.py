"""The turn's spans, events and metrics, read back through the SDK's in-memory exporter."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import StatusCode

from tests.effects.harness import ScriptProvider, calling, completed, failing, run_on, silent
from tests.telemetry.sdk import Recorded
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.telemetry import Telemetry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    TurnSettings,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-very-secret"
pytestmark = pytest.mark.anyio


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "password": {"type": "string", "writeOnly": True},
            },
        }
    )
    async def search(args: JsonObject, call: ToolCall) -> JsonObject:
        """Echoes what it got, the secret included (a careless tool)."""
        return {"found": args["query"], "echo": args.get("password", "")}

    @tools.tool(parameters={"type": "object", "properties": {}})
    async def broken(args: JsonObject, call: ToolCall) -> JsonObject:
        """Always fails."""
        raise RuntimeError("the disk is on fire")

    return tools


def calling_with_id(name: str, args: JsonObject, call_id: str) -> Any:
    async def play(request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        await sink.deliver("Looking it up.")
        call = FunctionCall(name=name, args=args, passthrough={"id": call_id})
        return StreamResult(
            status=StreamStatus.FUNCTION_CALL, accumulated_text="Looking it up.", data=call
        )

    return play


async def run_turn(
    recorded: Recorded, *attempts: Attempt, turn: TurnSettings | None = None
) -> GenerationTurnResult:
    turn = turn or TurnSettings()
    with recorded.telemetry.turn(turn, attempts) as trace:
        return await run_generation_turn(
            turn=turn,
            attempts=attempts,
            registry=registry(),
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
            observer=trace.observer,
            on_event=trace.on_event,
        )


def attempt(*scripts: Any, name: str = "custom") -> Attempt:
    return Attempt(
        provider=ScriptProvider(*scripts, descriptor=ProviderDescriptor(name=name)),
        config=LoopConfig(),
    )


async def test_a_turn_with_one_tool_has_chat_and_tool_spans_under_its_turn_span() -> None:
    recorded = Recorded()
    args = {"query": "otters", "password": SECRET}
    await run_turn(recorded, attempt(calling_with_id("search", args, "call_7"), completed("Hi.")))
    turn = recorded.turn_span()
    chats, (tool,) = recorded.named("chat "), recorded.named("execute_tool")
    assert [span.name for span in chats] == ["chat custom", "chat custom"]
    assert tool.name == "execute_tool search"
    for child in [*chats, tool]:
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    assert turn.name == "invoke_agent Tomo"
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["toolloop.turn.status"] == "completed"
    first, second = (span.attributes or {} for span in chats)
    assert first["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second["gen_ai.response.finish_reasons"] == ("stop",)
    assert first["gen_ai.request.model"] == "custom"
    assert first["toolloop.stream.status"] == "function_call"
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == "call_7"
    assert (tool.attributes or {})["toolloop.tool.outcome"] == "success"


async def test_the_attempts_of_a_fallback_chain_are_all_under_the_one_turn_span() -> None:
    recorded = Recorded()
    await run_turn(
        recorded, attempt(failing("HTTP 503"), name="primary"), attempt(completed(), name="backup")
    )
    turn = recorded.turn_span()
    failed, done = recorded.named("chat ")
    assert (failed.name, done.name) == ("chat primary", "chat backup")
    assert {span.parent.span_id for span in (failed, done) if span.parent} == {turn.context.span_id}
    assert (failed.attributes or {})["toolloop.attempt"] == 0
    assert (done.attributes or {})["toolloop.attempt"] == 1
    assert (failed.attributes or {})["error.type"] == "http_status"
    assert failed.status.status_code is StatusCode.ERROR
    assert (turn.attributes or {})["toolloop.turn.attempts"] == 2


async def test_each_step_is_an_event_with_its_move_and_spec_rule() -> None:
    recorded = Recorded()
    await run_turn(recorded, attempt(calling("search", {"query": "x"}), completed()))
    steps = [event for event in recorded.turn_span().events if event.name == "toolloop.step"]
    moves = [(event.attributes or {})["toolloop.move"] for event in steps]
    assert moves == ["started", "dispatched", "tool_succeeded", "completed"]
    started = steps[0].attributes or {}
    assert (started["toolloop.rule"], started["toolloop.phase.source"]) == ("4.1", "idle")
    assert started["toolloop.phase.dest"] == "streaming"


async def test_without_the_opt_in_no_content_is_recorded() -> None:
    recorded = Recorded(capture_content=False)
    args = {"query": "otters", "password": SECRET}
    await run_turn(recorded, attempt(calling_with_id("search", args, "c1"), completed("Bye.")))
    everything = dumped(recorded)
    for content in ("otters", SECRET, "Looking it up.", "Bye."):
        assert content not in everything
    assert "gen_ai.tool.call.arguments" not in everything
    assert "gen_ai.output.messages" not in everything


async def test_with_the_opt_in_content_is_recorded_with_secrets_redacted() -> None:
    recorded = Recorded(capture_content=True)
    args = {"query": "otters", "password": SECRET}
    echo = completed(f"Your password is {SECRET}.")
    await run_turn(recorded, attempt(calling_with_id("search", args, "c1"), echo))
    (tool,) = recorded.named("execute_tool")
    attributes = tool.attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {
        "query": "otters",
        "password": "[redacted]",
    }
    result = json.loads(str(attributes["gen_ai.tool.call.result"]))
    assert result["data"] == {"found": "otters", "echo": "[redacted]"}
    last = recorded.named("chat ")[-1]
    (message,) = json.loads(str((last.attributes or {})["gen_ai.output.messages"]))
    assert message["parts"][0]["content"] == "Your password is [redacted]."
    assert SECRET not in dumped(recorded)


async def test_time_to_first_chunk_is_the_first_progress_after_the_call_starts() -> None:
    recorded = Recorded()

    async def slow(request: StreamRequest, sink: StreamSink) -> StreamResult:
        await anyio.sleep(0.05)
        sink.progress()
        await sink.deliver("late")
        return StreamResult(status=StreamStatus.COMPLETED, accumulated_text="late")

    await run_turn(recorded, attempt(slow))
    (chat,) = recorded.named("chat ")
    first = float((chat.attributes or {})["gen_ai.response.time_to_first_chunk"])  # type: ignore[arg-type]
    assert 0.05 <= first < 5


async def test_metrics_count_turns_tool_failures_iterations_and_chat_durations() -> None:
    recorded = Recorded()
    await run_turn(recorded, attempt(calling("broken", {}), calling("broken", {}), completed()))
    (failures,) = recorded.points("toolloop.tool.failures")
    assert failures.value == 2 and failures.attributes["gen_ai.tool.name"] == "broken"
    (turns,) = recorded.points("toolloop.turns")
    assert turns.value == 1 and turns.attributes["toolloop.turn.status"] == "completed"
    (iterations,) = recorded.points("toolloop.turn.iterations")
    assert iterations.sum == 3
    (duration,) = recorded.points("gen_ai.client.operation.duration")
    assert duration.count == 3 and duration.attributes["gen_ai.operation.name"] == "chat"
    (tool,) = recorded.named("execute_tool")[:1]
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "failure"


class Dropping(sampling.Sampler):
    """Drops every span it is asked about, and counts the asks."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def should_sample(self, *args: Any, **kwargs: Any) -> sampling.SamplingResult:
        self.asked.append(args[2])  # the span's name
        return sampling.SamplingResult(sampling.Decision.DROP)

    def get_description(self) -> str:
        return "Dropping"


async def test_a_turn_its_sampler_drops_starts_no_other_span_and_keeps_its_metrics() -> None:
    """Sampled out, the turn asks for no chat or tool span, yet every metric is recorded."""
    dropping = Dropping()
    recorded = Recorded(sampler=dropping)
    await run_turn(recorded, attempt(calling("broken", {}), completed()))
    assert dropping.asked == ["invoke_agent Tomo"]
    assert recorded.spans.get_finished_spans() == ()
    (failures,) = recorded.points("toolloop.tool.failures")
    assert failures.value == 1 and failures.attributes["gen_ai.tool.name"] == "broken"
    (duration,) = recorded.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    (turns,) = recorded.points("toolloop.turns")
    assert turns.value == 1 and turns.attributes["toolloop.turn.status"] == "completed"


async def test_an_exception_out_of_the_turn_is_recorded_on_its_span() -> None:
    recorded = Recorded()

    async def broken(request: StreamRequest, sink: StreamSink) -> StreamResult:
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError):
        await run_turn(recorded, attempt(broken))
    turn = recorded.turn_span()
    assert turn.status.status_code is StatusCode.ERROR
    assert (turn.attributes or {})["error.type"] == "ConnectionError"
    assert [event.name for event in turn.events if event.name == "exception"] == ["exception"]
    (chat,) = recorded.named("chat ")
    assert chat.end_time is not None  # left open by the exception, ended with the turn


async def test_a_call_that_raised_after_its_first_chunk_keeps_its_time_to_first_chunk() -> None:
    """The span the exception left open ends with the turn, its first chunk's time on it."""
    recorded = Recorded()

    async def broken(request: StreamRequest, sink: StreamSink) -> StreamResult:
        sink.progress()
        raise ConnectionError("reset mid-stream")

    with pytest.raises(ConnectionError):
        await run_turn(recorded, attempt(broken))
    (chat,) = recorded.named("chat ")
    assert chat.status.status_code is StatusCode.ERROR
    first = (chat.attributes or {})["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first, float) and first >= 0  # present; its size is a timing, not tested


def test_a_tool_over_its_timeout_has_outcome_timeout_and_a_killed_one_killed() -> None:
    recorded = Recorded()
    config = LoopConfig(tool_execution_timeout_ms=1000)
    tools = ToolRegistry()

    @tools.tool(parameters={"type": "object", "properties": {}})
    async def sleepy(args: JsonObject, call: ToolCall) -> JsonObject:
        """Sleeps past its timeout."""
        await anyio.sleep(60)
        return {}

    async def main() -> None:
        control = MemoryTurnControl()
        provider = ScriptProvider(calling("sleepy"), calling("sleepy"), completed())
        with recorded.telemetry.turn(TurnSettings()) as trace:
            async with anyio.create_task_group() as group:

                async def kill_the_second_call() -> None:
                    await anyio.sleep(1.5)
                    control.kill()

                group.start_soon(kill_the_second_call)
                await run_generation_turn(
                    turn=TurnSettings(),
                    attempts=[Attempt(provider=provider, config=config)],
                    registry=tools,
                    channel=RecordingChannel(),
                    control=control,
                    observer=trace.observer,
                    on_event=trace.on_event,
                )

    run_on("trio", main)
    outcomes = [(span.attributes or {})["toolloop.tool.outcome"] for span in recorded.named("exe")]
    assert outcomes == ["timeout", "killed"]
    (stops,) = recorded.points("toolloop.stops")
    assert stops.attributes["toolloop.move"] == "stopped_during_tool"


def test_a_follow_up_interrupt_is_counted() -> None:
    recorded = Recorded()

    async def main() -> None:
        control = MemoryTurnControl()
        started = anyio.Event()
        provider = ScriptProvider(silent("Hm", started))
        with recorded.telemetry.turn(TurnSettings()) as trace:
            async with anyio.create_task_group() as group:

                async def follow_up() -> None:
                    await started.wait()
                    control.request_follow_up()

                group.start_soon(follow_up)
                await run_generation_turn(
                    turn=TurnSettings(),
                    attempts=[Attempt(provider=provider, config=LoopConfig())],
                    registry=ToolRegistry(),
                    channel=RecordingChannel(),
                    control=control,
                    observer=trace.observer,
                    on_event=trace.on_event,
                )

    run_on("trio", main)
    (interrupts,) = recorded.points("toolloop.follow_up.interrupts")
    assert interrupts.value == 1


async def test_without_an_sdk_the_hooks_are_none_so_the_loop_calls_nothing() -> None:
    """The API's global providers are no-ops until an SDK is configured (none is, here)."""
    with Telemetry().turn(TurnSettings()) as trace:
        assert (trace.observer, trace.on_event) == (None, None)


def test_a_span_the_bot_starts_during_the_turn_is_under_the_turn_span() -> None:
    """The turn span is made current while the turn runs, so a bot's own spans nest under it."""
    recorded = Recorded()
    with recorded.telemetry.turn(TurnSettings()):
        recorded.telemetry.tracer.start_span("the bot's own").end()
    (own,) = recorded.named("the bot's own")
    assert own.parent is not None and own.parent.span_id == recorded.turn_span().context.span_id


class UnrecordedSpan(trace.NonRecordingSpan):
    """A span its sampler dropped that logs every call made on it."""

    def __init__(self, calls: list[str]) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        self.calls = calls

    def __getattribute__(self, name: str) -> Any:
        if name not in {"calls", "get_span_context", "__class__", "__init__"}:
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)


class UnrecordedTracer(trace.NoOpTracer):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return UnrecordedSpan(self.calls)


class UnrecordedProvider(trace.NoOpTracerProvider):
    """Every turn sampled out; with no meter provider of an SDK nothing would be kept."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return UnrecordedTracer(self.calls)


@pytest.mark.parametrize("raises", [False, True])
def test_a_turn_nothing_records_asks_its_span_only_whether_it_records_and_to_end(
    raises: bool,
) -> None:
    """Not recording and no meter: no attributes set, no status, no exception recorded."""
    provider = UnrecordedProvider()
    with (
        contextlib.suppress(ValueError),
        Telemetry(tracer_provider=provider).turn(TurnSettings()) as traced,
    ):
        assert (traced.observer, traced.on_event) == (None, None)
        if raises:
            raise ValueError("the turn failed")
    assert set(provider.calls) == {"is_recording", "end"}
    assert provider.calls.count("end") == 1


def dumped(recorded: Recorded) -> str:
    """Every exported span as JSON text, to search for what must not be there."""
    return "\n".join(span.to_json() for span in recorded.spans.get_finished_spans())


@pytest.fixture
def environment() -> Iterator[dict[str, str]]:
    env = dict(os.environ)
    env.update(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="toolloop-test",
        # The batch processor's thread prints to the stdout the command prints to; its
        # timed exports (every 5 s) could interleave with the demo's own lines on a
        # loaded machine and cut a span object. Export once, at exit, after the command.
        OTEL_BSP_SCHEDULE_DELAY="3600000",
    )
    yield env


SCENARIO = ROOT / "tests" / "scenarios" / "completed_after_one_tool.json"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["simulate", str(SCENARIO)], ["chat custom", "execute_tool web_search", "chat custom"]),
        (
            ["demo"],
            [
                "chat toolloop-demo",
                "execute_tool calculate",
                "chat toolloop-demo",
                "execute_tool get_time",
                "chat toolloop-demo",
            ],
        ),
    ],
)
def test_the_cli_under_opentelemetry_instrument_prints_the_turns_spans(
    command: list[str], expected: list[str], environment: dict[str, str], tmp_path: Path
) -> None:
    """No code change: the console exporter prints the turn's chat and tool spans, then it."""
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        [bin_dir / "opentelemetry-instrument", bin_dir / "toolloop", *command],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    names = [json.loads(span)["name"] for span in spans_of(done.stdout)]
    assert names == [*expected, "invoke_agent Tomo"]


def spans_of(output: str) -> list[str]:
    """The console exporter's span objects in `output` (each a JSON object starting at col 0)."""
    objects, current = [], []
    for line in output.splitlines():
        if line == "{":
            current = [line]
        elif current:
            current.append(line)
            if line == "}":
                text = "\n".join(current)
                if '"span_id"' in text:
                    objects.append(text)
                current = []
    return objects
