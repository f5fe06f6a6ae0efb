"""Invariants of the pure core over generated attempts (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.builders import call, done, fail, ok, turn
from tests.engine.drive import Run, drive
from tests.engine.strategies import (
    TOOLS,
    configs,
    silences,
    stops,
    streams,
    tool_results,
    turns,
)
from toolloop.engine.commands import (
    DispatchTool,
    Finish,
    NoticeKey,
    RaiseError,
    SendNotice,
    StreamOnce,
)
from toolloop.engine.events import StreamEnded, ToolSettled
from toolloop.engine.policy import should_end_after_pre_tool_text
from toolloop.engine.result import memory_payload
from toolloop.engine.tool_call import is_blocked
from toolloop.states import ApiFamily, LoopConfig, ProviderDescriptor, StreamStatus, TurnStatus

attempts = st.builds(
    lambda s, t, p, u, c, q: drive(s, t, stops=p, turn=u, config=c, silences=q),
    streams,
    tool_results,
    stops,
    turns,
    configs,
    silences,
)


@given(run=attempts)
def test_every_attempt_terminates_within_the_ceiling_with_a_spec_status(run: Run) -> None:
    """Termination: at most MAX_FUNCTION_CALL_ITERATIONS provider calls, then one final effect."""
    config = run.final.config
    assert len(run.of_type(StreamOnce)) <= config.max_function_call_iterations
    final = run.effects[-1]
    assert isinstance(final, Finish | RaiseError)
    assert sum(isinstance(e, Finish | RaiseError) for e in run.effects) == 1
    if isinstance(final, Finish):
        assert final.result.status in set(TurnStatus) - {
            TurnStatus.SKIPPED,
            TurnStatus.FUNCTION_CALL,
        }


@given(run=attempts)
def test_still_working_is_sent_once_at_20_iff_surfacing_and_reached(run: Run) -> None:
    """Still working: sent once, at iteration 20, iff surfaced and iteration 20 streamed."""
    sent = [n for n in run.of_type(SendNotice) if n.key is NoticeKey.STILL_WORKING]
    reached = any(s.iteration == 20 for s in run.of_type(StreamOnce))
    expected = 1 if reached and run.final.turn.surface_user_errors else 0
    assert len(sent) == expected
    assert all(n.iteration == 20 for n in sent)


@given(run=attempts)
def test_a_silent_stream_is_noticed_once_by_its_step_unless_user_errors_are_suppressed(
    run: Run,
) -> None:
    """Inactivity notice: the step of a stream the loop's inactivity timeout ended sends one,
    first, naming the timeout, unless the turn suppresses user errors; no other step does
    (a `timeout` the provider reported included), and that step finishes `timeout`."""
    timeout_ms = run.final.config.stream_sdk_call_timeout_ms
    for event, effects in run.steps:
        sent = [
            e
            for e in effects
            if isinstance(e, SendNotice) and e.key is NoticeKey.STREAM_INACTIVITY_TIMEOUT
        ]
        silent = isinstance(event, StreamEnded) and event.went_silent
        if not silent or run.final.turn.suppress_user_errors:
            assert sent == []
            continue
        assert sent == [effects[0]]
        assert sent[0].details == {"seconds": str(timeout_ms // 1000)}
        assert isinstance(effects[-1], Finish)
        assert effects[-1].result.status is TurnStatus.TIMEOUT


@given(s=streams, t=tool_results, u=turns, c=configs)
@settings(max_examples=150)
def test_loop_ends_error_exactly_when_failures_reach_the_cap(s, t, u, c) -> None:
    """Error cap: the loop ends on the tool error loop iff consecutive failures hit the cap."""
    run = drive(s, t, turn=u, config=c)
    count, hit = 0, False
    for state in run.states:
        count = state.consecutive_tool_errors
        hit = hit or count >= c.max_consecutive_tool_errors
    ended_by_cap = run.final.consecutive_tool_errors >= c.max_consecutive_tool_errors
    assert hit is ended_by_cap
    if ended_by_cap:
        if u.user_impersonation:
            assert isinstance(run.effects[-1], RaiseError)
        else:
            assert run.result.status is TurnStatus.ERROR


@given(s=streams, t=tool_results, u=turns, c=configs)
def test_success_or_restart_always_resets_the_error_counts(s, t, u, c) -> None:
    """Every successful tool settle leaves both error counters at zero."""
    run = drive(s, t, turn=u, config=c)
    for (event, _), state in zip(run.steps, run.states[1:], strict=True):
        if isinstance(event, ToolSettled) and event.result.success and event.stop.value == "none":
            assert state.consecutive_tool_errors == 0
            assert state.nai_consecutive_tool_failures == 0


@given(
    family=st.sampled_from(list(ApiFamily)),
    tool=st.sampled_from(TOOLS),
    follow_up=st.booleans(),
    text=st.sampled_from(["", " \n", "Visible."]),
    success=st.booleans(),
)
def test_exit_and_novelai_policies_decide_every_combination(
    family, tool, follow_up, text, success
) -> None:
    """SPEC 7 and the NovelAI failure rule over provider, tool, follow-up, text and success."""
    provider = ProviderDescriptor(name=family.value, api_family=family)
    config = LoopConfig(nai_tool_failure_retry_threshold=2)
    run = drive(
        [call(tool, text=text), done("after")],
        [ok() if success else fail()],
        turn=turn(provider=provider),
        config=config,
        requires_follow_up=follow_up,
    )
    streamed = len(run.of_type(StreamOnce))
    novelai_failure = not success and family is ApiFamily.NOVELAI and text.strip() != ""
    if success:
        ends = should_end_after_pre_tool_text(provider, tool, follow_up, text)
        assert (streamed == 1) is ends
        if ends:
            assert run.result.status is TurnStatus.COMPLETED
    else:
        assert streamed == 2
        assert run.of_type(StreamOnce)[1].suppress_text_output is novelai_failure
    if family is ApiFamily.NOVELAI and text.strip():
        expected = 1 if tool == "update_short_term_memory" or not follow_up else 2
        assert streamed == (expected if success else 2)


@given(run=attempts)
def test_history_pairs_calls_with_responses_and_refusals_never_dispatch(run: Run) -> None:
    """History: each entry pairs a call with its response; restart, abort and kill add none;
    a truncated or blocked call is never dispatched."""
    for entry in run.final.function_history:
        assert entry.function_response["name"] == entry.function_call.name
        assert "result" in entry.function_response["response"]
    dispatched = 0
    for (event, effects), before, after in zip(
        run.steps, run.states[:-1], run.states[1:], strict=True
    ):
        added = len(after.function_history) - len(before.function_history)
        dispatches = [e for e in effects if isinstance(e, DispatchTool)]
        dispatched += len(dispatches)
        if isinstance(event, StreamEnded) and event.result.status is StreamStatus.FUNCTION_CALL:
            data = event.result.data
            refused = getattr(data, "arguments_truncated", False) or (
                data is not None and is_blocked(before.turn, data.name.strip())
            )
            if refused:
                assert dispatches == []
        if isinstance(event, ToolSettled):
            restarted = (
                event.result.success
                and isinstance(event.result.data, dict)
                and str(event.result.data.get("type", "")).startswith("context_restart_")
            )
            if event.stop.value == "stop" or restarted:
                assert added == 0
            else:
                assert added == 1
    assert dispatched == sum(isinstance(e, ToolSettled) for e in run.events)


@given(run=attempts)
def test_sticker_owner_and_persona_responses_follow_the_result(run: Run) -> None:
    """A sticker only on completed; an owner iff a thought log; responses empty iff text empty."""
    result = run.result
    if result is None:
        return
    if result.selected_sticker is not None:
        assert result.status is TurnStatus.COMPLETED
    assert (result.thought_log_owner is None) is (result.thought_log is None)
    built = memory_payload(run.final.final_text, run.final.details_text)
    assert (result.persona_responses == ()) is (built == "")
