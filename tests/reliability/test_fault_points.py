"""Fault injection (issue 12): a fault at every await point of a whole turn, through the real loop.

The turn is the demo's conversation over real HTTP: `ModelServer` serving
`demo_model`, the real `OpenAICompatProvider`, the demo's two tools in a real
`ToolRegistry`, `MemoryTurnControl` and a `RecordingChannel`. The *answer*
turn calls both tools and answers; the *notices* turn has a calculator that
fails (the hidden failed-tool notice), a clock that reports progress (a
visible notice during a tool) and a ceiling of two iterations (the
max-iterations notice).

Every port the interpreter awaits is wrapped so that a clean run numbers the
await points it reaches: `stream` (the provider call), `send_text`,
`send_notice`, `log_thought` and `tool` (each tool function). Then each fault
is put at each point where it applies, and the run is checked against SPEC
(the status, or the host's cancellation), that every text the channel
accepted is in the result's stream results, in order, and that nothing is
left running or registered. `delete_messages` is not among the points: only
the generation turn calls it, between attempts; `wait_for_follow_up` is the
follow-up watcher's wait, not a step of the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Literal

import anyio
import attrs
import pytest
from anyio import wait_all_tasks_blocked

from tests.effects.harness import registrations
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import Notice, StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine import effects as fx
from toolloop.engine.events import Event
from toolloop.engine.step import Step
from toolloop.specs.invariants import registrations_cleaned_up
from toolloop.states import (
    GenerationTurnResult,
    IterationState,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    TurnStatus,
)
from toolloop.tools import demo_model, demo_tools
from toolloop.tools.demo import demo_turn
from toolloop.tools.model_server import ModelServer

pytestmark = pytest.mark.anyio

Port = Literal["stream", "send_text", "send_notice", "log_thought", "tool"]
Kind = Literal[
    "send_fails", "notice_fails", "tool_raises", "tool_ignores_kill", "host_cancels", "kill",
    "follow_up",
]  # fmt: skip
APPLIES: dict[Kind, frozenset[Port]] = {
    "send_fails": frozenset({"send_text"}),
    "notice_fails": frozenset({"send_notice", "log_thought"}),
    "tool_raises": frozenset({"tool"}),
    "tool_ignores_kill": frozenset({"tool"}),
    "host_cancels": frozenset(Port.__args__),  # type: ignore[attr-defined]
    "kill": frozenset(Port.__args__),  # type: ignore[attr-defined]
    "follow_up": frozenset(Port.__args__),  # type: ignore[attr-defined]
}
#: No timeout is due in any case: generous limits that still end a hang as a status, not a freeze.
CONFIG = LoopConfig(
    stream_sdk_call_timeout_ms=10_000,
    stream_abandoned_settle_timeout_ms=0,
    tool_execution_timeout_ms=10_000,
)
TURNS = {"answer": CONFIG, "notices": attrs.evolve(CONFIG, max_function_call_iterations=2)}
BROKE = "the service behind the tool is down"
STRAGGLER_PATIENCE = 10.0
"""How long the tool that ignores cancellation waits for the loop to finish without it."""


class PlatformRefused(Exception):
    """What the chat platform raises for a send it refuses (a 403)."""


class ToolBroke(RuntimeError):
    """What a tool raises."""


@attrs.frozen
class Fault:
    """Fault `kind` at await point `at` of a turn's clean run."""

    kind: Kind
    at: int


@attrs.define
class Points:
    """The await points a run reaches, in order; at `fault.at` it injects the fault."""

    control: MemoryTurnControl
    host: anyio.CancelScope
    fault: Fault | None = None
    reached: list[Port] = attrs.field(factory=list)
    in_call: list[bool] = attrs.field(factory=list)
    """Per point: a provider call or a tool is in progress (its kill handle registered)."""
    history: list[int] = attrs.field(factory=list)
    """Per point: how many tool results the model has in its history."""
    state: IterationState | None = None
    """The loop's latest state."""
    finished: anyio.Event = attrs.field(factory=anyio.Event)
    """Set when the loop decided its outcome (the step that finishes the turn)."""
    straggler: list[str] = attrs.field(factory=list)
    """What the tool that ignored cancellation saw: `released` and/or `returned`."""

    async def reach(self, port: Port) -> None:
        """Number this point; inject the fault when it is the one."""
        self.reached.append(port)
        self.in_call.append(bool(self.control.kill_handles))
        self.history.append(len(self.state.function_history) if self.state else 0)
        if self.fault is None or len(self.reached) - 1 != self.fault.at:
            return
        kind = self.fault.kind
        if kind in ("send_fails", "notice_fails"):
            raise PlatformRefused("403 Forbidden: Missing Permissions")
        if kind == "tool_raises":
            raise ToolBroke(BROKE)
        if kind == "tool_ignores_kill":
            await self._ignore_the_kill()
        elif kind == "host_cancels":
            self.host.cancel()
        elif kind == "kill":
            self.control.kill()
        elif kind == "follow_up":
            self.control.request_follow_up()

    async def _ignore_the_kill(self) -> None:
        """Shielded: the kill arrives, and the tool waits until the loop has finished without it.

        A loop that waited for the tool before deciding would leave it waiting the
        whole `STRAGGLER_PATIENCE`, and `released` would be missing.
        """
        with anyio.CancelScope(shield=True):
            self.control.kill()
            with anyio.move_on_after(STRAGGLER_PATIENCE):
                await self.finished.wait()
                self.straggler.append("released")
        self.straggler.append("returned")

    def observe(self, before: IterationState, event: Event, out: Step) -> None:
        self.state = out.state
        if isinstance(out.effects[-1], fx.Finish):
            self.finished.set()


@attrs.define
class PointedChannel(RecordingChannel):
    """A recording channel whose sends are await points; it records only what it accepted."""

    points: Points = attrs.field(kw_only=True)

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        await self.points.reach("send_text")
        await super().send_text(text, reply_to=reply_to)

    async def send_notice(self, notice: Notice) -> None:
        await self.points.reach("send_notice")
        await super().send_notice(notice)

    async def log_thought(self, notice: Notice) -> None:
        await self.points.reach("log_thought")
        await super().log_thought(notice)


@attrs.frozen
class PointedProvider:
    """The real provider, its call an await point."""

    inner: OpenAICompatProvider
    points: Points

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self.inner.descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        await self.points.reach("stream")
        return await self.inner.stream(request, sink)


def pointed_registry(points: Points, turn: str) -> ToolRegistry:
    """The demo's tools, each an await point; in the notices turn the calculator fails."""
    registry = ToolRegistry()

    async def calculate(args: JsonObject, call: ToolCall) -> JsonObject:
        await points.reach("tool")
        if turn == "notices":
            raise ToolBroke("the calculator is offline")
        return demo_tools.calculate(args["expression"])

    async def get_time(args: JsonObject, call: ToolCall) -> JsonObject:
        await points.reach("tool")
        if turn == "notices":
            await call.notify("Reading the clock of Asia/Tokyo.")
        return demo_tools.get_time(args["timezone"])

    registry.register(calculate, parameters=demo_tools.CALCULATE)
    registry.register(get_time, parameters=demo_tools.GET_TIME)
    return registry


@attrs.define
class Run:
    """One run of a turn: its points, its ports and how it ended."""

    points: Points
    channel: PointedChannel
    result: GenerationTurnResult | None = None
    leftovers: list[str] = attrs.field(factory=list)


async def run_turn(model: OpenAICompatProvider, turn: str, fault: Fault | None = None) -> Run:
    """Run `turn` with `fault` in place; `result` stays None when the host's scope cancelled it."""
    control = MemoryTurnControl()
    points = Points(control=control, host=anyio.CancelScope(), fault=fault)
    run = Run(points=points, channel=PointedChannel(points=points))

    tasks_before = len(anyio.get_running_tasks())
    with points.host:
        run.result = await run_tool_loop(
            turn=demo_turn(),
            config=TURNS[turn],
            provider=PointedProvider(model, points),
            registry=pointed_registry(points, turn),
            channel=run.channel,
            control=control,
            observer=points.observe,
        )
    await wait_all_tasks_blocked()
    tasks = len(anyio.get_running_tasks()) - tasks_before
    run.leftovers = [f"kill handle {handle!r} still registered" for handle in control.kill_handles]
    run.leftovers += registrations_cleaned_up(registrations(control))
    run.leftovers += [f"{tasks} tasks left running"] if tasks else []
    return run


def problems(kind: Kind, at: int, clean: Run, run: Run, logged: str) -> list[str]:
    """What is wrong with `run`, a fault `kind` at point `at` of `clean`'s points (SPEC)."""
    found = list(run.leftovers)
    result = run.result
    if kind == "host_cancels":
        if result is not None or not run.points.host.cancelled_caught:
            found.append(f"the host's cancellation did not propagate: {result}")
        return found
    if result is None or clean.result is None:
        return [*found, "the loop was cancelled without the host cancelling it"]
    accepted = "".join(run.channel.texts)
    in_result = "".join(r.accumulated_text for r in result.stream_results)
    if accepted != in_result:
        found.append(f"the channel accepted {accepted!r}, the result holds {in_result!r}")
    expected = expected_status(kind, at, clean)
    if result.status is not expected:
        found.append(f"ended {result.status.value}, SPEC says {expected.value}")
    streams = [r.status.value for r in result.stream_results]
    if expected is clean.result.status and streams != [
        r.status.value for r in clean.result.stream_results
    ]:
        found.append(f"the turn did not go on as without the fault: its streams {streams}")
    ends_at_once = kind == "send_fails" or expected is TurnStatus.FOLLOW_UP_INTERRUPT
    ends_at_once |= kind == "tool_ignores_kill" or (kind == "kill" and clean.points.in_call[at])
    if ends_at_once and run.points.reached[at + 1 :]:
        found.append(f"the turn went on after it ended: {run.points.reached[at + 1 :]}")
    history = run.points.state.function_history if run.points.state else ()
    if expected is TurnStatus.STOPPED_BY_USER and len(history) != clean.points.history[at]:
        found.append(f"a stopped tool's result reached the history: {history[-1]}")
    last = result.stream_results[-1]
    if kind == "send_fails" and not (
        isinstance(last.data, StreamError)
        and last.data.type == "channel_send_failed"
        and "403 Forbidden" in last.data.message
    ):
        found.append(f"the failed send is not the stream's error: {last.data!r}")
    if kind == "notice_fails" and "could not send the" not in logged:
        found.append("the failed notice was not logged")
    responses = [str(entry.function_response) for entry in history]
    if kind == "tool_raises" and not any(BROKE in r for r in responses):
        found.append(f"the model does not read the tool's failure: {responses}")
    if kind == "tool_ignores_kill" and run.points.straggler != ["released", "returned"]:
        found.append(f"the loop did not finish without the straggler: {run.points.straggler}")
    return found


def expected_status(kind: Kind, at: int, clean: Run) -> TurnStatus:
    """SPEC's status for fault `kind` at point `at` of `clean`'s run."""
    assert clean.result is not None
    points = clean.points
    if kind == "send_fails":
        return TurnStatus.ERROR  # SPEC 5 amended: the channel fails
    if kind in ("kill", "tool_ignores_kill"):
        # A kill ends the call in progress, or the next check (before a tool) stops the turn;
        # once the last call is over the turn has already decided.
        later_call = {"stream", "tool"} & set(points.reached[at:])
        stops = points.in_call[at] or later_call
        return TurnStatus.STOPPED_BY_USER if stops else clean.result.status
    if kind == "follow_up" and before_the_chain(at, clean):
        return TurnStatus.FOLLOW_UP_INTERRUPT
    return clean.result.status  # a failed notice or tool, a follow-up once the chain is active


def before_the_chain(at: int, clean: Run) -> bool:
    """Point `at` comes before the first tool: in the first stream, before its `function_call`."""
    return "tool" not in clean.points.reached[: at + 1]


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    """The demo's model on loopback, without the pause between chunks that makes it readable."""
    with ModelServer(demo_model.chunks, delay=0) as running:
        yield running


@pytest.mark.parametrize("kind", APPLIES)
async def test_a_fault_at_every_await_point_ends_the_turn_as_spec_says(
    server: ModelServer, kind: Kind, caplog: pytest.LogCaptureFixture
) -> None:
    """At each point it applies to: the SPEC outcome, every accepted text kept, no leftover."""
    found: dict[str, list[str]] = {}
    tried = 0
    async with OpenAICompatProvider(base_url=server.base_url, model=demo_model.MODEL) as model:
        for turn in TURNS:
            clean = await run_turn(model, turn)
            assert clean.leftovers == []
            for at, port in enumerate(clean.points.reached):
                if port not in APPLIES[kind]:
                    continue
                tried += 1
                caplog.clear()
                with caplog.at_level(logging.ERROR, logger="toolloop"):
                    run = await run_turn(model, turn, Fault(kind, at))
                wrong = problems(kind, at, clean, run, caplog.text)
                if wrong:
                    found[f"{turn} turn, point {at} ({port})"] = wrong
    assert tried, f"no point of either turn takes {kind}"
    assert found == {}
