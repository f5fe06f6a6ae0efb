"""The loop invariants of SPEC hold on every generated attempt, and each one can fail."""

from __future__ import annotations

from collections.abc import Callable

import attrs
from hypothesis import given, settings

from tests.engine.builders import call, done, ended, ok
from tests.engine.drive import Run, drive
from tests.specs.conformance import trace_of
from tests.specs.strategies import attempts
from toolloop.engine.commands import Effect, Finish, Level, NoticeKey, SendNotice, StreamOnce
from toolloop.engine.trace import Trace
from toolloop.specs.invariants import (
    Registration,
    check,
    history_only_grows,
    history_paired,
    no_text_delivered_twice,
    notices_at_most_once,
    registrations_cleaned_up,
    result_of,
    silence_noticed,
    sticker_only_on_completed,
)
from toolloop.states import Sticker, StreamStatus, TurnSettings, TurnStatus

STICKER = Sticker(id="s1", name="gong")
Effects = tuple[Effect, ...]


@given(run=attempts)
@settings(max_examples=300)
def test_every_generated_attempt_keeps_every_trace_invariant(run: Run) -> None:
    """Invariants: once-only notices, an inactivity notice for each silent stream, paired
    growing history, stickers on completed, no echo."""
    assert check(trace_of(run)) == []


def tool_run() -> Trace:
    """A call with pre-tool text, a successful tool, then a completed stream."""
    return trace_of(drive([call(text="Let me look."), done()], [ok({"hits": 3})]))


def with_effect(trace: Trace, index: int, change: Callable[[Effects], Effects]) -> Trace:
    """The trace with step `index`'s effects rewritten by `change`."""
    steps = list(trace.steps)
    steps[index] = attrs.evolve(steps[index], effects=change(steps[index].effects))
    return attrs.evolve(trace, steps=tuple(steps))


def stream_once(trace: Trace) -> tuple[int, StreamOnce]:
    """The last provider call of the trace and its step index."""
    found = [
        (i, e) for i, s in enumerate(trace.steps) for e in s.effects if isinstance(e, StreamOnce)
    ]
    return found[-1]


def replace_stream_once(trace: Trace, **changes: object) -> Trace:
    index, effect = stream_once(trace)
    changed = attrs.evolve(effect, **changes)
    return with_effect(
        trace, index, lambda effects: tuple(changed if e is effect else e for e in effects)
    )


class TestEachInvariantFails:
    """Each predicate reports a deliberately broken trace, naming the step."""

    def test_a_second_still_working_notice_is_reported(self) -> None:
        """The still-working notice may be sent once per attempt."""
        notice = SendNotice(key=NoticeKey.STILL_WORKING, level=Level.WARNING, iteration=20)
        trace = tool_run()
        trace = with_effect(trace, 0, lambda effects: (notice, *effects))
        trace = with_effect(trace, 2, lambda effects: (notice, *effects))
        assert notices_at_most_once(trace, None) == [
            "step 2 (ToolSettled): notice still_working sent again (first at step 0 (TurnStarted))"
        ]

    def test_a_history_entry_with_a_foreign_response_is_reported(self) -> None:
        """A call answered under another tool's name breaks the pairing."""
        trace = tool_run()
        _, effect = stream_once(trace)
        entry = attrs.evolve(
            effect.function_history[0], function_response={"name": "roll_dice", "response": {}}
        )
        broken = replace_stream_once(trace, function_history=(entry,))
        assert history_paired(broken, None) == [
            "step 2 (ToolSettled): history entry 0 pairs call 'web_search' with 'roll_dice'"
        ]

    def test_a_history_that_loses_an_entry_is_reported(self) -> None:
        """History passed to a later provider call must extend the earlier one."""
        trace = trace_of(drive([call(), call(), done()], [ok()]))
        broken = replace_stream_once(trace, function_history=())
        assert history_only_grows(broken, None) == [
            "step 4 (ToolSettled): history does not extend the previous provider call's"
        ]

    def test_a_sticker_on_an_error_result_is_reported(self) -> None:
        """Only completed results carry the selected sticker."""
        trace = tool_run()
        final = trace.steps[-1].effects[-1]
        assert isinstance(final, Finish)
        wrong = attrs.evolve(final.result, status=TurnStatus.ERROR, selected_sticker=STICKER)
        assert sticker_only_on_completed(trace, wrong) == [
            "the result: sticker 's1' on a error result"
        ]

    def test_pre_tool_text_also_sent_as_a_model_part_is_reported(self) -> None:
        """Text owned by a history entry must have left the accumulated model parts."""
        broken = replace_stream_once(
            tool_run(), accumulated_model_parts=({"type": "text", "text": "Let me look."},)
        )
        assert no_text_delivered_twice(broken, None) == [
            "step 2 (ToolSettled): text 'Let me look.' is both in history and in the model parts"
        ]

    def test_a_silent_stream_without_its_notice_is_reported(self) -> None:
        """The step of a stream the loop's inactivity timeout ended sends one notice."""
        trace = trace_of(drive([ended(StreamStatus.TIMEOUT)], silences=[True]))
        assert check(trace) == []
        broken = with_effect(trace, 1, lambda effects: effects[1:])
        assert silence_noticed(broken, None) == [
            "step 1 (StreamEnded): 0 inactivity notices where 1 belong (a silent stream)"
        ]

    def test_an_inactivity_notice_without_a_silent_stream_is_reported(self) -> None:
        """A `timeout` the provider reported (or a suppressed turn) sends no inactivity notice."""
        notice = SendNotice(
            key=NoticeKey.STREAM_INACTIVITY_TIMEOUT, level=Level.WARNING, iteration=1
        )
        trace = trace_of(drive([ended(StreamStatus.TIMEOUT)], silences=[False]))
        assert check(trace) == []
        broken = with_effect(trace, 1, lambda effects: (notice, *effects))
        assert silence_noticed(broken, None) == [
            "step 1 (StreamEnded): 1 inactivity notices where 0 belong (no silent stream)"
        ]
        suppressed = TurnSettings(suppress_user_errors=True)
        quiet = trace_of(drive([ended(StreamStatus.TIMEOUT)], silences=[True], turn=suppressed))
        assert check(quiet) == []
        broken = with_effect(quiet, 1, lambda effects: (notice, *effects))
        assert silence_noticed(broken, None) == [
            "step 1 (StreamEnded): 1 inactivity notices where 0 belong"
            " (a silent stream, user errors suppressed)"
        ]

    def test_the_result_defaults_to_the_traces_finish(self) -> None:
        """`check` reads the result from the trace's Finish effect when none is given."""
        trace = tool_run()
        result = result_of(trace)
        assert result is not None and result.status is TurnStatus.COMPLETED
        assert check(trace) == []


def test_a_trace_without_steps_has_no_result() -> None:
    """An empty trace finished with nothing and breaks nothing."""
    empty = Trace(config=tool_run().config, turn=TurnSettings())
    assert result_of(empty) is None
    assert check(empty) == []


class TestRegistrations:
    """The registration log: every register has exactly one later deregister."""

    def test_a_balanced_log_is_clean(self) -> None:
        """Register then deregister, for each handle, is clean."""
        log = [
            Registration(action="register", handle="kill:channel"),
            Registration(action="register", handle="progress:0"),
            Registration(action="deregister", handle="progress:0"),
            Registration(action="deregister", handle="kill:channel"),
        ]
        assert registrations_cleaned_up(log) == []

    def test_a_handle_left_registered_is_named(self) -> None:
        """A kill handle never deregistered is reported where it was registered."""
        log = [Registration(action="register", handle="kill:channel", where="iteration 2")]
        assert registrations_cleaned_up(log) == ["iteration 2: kill:channel was never deregistered"]

    def test_a_deregister_without_register_is_named(self) -> None:
        """Deregistering what was never registered is reported."""
        log = [Registration(action="deregister", handle="progress:1")]
        assert registrations_cleaned_up(log) == [
            "entry 0: progress:1 deregistered but not registered"
        ]

    def test_registering_a_live_handle_again_is_named(self) -> None:
        """A second register of a live handle is reported."""
        log = [
            Registration(action="register", handle="kill:channel"),
            Registration(action="register", handle="kill:channel"),
            Registration(action="deregister", handle="kill:channel"),
        ]
        assert registrations_cleaned_up(log) == [
            "entry 1: kill:channel registered again while live"
        ]
