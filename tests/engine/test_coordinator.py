"""The coordinator's rules, SPEC section 4, one behaviour per test."""

from __future__ import annotations

from tests.engine.builders import NOVELAI, call, done, ended, fail, ok, turn
from tests.engine.drive import drive
from toolloop.engine.commands import (
    ClearStopRequest,
    DispatchTool,
    Finish,
    IncrementFollowUpCount,
    MarkToolChainActive,
    NoticeKey,
    QueueStopResponse,
    RaiseError,
    ResetFollowUpCount,
    SendNotice,
    SetTextSuppression,
    StreamOnce,
)
from toolloop.engine.events import StopRequest, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import initial_state, step
from toolloop.states import LoopConfig, Sticker, StreamStatus, TurnStatus

STICKER = Sticker(id="s1", name="gong")
PICK = ok({"status": "sticker_selected_successfully", "sticker_id": "s1"})


def notices(run, key: NoticeKey) -> list[SendNotice]:
    return [e for e in run.of_type(SendNotice) if e.key is key]


class TestIterations:
    def test_still_working_notice_is_sent_at_iteration_20(self) -> None:
        """The still-working warning goes out once, with iteration 20, on a long chain."""
        run = drive([call()], [ok()], config=LoopConfig(max_function_call_iterations=30))
        sent = notices(run, NoticeKey.STILL_WORKING)
        assert [(n.iteration, n.level.value, n.hidden) for n in sent] == [(20, "warning", False)]

    def test_still_working_notice_needs_surfaced_user_errors(self) -> None:
        """A turn that does not surface user errors gets no still-working notice."""
        run = drive([call()], [ok()], turn=turn(surface_user_errors=False))
        assert notices(run, NoticeKey.STILL_WORKING) == []

    def test_still_working_notice_comes_before_the_twenty_first_stream(self) -> None:
        """The notice precedes the provider call of iteration 20."""
        run = drive([call()], [ok()], config=LoopConfig(max_function_call_iterations=25))
        index = next(i for i, e in enumerate(run.effects) if isinstance(e, SendNotice))
        assert isinstance(run.effects[index + 1], StreamOnce)
        assert run.effects[index + 1].iteration == 20

    def test_ceiling_finishes_timeout_with_max_iterations_notice(self) -> None:
        """Reaching the ceiling sends the max-iterations warning and finishes `timeout`."""
        run = drive([call()], [ok()], config=LoopConfig(max_function_call_iterations=3))
        assert run.result.status is TurnStatus.TIMEOUT
        assert [n.iteration for n in notices(run, NoticeKey.MAX_ITERATIONS)] == [3]
        assert len(run.of_type(StreamOnce)) == 3

    def test_ceiling_notice_needs_surfaced_user_errors(self) -> None:
        """Without surfaced user errors the ceiling finishes silently."""
        run = drive(
            [call()],
            [ok()],
            config=LoopConfig(max_function_call_iterations=2),
            turn=turn(surface_user_errors=False),
        )
        assert run.result.status is TurnStatus.TIMEOUT
        assert notices(run, NoticeKey.MAX_ITERATIONS) == []

    def test_ceiling_drops_the_sticker(self) -> None:
        """A sticker selected earlier never reaches a `timeout` result."""
        run = drive(
            [call("select_sticker_for_response")],
            [PICK],
            config=LoopConfig(max_function_call_iterations=2),
            turn=turn(guild_stickers=(STICKER,)),
        )
        assert run.result.status is TurnStatus.TIMEOUT
        assert run.result.selected_sticker is None

    def test_history_is_passed_to_every_later_provider_call(self) -> None:
        """Each stream sees every entry accepted before it."""
        run = drive([call(), call(), done()], [ok({"n": 1})])
        assert [len(s.function_history) for s in run.of_type(StreamOnce)] == [0, 1, 2]

    def test_thought_log_comes_from_the_last_stream_that_carried_one(self) -> None:
        """A later stream without a thought log keeps the earlier one."""
        run = drive([call(thought_log={"t": 1}), done(thought_log=None)], [ok()])
        assert run.result.thought_log == {"t": 1}


class TestStreamStatuses:
    def test_completed_resets_follow_ups_and_finishes_with_text(self) -> None:
        """`completed` resets the follow-up count and keeps its text."""
        run = drive([done("Three hits.")])
        assert run.of_type(ResetFollowUpCount) == [ResetFollowUpCount()]
        assert run.result.status is TurnStatus.COMPLETED
        assert run.result.persona_responses[0].text == "Three hits."

    def test_completed_carries_the_selected_sticker(self) -> None:
        """A sticker selected by an earlier tool reaches a `completed` result."""
        run = drive(
            [call("select_sticker_for_response"), done()],
            [PICK],
            turn=turn(guild_stickers=(STICKER,)),
        )
        assert run.result.selected_sticker == STICKER

    def test_blank_completed_text_keeps_earlier_final_text(self) -> None:
        """Blank text never overwrites the last non-blank text."""
        run = drive([call(text="Looking it up."), done("   ")], [ok()])
        assert run.result.persona_responses[0].text == "Looking it up."

    def test_error_and_timeout_reset_follow_ups_and_drop_sticker(self) -> None:
        """`error` and `timeout` reset follow-ups and finish with their status, no sticker."""
        for status in (StreamStatus.ERROR, StreamStatus.TIMEOUT):
            run = drive(
                [call("select_sticker_for_response"), ended(status)],
                [PICK],
                turn=turn(guild_stickers=(STICKER,)),
            )
            assert run.result.status.value == status.value
            assert run.of_type(ResetFollowUpCount) == [ResetFollowUpCount()]
            assert run.result.selected_sticker is None

    def test_empty_response_touches_no_follow_up_count(self) -> None:
        """`empty_response` finishes without touching the channel's counters."""
        run = drive([ended(StreamStatus.EMPTY_RESPONSE)])
        assert run.result.status is TurnStatus.EMPTY_RESPONSE
        assert run.of_type(ResetFollowUpCount) == []
        assert run.of_type(IncrementFollowUpCount) == []

    def test_stopped_by_user_queues_the_stop_response_when_a_stop_context_waits(self) -> None:
        """A queued stop context gets its response queued at the front."""
        run = drive([ended(StreamStatus.STOPPED_BY_USER)], turn=turn(stop_context_queued=True))
        assert run.of_type(QueueStopResponse) == [QueueStopResponse()]
        assert run.of_type(ClearStopRequest) == []

    def test_stopped_by_user_clears_the_stop_request_otherwise(self) -> None:
        """Without a stop context the stop request is cleared."""
        run = drive([ended(StreamStatus.STOPPED_BY_USER)])
        assert run.of_type(ClearStopRequest) == [ClearStopRequest()]
        assert run.of_type(ResetFollowUpCount) == [ResetFollowUpCount()]

    def test_stopped_by_user_keeps_the_delivered_text_and_details(self) -> None:
        """What was said before the stop reaches short-term memory with its details."""
        stopped = ended(StreamStatus.STOPPED_BY_USER, "partial")
        stopped = type(stopped)(
            status=stopped.status, accumulated_text="partial", details_content="rain"
        )
        run = drive([stopped])
        assert run.result.persona_responses[0].text == "partial\n\n[Scene Metadata]\nrain"

    def test_follow_up_interrupt_increments_the_follow_up_count(self) -> None:
        """A follow-up interruption counts one more follow-up."""
        run = drive([ended(StreamStatus.FOLLOW_UP_INTERRUPT)])
        assert run.of_type(IncrementFollowUpCount) == [IncrementFollowUpCount()]
        assert run.result.status is TurnStatus.FOLLOW_UP_INTERRUPT

    def test_function_call_marks_the_tool_chain_active(self) -> None:
        """Every function call marks the channel's chain active before dispatch."""
        run = drive([call(), done()], [ok()])
        first = run.effects.index(MarkToolChainActive())
        assert isinstance(run.effects[first + 1], DispatchTool)

    def test_details_merge_across_streams(self) -> None:
        """Scene metadata of every stream is joined with a blank line."""
        run = drive([call(details="a"), done("x", details="b")], [ok()])
        assert run.result.persona_responses[0].text == "x\n\n[Scene Metadata]\na\n\nb"


class TestHistoryBranch:
    def test_success_resets_the_error_count(self) -> None:
        """A success between failures restarts the consecutive count."""
        run = drive(
            [call()] * 9 + [done()],
            [fail(), fail(), fail(), fail(), ok()] + [fail()] * 4 + [ok()],
        )
        assert run.result.status is TurnStatus.COMPLETED

    def test_after_a_success_the_full_cap_of_new_failures_ends_in_error(self) -> None:
        """The count restarts from zero: the fifth failure after a success is the last."""
        run = drive([call()], [fail()] * 4 + [ok()] + [fail()] * 5)
        assert run.result.status is TurnStatus.ERROR
        assert len(run.of_type(DispatchTool)) == 10

    def test_consecutive_failures_reaching_the_cap_end_in_error(self) -> None:
        """The fifth failure in a row sends the tool-error-loop notice and finishes `error`."""
        run = drive([call()], [fail()])
        assert run.result.status is TurnStatus.ERROR
        assert len(run.of_type(DispatchTool)) == 5
        assert [n.level.value for n in notices(run, NoticeKey.TOOL_ERROR_LOOP)] == ["error"]

    def test_tool_error_loop_is_only_logged_without_surfaced_errors(self) -> None:
        """No notice when the turn does not surface user errors."""
        run = drive([call()], [fail()], turn=turn(surface_user_errors=False))
        assert run.result.status is TurnStatus.ERROR
        assert notices(run, NoticeKey.TOOL_ERROR_LOOP) == []

    def test_tool_error_loop_under_impersonation_raises(self) -> None:
        """Under user impersonation the loop raises instead of noticing."""
        run = drive([call()], [fail()], turn=turn(user_impersonation=True))
        assert isinstance(run.raised, RaiseError)
        assert run.raised.message == (
            "User impersonation aborted: the model failed 5 tool calls in a row."
        )
        assert notices(run, NoticeKey.TOOL_ERROR_LOOP) == []

    def test_end_turn_finishes_completed_with_the_stream_text(self) -> None:
        """`end_turn` ends at once with this stream's text and the sticker."""
        run = drive([call(text="Posted it.")], [ok(end_turn=True)])
        assert run.result.status is TurnStatus.COMPLETED
        assert run.result.persona_responses[0].text == "Posted it."

    def test_end_turn_is_honoured_on_a_failure_below_the_cap(self) -> None:
        """A failed result that asks to end the turn ends it `completed`."""
        run = drive([call()], [fail(end_turn=True)])
        assert run.result.status is TurnStatus.COMPLETED

    def test_end_turn_falls_back_to_final_text(self) -> None:
        """A blank stream ending the turn keeps the earlier text."""
        run = drive([call(text="First."), call()], [ok(), ok(end_turn=True)])
        assert run.result.persona_responses[0].text == "First."

    def test_error_cap_wins_over_end_turn(self) -> None:
        """The cap check comes before `end_turn`."""
        run = drive(
            [call()], [fail(end_turn=True)], config=LoopConfig(max_consecutive_tool_errors=1)
        )
        assert run.result.status is TurnStatus.ERROR

    def test_response_delivered_marks_the_result(self) -> None:
        """A tool that delivered the reply itself is reported in the result."""
        run = drive([call(), done()], [ok(response_delivered=True)])
        assert run.result.tool_response_delivered is True

    def test_response_delivered_needs_success(self) -> None:
        """A failed tool's delivery flag is ignored."""
        run = drive([call(), done()], [fail(response_delivered=True)])
        assert run.result.tool_response_delivered is None

    def test_a_refused_call_delivers_no_response(self) -> None:
        """A call that never ran (truncated arguments) did not deliver the reply."""
        run = drive([call(truncated=True), done()])
        assert run.result.tool_response_delivered is None

    def test_accumulated_parts_are_empty_after_a_history_entry(self) -> None:
        """The history entry takes ownership of the pre-tool text."""
        run = drive([call(text="Let me look."), done()], [ok()])
        assert run.of_type(StreamOnce)[1].accumulated_model_parts == ()
        entry = run.final.function_history[0]
        assert entry.pre_tool_call_text_parts == ({"type": "text", "text": "Let me look."},)


class TestNovelAI:
    def test_failure_after_visible_text_retries_with_text_suppressed(self) -> None:
        """NovelAI failing after visible text suppresses text on the retry."""
        run = drive([call(text="Sure."), done()], [fail()], turn=turn(provider=NOVELAI))
        assert run.of_type(SetTextSuppression) == [SetTextSuppression(suppressed=True)]
        assert run.of_type(StreamOnce)[1].suppress_text_output is True

    def test_failures_reaching_the_threshold_end_completed_with_notice(self) -> None:
        """The third NovelAI failure sends the retry-exhausted error and finishes `completed`."""
        run = drive([call(text="Sure.")], [fail()], turn=turn(provider=NOVELAI))
        assert run.result.status is TurnStatus.COMPLETED
        assert len(notices(run, NoticeKey.NAI_TOOL_RETRY_EXHAUSTED)) == 1
        assert run.result.persona_responses[0].text == "Sure."

    def test_retry_exhausted_notice_ignores_the_error_flags(self) -> None:
        """The retry-exhausted notice is sent even when the turn hides user errors."""
        run = drive(
            [call(text="Sure.")],
            [fail()],
            turn=turn(provider=NOVELAI, surface_user_errors=False, suppress_user_errors=True),
        )
        assert len(notices(run, NoticeKey.NAI_TOOL_RETRY_EXHAUSTED)) == 1

    def test_success_with_text_clears_suppression(self) -> None:
        """A later success with visible text on NovelAI clears suppression before going on."""
        run = drive(
            [call(text="Sure."), call("web_search", text="Found it."), done()],
            [fail(), ok()],
            turn=turn(provider=NOVELAI),
            requires_follow_up=True,
        )
        assert run.of_type(SetTextSuppression) == [
            SetTextSuppression(suppressed=True),
            SetTextSuppression(suppressed=False),
        ]

    def test_failure_without_visible_text_does_not_count(self) -> None:
        """A NovelAI failure after blank text is an ordinary failure."""
        run = drive([call(text=" "), done()], [fail()], turn=turn(provider=NOVELAI))
        assert run.final.nai_consecutive_tool_failures == 0
        assert run.of_type(SetTextSuppression) == []

    def test_non_novelai_failure_after_text_never_suppresses(self) -> None:
        """The NovelAI policy keys on the API family only."""
        run = drive([call(text="Sure."), done()], [fail()])
        assert run.of_type(SetTextSuppression) == []

    def test_giving_up_after_suppressed_retries_keeps_the_delivered_text(self) -> None:
        """Retries with other, suppressed texts never become the turn's text (SPEC 4, amended)."""
        streams = [call(text="Sure."), call(text="Retrying."), call(text="Once more.")]
        run = drive(streams, [fail()], turn=turn(provider=NOVELAI))
        assert run.result.status is TurnStatus.COMPLETED
        assert run.final.final_text == "Sure."
        assert run.result.persona_responses[0].text == "Sure."

    def test_a_suppressed_reply_that_completes_is_not_the_turns_text(self) -> None:
        """A completed stream streamed under suppression leaves the delivered text as the result."""
        run = drive(
            [call(text="Sure."), done("Unseen answer.")], [fail()], turn=turn(provider=NOVELAI)
        )
        assert run.result.status is TurnStatus.COMPLETED
        assert run.result.persona_responses[0].text == "Sure."

    def test_the_exit_policy_after_a_suppressed_stream_finishes_with_delivered_text(self) -> None:
        """Ending "with this stream's text" on a suppressed stream takes the text already shown."""
        run = drive(
            [call(text="Sure."), call("roll_dice", text="Unseen.")],
            [fail(), ok()],
            turn=turn(provider=NOVELAI),
        )
        assert run.moves[-1] == "exit_policy_ended"
        assert run.result.persona_responses[0].text == "Sure."

    def test_suppressed_text_still_counts_as_pre_tool_text(self) -> None:
        """Text streamed under suppression still drives the failure count."""
        run = drive([call(text="Sure.")], [fail()], turn=turn(provider=NOVELAI))
        assert len(run.of_type(StreamOnce)) == 3


class TestStops:
    def test_stop_before_the_tool_aborts_without_dispatch(self) -> None:
        """A genuine stop pending at the call aborts `stopped_by_user` before any tool runs."""
        run = drive([call()], stops=[StopRequest.STOP])
        assert run.result.status is TurnStatus.STOPPED_BY_USER
        assert run.of_type(DispatchTool) == []

    def test_stop_abort_queues_nothing_and_clears_nothing(self) -> None:
        """The stop belongs to the channel's queue, which answers it."""
        run = drive([call()], stops=[StopRequest.STOP])
        assert run.of_type(QueueStopResponse) == []
        assert run.of_type(ClearStopRequest) == []
        assert run.of_type(ResetFollowUpCount) == []

    def test_follow_up_before_the_tool_is_cleared_and_the_chain_goes_on(self) -> None:
        """A queued follow-up never turns a tool chain into a stop."""
        run = drive([call(), done()], [ok()], stops=[StopRequest.FOLLOW_UP, StopRequest.NONE])
        assert run.of_type(ClearStopRequest) == [ClearStopRequest()]
        assert len(run.of_type(DispatchTool)) == 1
        assert run.result.status is TurnStatus.COMPLETED

    def test_stop_during_the_tool_adds_no_history(self) -> None:
        """A stop while the tool ran aborts and the model never sees the result."""
        run = drive([call()], [fail("was killed")], stops=[StopRequest.NONE, StopRequest.STOP])
        assert run.result.status is TurnStatus.STOPPED_BY_USER
        assert run.final.function_history == ()
        assert notices(run, NoticeKey.TOOL_CALL_FAILED) == []

    def test_result_is_finish_as_last_effect(self) -> None:
        """Every run ends with exactly one final effect."""
        run = drive([done()])
        assert isinstance(run.effects[-1], Finish)
        assert sum(isinstance(e, Finish) for e in run.effects) == 1


def test_novelai_success_restarts_the_failure_count_from_zero() -> None:
    """After a success, it again takes the full threshold of failures to give up."""
    run = drive(
        [call(text="Sure.")] * 5 + [done("ok")],
        [fail(), ok(), fail(), fail(), ok()],
        turn=turn(provider=NOVELAI),
        requires_follow_up=True,
    )
    assert notices(run, NoticeKey.NAI_TOOL_RETRY_EXHAUSTED) == []
    assert run.result.persona_responses[0].text == "ok"


class TestCapsPastSmallIntegers:
    """Limits are compared by value: caps above 256 (not cached ints) still end the loop."""

    def test_iteration_ceiling_of_300(self) -> None:
        """The 300th iteration is the last one streamed."""
        run = drive([call()], [ok()], config=LoopConfig(max_function_call_iterations=300))
        assert run.result.status is TurnStatus.TIMEOUT
        assert len(run.of_type(StreamOnce)) == 300

    def test_error_cap_of_300(self) -> None:
        """The 300th failure in a row ends the turn `error`."""
        config = LoopConfig(max_function_call_iterations=400, max_consecutive_tool_errors=300)
        run = drive([call()], [fail()], config=config)
        assert run.result.status is TurnStatus.ERROR
        assert len(run.of_type(DispatchTool)) == 300

    def test_novelai_retry_threshold_of_300(self) -> None:
        """The 300th NovelAI failure after visible text ends the retries."""
        config = LoopConfig(
            max_function_call_iterations=400,
            max_consecutive_tool_errors=400,
            nai_tool_failure_retry_threshold=300,
        )
        run = drive([call(text="Sure.")], [fail()], turn=turn(provider=NOVELAI), config=config)
        assert len(notices(run, NoticeKey.NAI_TOOL_RETRY_EXHAUSTED)) == 1
        assert len(run.of_type(DispatchTool)) == 300


def test_after_a_novelai_success_the_full_threshold_of_new_failures_ends_the_retries() -> None:
    """The NovelAI count restarts from zero: the third failure after a success is the last."""
    run = drive(
        [call(text="Sure.")],
        [fail(), ok()] + [fail()] * 3,
        turn=turn(provider=NOVELAI),
        requires_follow_up=True,
    )
    assert len(notices(run, NoticeKey.NAI_TOOL_RETRY_EXHAUSTED)) == 1
    assert len(run.of_type(DispatchTool)) == 5


def test_a_settled_tool_requires_no_follow_up_unless_it_says_so() -> None:
    """`ToolSettled.requires_follow_up` defaults to False: a memory update after text ends."""
    out = step(initial_state(LoopConfig(), turn()), TurnStarted())
    out = step(out.state, StreamEnded(result=call("update_short_term_memory", text="Noted.")))
    out = step(out.state, ToolSettled(result=ok()))
    assert out.move == "exit_policy_ended"
