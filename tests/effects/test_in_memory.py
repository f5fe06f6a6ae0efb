"""The in-memory ports: a turn control with real state and a channel that records."""

from __future__ import annotations

import anyio
import pytest

from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.ports import Notice
from toolloop.engine.events import StopRequest


class TestMemoryTurnControl:
    """What a bot's `/kill` and queue do to the turn state."""

    def test_kill_sets_the_stop_fires_every_handle_and_the_kill_event(self) -> None:
        """`kill()` is a genuine stop, ends the registered call and signals the tools."""
        control, fired = MemoryTurnControl(), list[str]()
        control.register_kill(lambda: fired.append("call"))
        control.kill()
        assert (control.pending_request(), fired, control.killed.is_set()) == (
            StopRequest.STOP,
            ["call"],
            True,
        )

    def test_a_deregistered_handle_is_not_fired(self) -> None:
        """After deregistration a kill leaves the handle alone; the log shows both moves."""
        control, fired = MemoryTurnControl(record_registrations=True), list[str]()

        def handle() -> None:
            fired.append("call")

        control.register_kill(handle)
        control.deregister_kill(handle)
        control.kill()
        assert fired == []
        assert [action for action, _ in control.registrations] == ["register", "deregister"]

    def test_a_follow_up_is_not_a_stop(self) -> None:
        """A queued follow-up is reported as such and fires no kill."""
        control = MemoryTurnControl()
        control.request_follow_up()
        assert (control.pending_request(), control.killed.is_set()) == (
            StopRequest.FOLLOW_UP,
            False,
        )

    def test_new_turn_clears_the_turn_but_keeps_the_channels_counts(self) -> None:
        """The next turn gets a fresh kill signal and no request; the follow-up count stays."""
        control = MemoryTurnControl()
        control.increment_follow_up_count()
        control.set_tool_chain_active()
        control.kill()
        control.new_turn()
        assert (control.pending_request(), control.killed.is_set()) == (StopRequest.NONE, False)
        assert (control.tool_chain_active, control.follow_up_count) == (False, 1)

    def test_it_can_be_made_outside_an_event_loop(self) -> None:
        """A bot builds its channel states at start-up, before any loop runs."""

        async def main() -> bool:
            control.kill()
            return control.killed.is_set()

        control = MemoryTurnControl()
        assert anyio.run(main) is True


@pytest.mark.anyio
async def test_the_kill_signal_wakes_a_tool_waiting_on_it_and_lets_a_late_one_through() -> None:
    """A tool waiting on `killed` wakes on `kill()`; one waiting after it returns at once."""
    control, woke = MemoryTurnControl(), list[str]()

    async def tool(name: str) -> None:
        await control.killed.wait()
        woke.append(name)

    async with anyio.create_task_group() as group:
        group.start_soon(tool, "waiting")
        await anyio.wait_all_tasks_blocked()
        assert woke == []
        control.kill()
    with anyio.fail_after(1):
        await tool("late")
    assert woke == ["waiting", "late"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_recording_channel_keeps_everything_in_order(anyio_backend: str) -> None:
    """Text chunks become numbered messages; visible and hidden notices keep one order."""
    channel = RecordingChannel()
    shown = Notice(key="still_working", level="warning", text="…", hidden=False, iteration=20)
    hidden = Notice(key="tool_call_failed", level="error", text="…", hidden=True, iteration=20)
    await channel.send_text("Hel", reply_to=None)
    await channel.send_notice(shown)
    await channel.send_hidden_notice(hidden)
    await channel.send_text("lo", reply_to=None)
    await channel.delete_messages(["m1"])
    assert (channel.text, channel.delivered_message_ids(), channel.deleted) == (
        "Hello",
        ("m1", "m2"),
        ["m1"],
    )
    assert channel.every_notice == [shown, hidden]
    assert (channel.notices, channel.thoughts) == ([shown], [hidden])
