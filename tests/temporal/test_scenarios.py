"""The scenario library through the workflow: the outcome of the virtual-clock run.

Every scenario of tests/scenarios runs twice: through `simulate` (the
interpreter on trio's virtual clock: the reference) and as a turn workflow on
the dev server, its provider, tools, person and channel the same scripts,
served by one worker as activities. Both must end with the same result (or
the same raised error), the same text in the channel, the same function
history, the same notices, and the same tool runs.

The dev server's clock is real, so the timers a scenario waits on are set to
their smallest legal value, 10 s, in both runs: the inactivity timeout of a
stalled stream, the tool timeout of a hanging tool, the approval timeout of a
wait nobody answers (the scenario's own 60 s included). A scripted follow-up
arrives 5 s before its stream ends instead of 1 s (`FOLLOW_UP_AFTER_S`): the
time the workflow needs to cancel a stream activity, under load. The turns run
side by side, so the whole sweep takes about its longest timer.

What the scenario's turn control does in a process (a kill, a stop or a
follow-up the script makes) reaches the workflow as its signal, as a host
sends it; the script waits until the server has it before its call returns,
as a request made during a call is seen when the call ends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ActivityError, ApplicationError

from tests.scenario_files import SCENARIOS
from toolloop.durable import TurnPorts
from toolloop.effects.interpreter.errors import RAISES
from toolloop.effects.ports import StreamRequest, StreamSink, ToolInvocation
from toolloop.effects.registry import ToolRegistry
from toolloop.engine import commands as fx
from toolloop.engine.config_parsing import parse_config
from toolloop.states import (
    FunctionCall,
    GenerationTurnResult,
    IterationState,
    StreamResult,
    ToolContext,
    ToolResult,
)
from toolloop.temporal import TurnInput, TurnWorkflow, connect, start_turn, turn_worker
from toolloop.tools import scripted
from toolloop.tools.report import final_state, history_json
from toolloop.tools.scenario import Scenario, load_scenario
from toolloop.tools.scripted import (
    ScriptedApprovals,
    ScriptedChannel,
    ScriptedProvider,
    ScriptedTurnControl,
    scripted_ports,
)
from toolloop.tools.simulate import simulate

#: The smallest value of each timer a scenario may wait on (config_parsing's minimum).
SHORTEST_MS = 10_000
TIMERS = {
    "STREAM_SDK_CALL_TIMEOUT_MS": lambda s: any(stream.stall for stream in s.streams),
    "TOOL_EXECUTION_TIMEOUT_MS": lambda s: any(r.hang for t in s.tools for r in t.results),
    "TOOL_APPROVAL_TIMEOUT_MS": lambda s: any(
        d.kind == "timeout" for t in s.tools for d in t.approval or ()
    ),
}
FOLLOW_UP_AFTER_S = 5.0
#: No worker is lost here: a worker starved by the load must not be taken for dead.
WORKER_LOST_S = 60.0
TurnHandle = WorkflowHandle[TurnWorkflow, GenerationTurnResult]


def practical(scenario: Scenario) -> Scenario:
    """The scenario with each timer it waits on at `SHORTEST_MS`, on its own channel."""
    env = dict(scenario.env)
    for name, waits in TIMERS.items():
        if waits(scenario):
            env[name] = SHORTEST_MS
    turn = attrs.evolve(scenario.turn, channel_id=Path(scenario.file).stem)
    return attrs.evolve(scenario, env=env, turn=turn)


@attrs.frozen(kw_only=True)
class Outcome:
    """What a run of a scenario ends with, as both runs can tell it."""

    result: GenerationTurnResult | None
    raised: tuple[str, str] | None
    """The error's type and message, when the turn raised."""
    delivered: list[str]
    history: list[dict[str, Any]]
    notices: list[str]
    runs: list[str]
    """The tools the registry was asked to run (refused or not), in name order."""


def reference(scenario: Scenario) -> Outcome:
    """The outcome of the virtual-clock run (`simulate`)."""
    document, trace, _ = simulate(scenario)
    final = final_state(trace)
    raised = document["raised"]
    finish = [e for record in trace.steps for e in record.effects if isinstance(e, fx.Finish)]
    return Outcome(
        result=finish[-1].result if finish else None,
        raised=None if raised is None else (raised["type"], raised["message"]),
        delivered=document["delivered"],
        history=history_json(final),
        notices=[notice["key"] for notice in document["notices"]],
        runs=sorted(call["name"] for call in document["tool_calls"] if call["dispatched"]),
    )


class Signals(ScriptedTurnControl):
    """The script's kill, stop and follow-up, sent to the workflow as its signals."""

    def __init__(self, handle: TurnHandle) -> None:
        super().__init__()
        self.handle = handle
        self.sending: list[asyncio.Task[None]] = []

    def kill(self) -> None:
        super().kill()
        self._send(TurnWorkflow.kill)

    def request_stop(self) -> None:
        super().request_stop()
        self._send(TurnWorkflow.stop)

    def request_follow_up(self) -> None:
        super().request_follow_up()
        self._send(TurnWorkflow.follow_up)

    def _send(self, signal: Any) -> None:
        self.sending.append(asyncio.get_running_loop().create_task(self.handle.signal(signal)))

    async def sent(self) -> None:
        """Until the server has every signal sent so far."""
        while self.sending:
            await self.sending.pop(0)


class SignalledProvider:
    """The scripted provider; a call returns once the server has the signals it made."""

    def __init__(self, inner: ScriptedProvider, signals: Signals) -> None:
        self.inner, self.signals = inner, signals
        self.descriptor = inner.descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        try:
            return await self.inner.stream(request, sink)
        finally:
            await self.signals.sent()


class CountingRegistry:
    """The scripted registry, recording each call it is asked to run; a call begins and
    returns once the server has the signals made so far (a follow-up of the chain's mark)."""

    def __init__(self, inner: ToolRegistry, signals: Signals) -> None:
        self.inner, self.signals = inner, signals
        self.runs: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        self.runs.append(call.name.strip() or call.name)
        await self.signals.sent()
        try:
            return await self.inner.execute(call, context, invocation)
        finally:
            await self.signals.sent()


@attrs.define
class Served:
    """One scenario's ports on the worker, and its workflow."""

    ports: TurnPorts
    channel: ScriptedChannel
    registry: CountingRegistry
    handle: TurnHandle


def serve(client: Client, scenario: Scenario, queue: str) -> Served:
    handle: TurnHandle = client.get_workflow_handle_for(
        TurnWorkflow.run, f"scenario-{Path(scenario.file).stem}-{uuid.uuid4()}"
    )
    signals, channel = Signals(handle), ScriptedChannel()
    provider, inner = scripted_ports(scenario, signals, channel)
    registry = CountingRegistry(inner, signals)
    ports = TurnPorts(
        provider=SignalledProvider(provider, signals),
        registry=registry,  # type: ignore[arg-type]
        channel=channel,
        control=signals,
        approvals=ScriptedApprovals(scenario.tools, signals),
    )
    return Served(ports=ports, channel=channel, registry=registry, handle=handle)


async def through_the_workflow(
    client: Client, served: Served, scenario: Scenario, queue: str
) -> Outcome:
    """The scenario's turn as a workflow; its outcome read off the result and the state."""
    config = parse_config(scenario.env).config
    given = TurnInput(turn=scenario.turn, config=config, worker_lost_s=WORKER_LOST_S)
    handle = await start_turn(client, served.handle.id, given, task_queue=queue)
    result: GenerationTurnResult | None = None
    raised = None
    try:
        result = await handle.result()
    except WorkflowFailureError as failure:
        raised = _raised(failure)
    state: IterationState | None = await handle.query(TurnWorkflow.state)
    assert state is not None
    return Outcome(
        result=result,
        raised=raised,
        delivered=served.channel.delivered,
        history=history_json(state),
        notices=[notice.key for notice in served.channel.every_notice],
        runs=sorted(served.registry.runs),
    )


def _raised(failure: WorkflowFailureError) -> tuple[str, str]:
    """The error as the interpreter raises it: the turn's own (`RaiseError`) or the
    provider's, which the stream activity failed with."""
    cause = failure.cause
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError), failure
    own = next((kind for kind in fx.ErrorKind if kind.value == cause.type), None)
    kind = RAISES[own].__name__ if own is not None else str(cause.type)
    return kind, cause.message


def sweep(target: str) -> dict[str, tuple[Outcome, Outcome]]:
    """Each scenario's reference and workflow outcomes, the turns run side by side."""
    scenarios = {path.stem: practical(load_scenario(path)) for path in SCENARIOS}
    expected = {name: reference(scenario) for name, scenario in scenarios.items()}
    outcomes: dict[str, tuple[Outcome, Outcome]] = {}

    async def main() -> None:
        client = await connect(target)
        queue = f"scenarios-{uuid.uuid4()}"
        served = {name: serve(client, s, queue) for name, s in scenarios.items()}

        def ports(channel_id: str) -> TurnPorts:
            return served[channel_id].ports

        async def one(name: str) -> None:
            outcome = await through_the_workflow(client, served[name], scenarios[name], queue)
            outcomes[name] = (expected[name], outcome)

        worker = turn_worker(client, ports, task_queue=queue, heartbeat_every=0.2)
        async with worker, anyio.create_task_group() as group:
            for name in scenarios:
                group.start_soon(one, name)

    asyncio.run(main())
    return outcomes


@pytest.fixture(scope="module")
def outcomes(temporal: str) -> Iterator[dict[str, tuple[Outcome, Outcome]]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scripted, "FOLLOW_UP_AFTER_S", FOLLOW_UP_AFTER_S)
        yield sweep(temporal)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_a_scenario_through_the_workflow_ends_as_on_the_virtual_clock(
    path: Path, outcomes: dict[str, tuple[Outcome, Outcome]]
) -> None:
    """The workflow's result (or raised error), channel text, function history, notices and
    tool runs are those of the virtual-clock run of the same scenario."""
    expected, actual = outcomes[path.stem]
    for field in attrs.fields(Outcome):
        name = field.name
        assert getattr(actual, name) == getattr(expected, name), name
