"""`toolloop simulate`: run a scenario through the real engine and interpreter on a virtual clock.

The provider and the tools are scripted (`toolloop.tools.scripted`), everything
else is what a bot runs: the registry, the interpreter with its timeouts and
kill handles, the in-memory turn control. Trio's mock clock jumps ahead
whenever every task waits, so a stalled stream times out at once.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.interpreter import Observer, run_tool_loop
from toolloop.effects.ports import Notice
from toolloop.engine.config_parsing import parse_config
from toolloop.engine.events import Event
from toolloop.engine.step import Step
from toolloop.engine.trace import Trace, TraceStep
from toolloop.states import IterationState
from toolloop.tools.observed import traced
from toolloop.tools.report import report
from toolloop.tools.scenario import Scenario
from toolloop.tools.scripted import (
    ScriptedApprovals,
    ScriptedChannel,
    ScriptedTurnControl,
    scripted_ports,
)


def simulate(
    scenario: Scenario, observer: Observer | None = None
) -> tuple[dict[str, Any], Trace, MemoryTurnControl]:
    """Run `scenario` once; the simulate document, the trace and the final turn control.

    `observer` sees every step as well (`toolloop simulate --trace` writes them).
    """
    loaded = parse_config(scenario.env)
    steps: list[TraceStep] = []
    control = ScriptedTurnControl(record_registrations=True)  # for the cleanup invariant
    channel = ScriptedChannel()
    outcome: dict[str, BaseException | None] = {"raised": None}
    approvals = ScriptedApprovals(scenario.tools, control)

    async def main() -> None:
        provider, registry = scripted_ports(scenario, control, channel)
        try:
            with traced(scenario.turn, observer=_recorder(steps, observer)) as hooks:
                await run_tool_loop(
                    turn=scenario.turn,
                    config=loaded.config,
                    provider=provider,
                    registry=registry,
                    channel=channel,
                    control=control,
                    observer=hooks.observer,
                    on_event=hooks.on_event,
                    approvals=approvals,
                )
        except Exception as error:  # the scenario ran; what it raised is part of its output
            outcome["raised"] = error

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    trace = Trace(config=loaded.config, turn=scenario.turn, steps=tuple(steps))
    notices = [_notice_json(notice) for notice in channel.every_notice]
    document = report(
        trace,
        notices=notices,
        delivered=channel.delivered,
        config_warnings=loaded.warnings,
        raised=outcome["raised"],
        approvals=approvals.records,
    )
    return document, trace, control


def _recorder(steps: list[TraceStep], also: Observer | None) -> Observer:
    def record(before: IterationState, event: Event, out: Step) -> None:
        if also is not None:
            also(before, event, out)
        steps.append(
            TraceStep(
                event=event,
                effects=out.effects,
                move=out.move,
                source=before.phase,
                dest=out.state.phase,
            )
        )

    return record


def _notice_json(notice: Notice) -> dict[str, Any]:
    return {
        "key": notice.key,
        "level": notice.level,
        "hidden": notice.hidden,
        "iteration": notice.iteration,
    }
