"""Fault injection (issue 12): a fault at every await point of a whole turn, through the real loop.

The turns are the demo's conversation over real HTTP: `ModelServer` serving
`demo_model`, the real `OpenAICompatProvider`, the demo's two tools in a real
`ToolRegistry`, `MemoryTurnControl` and a `RecordingChannel`. The *answer*
turn calls both tools and answers; the *notices* turn has a calculator that
fails (the hidden failed-tool notice), a clock that reports progress (a
visible notice during a tool) and a ceiling of two iterations (the
max-iterations notice); the *fallback* turn is a generation turn whose first
attempt hits a ceiling of one iteration, so its messages are deleted and the
second attempt answers (SPEC 10).

Every port the loop awaits is wrapped so that a clean run numbers the await
points it reaches: `stream` (the provider call), `send_text`, `send_notice`,
`send_hidden_notice`, `delete` (the channel's) and `tool` (each tool function). Then
each fault is put at each point where it applies, and the run is checked
against SPEC (the status, or the host's cancellation), that every text the
channel kept is in the result's stream results, in order, that an attempt a
fault ended did nothing more, and that nothing is left running or registered.
`wait_for_follow_up`, the turn control's one await, is the follow-up watcher's
wait, not a step of the turn. Everything crosses real sockets, so the runs
use real time on both backends (no timeout is due in any case).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Literal, get_args

import anyio
import attrs
import pytest
from anyio import wait_all_tasks_blocked

from tests.effects.harness import registrations
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import Notice, StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, TurnStarted
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
from toolloop.testing.model_server import ModelServer
from toolloop.tools import demo_model, demo_tools
from toolloop.tools.demo import demo_turn

pytestmark = pytest.mark.anyio

Port = Literal["stream", "send_text", "send_notice", "send_hidden_notice", "tool", "delete"]
Kind = Literal[
    "send_fails", "notice_fails", "tool_raises", "tool_ignores_kill", "host_cancels", "kill",
    "follow_up",
]  # fmt: skip
EVERY_PORT: frozenset[Port] = frozenset(get_args(Port))
APPLIES: dict[Kind, frozenset[Port]] = {
    "send_fails": frozenset({"send_text"}),
    "notice_fails": frozenset({"send_notice", "send_hidden_notice"}),
    "tool_raises": frozenset({"tool"}),
    "tool_ignores_kill": frozenset({"tool"}),
    "host_cancels": EVERY_PORT,
    "kill": EVERY_PORT,
    "follow_up": EVERY_PORT,
}
#: No timeout is due in any case: generous limits that still end a hang as a status, not a freeze.
CONFIG = LoopConfig(
    stream_sdk_call_timeout_ms=10_000,
    stream_abandoned_settle_timeout_ms=0,
    tool_execution_timeout_ms=10_000,
)
CLEAN = {
    "answer": TurnStatus.COMPLETED,
    "notices": TurnStatus.TIMEOUT,
    "fallback": TurnStatus.COMPLETED,
}
"""Each turn, and how it ends without a fault."""
CEILING_2 = attrs.evolve(CONFIG, max_function_call_iterations=2)
CEILING_1 = attrs.evolve(CONFIG, max_function_call_iterations=1)
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
    """Per point: how many tool results the model of this attempt has in its history."""
    state: IterationState | None = None
    """The loop's latest state."""
    finished: anyio.Event = attrs.field(factory=anyio.Event)
    """Set when the loop decided its outcome (the step that finishes the turn)."""
    straggler: list[str] = attrs.field(factory=list)
    """What the tool that ignored cancellation saw: `released` and/or `returned`."""
    fed_back: set[str] = attrs.field(factory=set)
    """Every tool response that was in a model's history, in any attempt."""

    async def reach(self, port: Port) -> None:
        """Number this point; inject the fault when it is the one."""
        self.reached.append(port)
        self.in_call.append(bool(self.control.kill_handles))
        # A delete starts the next attempt, with an empty history.
        history = self.state.function_history if self.state and port != "delete" else ()
        self.history.append(len(history))
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
        """The loop's observer: the latest state, what the model read, when an attempt ends."""
        if isinstance(event, TurnStarted):  # an attempt starts: it has not finished
            self.finished = anyio.Event()
        self.state = out.state
        self.fed_back.update(str(entry.function_response) for entry in out.state.function_history)
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

    async def send_hidden_notice(self, notice: Notice) -> None:
        await self.points.reach("send_hidden_notice")
        await super().send_hidden_notice(notice)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        await self.points.reach("delete")
        await super().delete_messages(ids)

    def kept(self) -> str:
        """The text of the messages delivered and not deleted."""
        return "".join(
            t for t, i in zip(self.texts, self.ids, strict=True) if i not in self.deleted
        )


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
    control = MemoryTurnControl(record_registrations=True)
    points = Points(control=control, host=anyio.CancelScope(), fault=fault)
    run = Run(points=points, channel=PointedChannel(points=points))

    provider, registry = PointedProvider(model, points), pointed_registry(points, turn)
    tasks_before = len(anyio.get_running_tasks())
    with points.host:
        if turn == "fallback":
            run.result = await run_generation_turn(
                turn=demo_turn(),
                attempts=[Attempt(provider=provider, config=c) for c in (CEILING_1, CONFIG)],
                registry=registry,
                channel=run.channel,
                control=control,
                observer=points.observe,
            )
        else:
            run.result = await run_tool_loop(
                turn=demo_turn(),
                config=CEILING_2 if turn == "notices" else CONFIG,
                provider=provider,
                registry=registry,
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
    kept = run.channel.kept()
    in_result = "".join(r.accumulated_text for r in result.stream_results)
    if kept != in_result:
        found.append(f"the channel kept {kept!r}, the result holds {in_result!r}")
    expected = expected_status(kind, at, clean)
    if result.status is not expected:
        found.append(f"ended {result.status.value}, SPEC says {expected.value}")
    streams = [r.status.value for r in result.stream_results]
    if expected is clean.result.status and streams != [
        r.status.value for r in clean.result.stream_results
    ]:
        found.append(f"the turn did not go on as without the fault: its streams {streams}")
    ends_attempt = kind == "send_fails" or expected is TurnStatus.FOLLOW_UP_INTERRUPT
    ends_attempt |= kind == "tool_ignores_kill" or (kind == "kill" and clean.points.in_call[at])
    went_on = rest_of_attempt(run.points.reached, at)
    if ends_attempt and went_on:
        found.append(f"the attempt went on after the fault ended it: {went_on}")
    history = run.points.state.function_history if run.points.state else ()
    if expected is TurnStatus.STOPPED_BY_USER and len(history) > clean.points.history[at]:
        found.append(f"a stopped call's result reached the history: {history}")
    last = result.stream_results[-1]
    if (
        kind == "send_fails"
        and expected is TurnStatus.ERROR
        and not (
            isinstance(last.data, StreamError)
            and last.data.type == "channel_send_failed"
            and "403 Forbidden" in last.data.message
        )
    ):
        found.append(f"the failed send is not the stream's error: {last.data!r}")
    if kind == "notice_fails" and "could not send the" not in logged:
        found.append("the failed notice was not logged")
    if kind == "tool_raises" and not any(BROKE in r for r in run.points.fed_back):
        found.append(f"the model does not read the tool's failure: {run.points.fed_back}")
    if kind == "tool_ignores_kill" and run.points.straggler != ["released", "returned"]:
        found.append(f"the loop did not finish without the straggler: {run.points.straggler}")
    return found


def expected_status(kind: Kind, at: int, clean: Run) -> TurnStatus:
    """SPEC's status for fault `kind` at point `at` of `clean`'s run."""
    assert clean.result is not None
    reached = clean.points.reached
    if kind == "send_fails":  # SPEC 5 amended; SPEC 10: an `error` hands over to the fallback
        return clean.result.status if "delete" in reached[at:] else TurnStatus.ERROR
    if kind in ("kill", "tool_ignores_kill"):
        # A kill ends the call in progress, or the next check (before a tool) stops the turn;
        # once the last call is over the turn has already decided.
        later_call = {"stream", "tool"} & set(reached[at:])
        stops = clean.points.in_call[at] or later_call
        return TurnStatus.STOPPED_BY_USER if stops else clean.result.status
    if kind == "follow_up" and interrupts(at, reached):
        return TurnStatus.FOLLOW_UP_INTERRUPT
    return clean.result.status  # a failed notice or tool, a follow-up the chain answers


def interrupts(at: int, reached: list[Port]) -> bool:
    """A follow-up at point `at` interrupts a stream before a tool's stop check clears it.

    It interrupts the stream it comes in, or the next stream to start, while the
    attempt's chain is not active (SPEC 5 amended), unless a tool comes first (its
    stop check clears a follow-up, SPEC 6 step 2 and 7).
    """
    for point in range(at, len(reached)):
        if reached[point] == "tool":
            return False
        chain_free = "tool" not in reached[attempt_start(reached, point) : point + 1]
        if chain_free and (point == at or reached[point] == "stream"):
            return True
    return False


def attempt_start(reached: list[Port], point: int) -> int:
    """The first point of the attempt `point` is in: a delete starts the next attempt."""
    deletes = [k for k in range(point + 1) if reached[k] == "delete"]
    return deletes[-1] if deletes else 0


def rest_of_attempt(reached: list[Port], at: int) -> list[Port]:
    """What the attempt did after point `at`: delivered, ran a tool, sent a notice.

    A provider call may still start (a follow-up pending at its start ends it at
    once), so `stream` points are not counted; the attempt ends at a delete.
    """
    rest = reached[at + 1 :]
    rest = rest[: rest.index("delete")] if "delete" in rest else rest
    return [port for port in rest if port != "stream"]


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
        for turn, status in CLEAN.items():
            clean = await run_turn(model, turn)
            assert clean.result is not None and clean.result.status is status
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
    assert tried, f"no point of any turn takes {kind}"
    assert found == {}
