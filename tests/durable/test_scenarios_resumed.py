"""The scenario library through the journal: crashed at every write, resumed, same outcome.

Each scenario of tests/scenarios whose outcome lives in the journal and the
scripts alone runs journaled on the real clock, then once per write of the
journal crashed right before and right after it (but for the one instant the
journal cannot know about: a piece of text shown and not yet committed) and
resumed in a fresh process's ports: the result and the channel's texts must be
those of the run that never crashed. Left out, with the reason:

* scenarios with a kill, a stop or a follow-up: those requests live in the
  dead process's turn control, so a restart does not see them;
* stalls, hanging or slow tools and raising scripts: their outcome is a timer
  or an error of the process, which a restart does not carry over;
* tools with more than one scripted result or approval decision, or a decision
  that is delayed, a timeout or a kill: a script consumed by the run that died
  is consumed again by the one that resumes, so the result would differ for the
  script's bookkeeping, not for the journal's (and a timeout is a timer).

The scenario's person (its approval decisions) answers in the resumed process
too: a call that waited for approval when the process died is asked again.

Every scripted tool is pure, so the resumed process declares them idempotent:
a call in flight runs again, as its result is the same.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.durable.crash import CrashingJournal, When
from tests.scenario_files import SCENARIOS
from toolloop.durable import Journal, JournaledTurn, TurnPorts, resume, run_journaled
from toolloop.engine.config_parsing import parse_config
from toolloop.engine.events import StreamEnded
from toolloop.states import GenerationTurnResult
from toolloop.tools.scenario import Scenario, load_scenario
from toolloop.tools.scripted import (
    ScriptedApprovals,
    ScriptedChannel,
    ScriptedTurnControl,
    scripted_ports,
)


def calm(scenario: Scenario) -> bool:
    """The outcome lives in the journal and the scripts alone (see the module's docstring)."""
    streams_calm = not any(
        s.stall
        or s.kill
        or s.stop_before_tool
        or s.follow_up_before_tool
        or s.raises
        or s.follow_up
        or s.channel_fails
        for s in scenario.streams
    )
    tools_calm = all(
        len(tool.results) == 1
        and not any(r.hang or r.kill or r.raises or r.delay_ms for r in tool.results)
        and (
            tool.approval is None
            or (
                len(tool.approval) == 1
                and tool.approval[0].kind in ("approve", "deny")
                and not tool.approval[0].delay_ms
            )
        )
        for tool in scenario.tools
    )
    return streams_calm and tools_calm and not scenario.turn.stop_context_queued


SWEPT = [path for path in SCENARIOS if calm(load_scenario(path))]


class World:
    """The channel outlives the process; the scripts resume at the stream in flight."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.channel = ScriptedChannel()

    def ports(self, streams_made: int = 0) -> TurnPorts:
        """A process's ports; the provider's script starts after `streams_made` streams."""
        scenario, control = self.scenario, ScriptedTurnControl()
        streams = scenario.streams[streams_made:] or scenario.streams[-1:]
        provider, registry = scripted_ports(
            Scenario(
                file=scenario.file,
                env=scenario.env,
                turn=scenario.turn,
                tools=scenario.tools,
                streams=streams,
            ),
            control,
            self.channel,
        )
        provider._calls = streams_made  # a call's default id names its provider call
        registry.idempotent = lambda tool: True  # type: ignore[method-assign]  # pure scripts
        return TurnPorts(
            provider=provider,
            registry=registry,
            channel=self.channel,
            control=control,
            approvals=ScriptedApprovals(scenario.tools, control),
        )

    def resumed_ports(self, journaled: JournaledTurn) -> TurnPorts:
        made = sum(isinstance(event, StreamEnded) for event in journaled.events)
        return self.ports(made)


async def run(
    scenario: Scenario, folder: Path, crash_at: int | None, when: When
) -> tuple[GenerationTurnResult | Exception, list[str], list[str]]:
    """The outcome (result or raised error), the channel's texts and the journal's writes."""
    world = World(scenario)
    path = folder / f"{crash_at}-{when}.db"
    journal = await CrashingJournal.open(path)
    journal.crash_at, journal.when = crash_at, when
    config = parse_config(scenario.env).config
    outcome: GenerationTurnResult | Exception | None = None
    with anyio.CancelScope() as journal.scope:
        try:
            outcome = await run_journaled(
                journal, "t", turn=scenario.turn, config=config, ports=world.ports()
            )
        except Exception as error:  # part of the scenario's outcome
            outcome = error
    await journal.close()
    if journal.scope.cancelled_caught:
        async with await Journal.open(path) as restarted:
            [outcome] = (await resume(restarted, world.resumed_ports)).values()
            assert await restarted.unfinished() == []
    assert outcome is not None
    return outcome, list(world.channel.texts), journal.kinds


def same(a: GenerationTurnResult | Exception, b: GenerationTurnResult | Exception) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    return a == b


@pytest.mark.parametrize("path", SWEPT, ids=[p.stem for p in SWEPT])
def test_a_scenario_crashed_at_any_write_resumes_to_the_same_outcome(
    path: Path, tmp_path: Path
) -> None:
    """Crashed before or after each write of the journal and resumed, the scenario ends with
    the result and the channel texts of its uncrashed run."""
    scenario = load_scenario(path)

    async def main() -> None:
        expected, texts, kinds = await run(scenario, tmp_path, None, "after")
        for crash_at, kind in enumerate(kinds):
            for when in ("before", "after"):
                if kind == "text" and when == "before":
                    continue  # the one instant the journal cannot know about
                outcome, shown, _ = await run(scenario, tmp_path, crash_at, when)
                where = f"crash {when} write {crash_at} ({kind})"
                assert same(outcome, expected), f"{where}: {outcome!r}"
                assert shown == texts, where

    anyio.run(main, backend="asyncio")


def test_most_of_the_library_is_swept() -> None:
    """The sweep covers the calm scenarios: at least half the library."""
    assert len(SWEPT) >= len(SCENARIOS) // 2


def test_the_sweep_crashes_turns_that_wait_for_approval() -> None:
    """The approval scenarios with one plain decision per tool are swept (SPEC 6c)."""
    swept = {path.stem for path in SWEPT}
    assert {
        "approval_approved_call_runs",
        "approval_denied_with_reason",
        "approval_invalid_arguments_never_asked",
    } <= swept
