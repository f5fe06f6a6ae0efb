"""The inspector's record of turns: phases as the loop moves, timelines without content, bounds."""

from __future__ import annotations

import anyio
import pytest

from tests.effects.harness import ScriptProvider, calling, completed, run_on
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.inspect import Inspector
from toolloop.effects.inspect.board import TIMELINE_LIMIT
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import Attempt, run_generation_turn
from toolloop.states import JsonObject, LoopConfig, TurnSettings

SECRET = "s3cret-value"


def registry(phases: list[str], inspector: Inspector) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(parameters={"type": "object", "properties": {"key": {"type": "string"}}})
    async def lookup(args: JsonObject, call: ToolCall) -> JsonObject:
        """Notes the phase the inspector shows while it runs."""
        phases.extend(view.phase for view in inspector.turns())
        await anyio.sleep(1)
        return {"value": args["key"]}

    return tools


async def one_turn(inspector: Inspector, phases: list[str], channel: str = "#a") -> None:
    provider = ScriptProvider(calling("lookup", {"key": SECRET}, text="Let me look."), completed())
    with inspector.watch(TurnSettings(), channel=channel) as view:
        await run_generation_turn(
            turn=TurnSettings(),
            attempts=[Attempt(provider=provider, config=LoopConfig())],
            registry=registry(phases, inspector),
            channel=RecordingChannel(),
            control=MemoryTurnControl(),
            observer=view.observer,
        )


def test_a_watched_turn_shows_its_phase_while_it_runs_and_its_status_once_over() -> None:
    inspector, phases = Inspector(), []
    run_on("trio", lambda: one_turn(inspector, phases))
    assert phases == ["dispatching"]
    (view,) = inspector.turns()
    summary = view.summary()
    assert (summary["channel"], summary["attempt"], summary["iteration"]) == ("#a", 0, 1)
    assert (summary["phase"], summary["status"], summary["finished"]) == (
        "finished",
        "completed",
        True,
    )


def test_the_timeline_names_moves_calls_and_tools_in_order_and_holds_no_content() -> None:
    inspector = Inspector()
    run_on("trio", lambda: one_turn(inspector, []))
    (view,) = inspector.turns()
    timeline = view.detail()["timeline"]
    assert [(entry["kind"], entry["text"]) for entry in timeline] == [
        ("move", "started"),
        ("provider", "call started"),
        ("provider", "call ended: function_call"),
        ("move", "dispatched"),
        ("tool", "lookup started"),
        ("tool", "lookup succeeded in 1000 ms"),
        ("move", "tool_succeeded"),
        ("provider", "call started"),
        ("provider", "call ended: completed"),
        ("move", "completed"),
    ]
    assert timeline[0]["rule"] == "4.1"
    assert timeline[-1]["at_ms"] >= 1000  # the tool's second passed before
    assert (timeline[-1]["source"], timeline[-1]["dest"]) == ("streaming", "finished")
    assert SECRET not in str(view.detail()) and "Let me look." not in str(view.detail())


def test_the_timeline_keeps_the_newest_steps_whole_up_to_its_bound() -> None:
    """A turn of more than `TIMELINE_LIMIT` steps keeps the newest ones, each with all its
    entries: every kept step has its one move, and the first kept step starts with its own."""
    inspector, tools = Inspector(), ToolRegistry()

    @tools.tool()
    async def ping() -> JsonObject:
        """Answers at once."""
        return {}

    calls = TIMELINE_LIMIT  # two steps each, and the first and last: 2 * LIMIT + 2 steps
    provider = ScriptProvider(*[calling("ping", {}) for _ in range(calls)], completed())

    async def main() -> None:
        with inspector.watch(TurnSettings()) as view:
            await run_generation_turn(
                turn=TurnSettings(),
                attempts=[
                    Attempt(
                        provider=provider,
                        config=LoopConfig(max_function_call_iterations=calls + 1),
                    )
                ],
                registry=tools,
                channel=RecordingChannel(),
                control=MemoryTurnControl(),
                observer=view.observer,
            )

    run_on("trio", main)
    (view,) = inspector.turns()
    timeline = view.detail()["timeline"]
    assert sum(entry["kind"] == "move" for entry in timeline) == TIMELINE_LIMIT
    assert [(entry["kind"], entry["text"]) for entry in timeline[:3]] == [
        ("tool", "ping succeeded in 0 ms"),
        ("move", "tool_succeeded"),
        ("provider", "call started"),
    ]
    assert (timeline[-1]["kind"], timeline[-1]["text"]) == ("move", "completed")


def test_finished_turns_are_kept_up_to_the_bound_and_running_ones_always() -> None:
    inspector = Inspector(keep_finished=2)

    async def main() -> None:
        release = anyio.Event()
        async with anyio.create_task_group() as group:

            async def running() -> None:
                with inspector.watch(TurnSettings(), channel="#long"):
                    await release.wait()

            group.start_soon(running)
            await anyio.sleep(0)
            for index in range(4):
                await one_turn(inspector, [], channel=f"#{index}")
            assert [view.channel for view in inspector.turns()] == ["#long", "#2", "#3"]
            release.set()

    run_on("trio", main)
    assert [view.channel for view in inspector.turns()] == ["#long", "#3"]


def test_an_exception_out_of_a_watched_turn_is_its_status() -> None:
    inspector = Inspector()
    with pytest.raises(RuntimeError), inspector.watch(TurnSettings()):
        raise RuntimeError("boom")
    (view,) = inspector.turns()
    assert (view.status, view.finished) == ("raised RuntimeError", True)


def test_a_negative_bound_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="keep_finished must be 0 or more, not -1"):
        Inspector(keep_finished=-1)
