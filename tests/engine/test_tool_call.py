"""Stage 02, executing a tool call (SPEC section 6), one behaviour per test."""

from __future__ import annotations

import json

from tests.engine.builders import call, done, fail, ok, turn
from tests.engine.drive import drive
from toolloop.engine.commands import (
    CountToolUsage,
    DispatchTool,
    Level,
    Log,
    NoticeKey,
    RetainAffordance,
    SendNotice,
)
from toolloop.engine.tool_call import GENERIC_FAILURE, TRUNCATED_REASON
from toolloop.states import (
    ContextItem,
    DeliberateMode,
    LoopConfig,
    Sticker,
    StreamResult,
    StreamStatus,
    Trigger,
    TurnStatus,
)

PICK = "select_sticker_for_response"
STICKERS = (Sticker(id="s1", name="gong"), Sticker(id="s2", name="bell", sendable=False))
DELIBERATE = DeliberateMode(active=True, allowed=("web_search",))


def picked(sticker_id: str, status: str = "sticker_selected_successfully"):
    return ok({"status": status, "sticker_id": sticker_id})


class TestValidation:
    def test_blank_name_aborts_error_without_dispatch(self) -> None:
        """A name that is blank after trimming is a malformed call: abort `error`."""
        run = drive([call("   ")])
        assert run.result.status is TurnStatus.ERROR
        assert run.of_type(DispatchTool) == []
        assert [e.level for e in run.of_type(Log)] == [Level.ERROR]

    def test_missing_call_data_aborts_error(self) -> None:
        """A function_call result without its call is malformed."""
        run = drive([StreamResult(status=StreamStatus.FUNCTION_CALL)])
        assert run.result.status is TurnStatus.ERROR

    def test_name_is_trimmed_before_dispatch_and_history(self) -> None:
        """The trimmed name is the name from here on, whichever side the blanks are on."""
        trailing = drive([call("web_search \n"), done()], [ok()])
        assert trailing.of_type(DispatchTool)[0].call.name == "web_search"
        run = drive([call("  web_search \n"), done()], [ok()])
        assert run.of_type(DispatchTool)[0].call.name == "web_search"
        assert run.final.function_history[0].function_call.name == "web_search"
        assert run.final.function_history[0].function_response["name"] == "web_search"


class TestToolContext:
    def test_progress_notices_follow_the_surfacing_flag(self) -> None:
        """Tools stay quiet when the turn does not surface user errors."""
        run = drive([call(), done()], [ok()], turn=turn(surface_user_errors=False))
        assert run.of_type(DispatchTool)[0].context.suppress_progress_notices is True

    def test_kill_hint_shows_from_iteration_20(self) -> None:
        """Long chains tell tools to mention the kill command."""
        run = drive([call()], [ok()], config=LoopConfig(max_function_call_iterations=22))
        hints = [d.context.show_kill_hint for d in run.of_type(DispatchTool)]
        assert hints == [False] * 20 + [True] * 2

    def test_the_context_items_are_the_live_context(self) -> None:
        """The tool sees the context as restarts changed it, not the base context only."""
        base = (ContextItem(author="alice", content="Watch this?"),)
        restarted = ok({"type": "context_restart_youtube", "enhanced_context_item": {"t": "x"}})
        run = drive([call(), call(), done()], [restarted, ok()], turn=turn(context=base))
        first, second = (d.context.context_items for d in run.of_type(DispatchTool))
        assert first == base
        assert second == (*base, ContextItem(kind="enrichment", content={"t": "x"}))

    def test_tool_context_names_the_turn(self) -> None:
        """The context carries channel, locale, provider and persona."""
        run = drive([call(), done()], [ok()], turn=turn(locale="ja", channel_id="c9"))
        context = run.of_type(DispatchTool)[0].context
        assert (
            context.channel_id,
            context.locale,
            context.provider_name,
            context.persona_name,
        ) == (
            "c9",
            "ja",
            "custom",
            "Tomo",
        )


class TestTruncatedArguments:
    def test_truncated_call_is_never_dispatched(self) -> None:
        """A call the provider cut short does not run."""
        run = drive([call(args={"q": "x"}, truncated=True), done()])
        assert run.of_type(DispatchTool) == []

    def test_truncated_call_enters_history_without_its_arguments(self) -> None:
        """The model must not see arguments it never finished."""
        run = drive([call(args={"q": "x"}, truncated=True), done()])
        entry = run.final.function_history[0]
        assert entry.function_call.args is None
        assert entry.response == {
            "status": "tool_execution_failed",
            "tool_name": "web_search",
            "reason": TRUNCATED_REASON,
        }

    def test_truncated_reason_asks_for_the_complete_call(self) -> None:
        """The reason says the provider truncated it, nothing ran, and to reissue it whole."""
        assert "truncated" in TRUNCATED_REASON
        assert "nothing was executed or updated" in TRUNCATED_REASON
        assert "in one message" in TRUNCATED_REASON

    def test_truncated_call_logs_an_error_and_the_hidden_notice(self) -> None:
        """The refusal is logged at error level and noticed in the thought log."""
        run = drive([call(truncated=True), done()])
        assert any(e.level is Level.ERROR and "web_search" in e.message for e in run.of_type(Log))
        notice = run.of_type(SendNotice)[0]
        assert (notice.key, notice.hidden) == (NoticeKey.TOOL_CALL_FAILED, True)

    def test_truncated_check_comes_before_the_allowlist(self) -> None:
        """A truncated call to a blocked tool is refused as truncated."""
        run = drive([call("other", truncated=True), done()], turn=turn(deliberate_mode=DELIBERATE))
        assert run.final.function_history[0].response["status"] == "tool_execution_failed"

    def test_truncated_sticker_call_keeps_the_selection(self) -> None:
        """A refused sticker call leaves the earlier selection as it was."""
        run = drive(
            [call(PICK), call(PICK, truncated=True), done()],
            [picked("s1")],
            turn=turn(guild_stickers=STICKERS),
        )
        assert run.result.selected_sticker == STICKERS[0]

    def test_truncated_call_counts_toward_the_error_cap(self) -> None:
        """Each refusal is a failure."""
        run = drive([call(truncated=True)])
        assert run.result.status is TurnStatus.ERROR


class TestDeliberateAllowlist:
    def test_tool_outside_the_allowlist_is_not_dispatched(self) -> None:
        """Deliberate mode refuses a tool it did not expose."""
        run = drive([call("other"), done()], turn=turn(deliberate_mode=DELIBERATE))
        assert run.of_type(DispatchTool) == []

    def test_blocked_response_lets_the_model_adapt(self) -> None:
        """The model reads which tools were allowed and why it was refused."""
        run = drive([call("other"), done()], turn=turn(deliberate_mode=DELIBERATE))
        response = run.final.function_history[0].response
        assert response["status"] == "blocked_by_deliberate_tool_mode"
        assert response["tool_name"] == "other"
        assert response["allowed_tool_names"] == ["web_search"]
        assert "not exposed this turn" in response["reason"]

    def test_blocked_call_is_a_warning_and_counts_toward_the_cap(self) -> None:
        """Blocks are logged as warnings and five in a row end the loop `error`."""
        run = drive([call("other")], turn=turn(deliberate_mode=DELIBERATE))
        assert run.result.status is TurnStatus.ERROR
        assert Level.WARNING in [e.level for e in run.of_type(Log)]

    def test_allowed_tool_is_dispatched(self) -> None:
        """A tool on the list runs."""
        run = drive([call("web_search"), done()], [ok()], turn=turn(deliberate_mode=DELIBERATE))
        assert len(run.of_type(DispatchTool)) == 1

    def test_empty_allowlist_blocks_nothing(self) -> None:
        """An active mode without a list lets every tool run."""
        mode = DeliberateMode(active=True)
        run = drive([call("other"), done()], [ok()], turn=turn(deliberate_mode=mode))
        assert len(run.of_type(DispatchTool)) == 1

    def test_inactive_mode_blocks_nothing(self) -> None:
        """The allowlist applies only while deliberate mode is active."""
        mode = DeliberateMode(active=False, allowed=("web_search",))
        run = drive([call("other"), done()], [ok()], turn=turn(deliberate_mode=mode))
        assert len(run.of_type(DispatchTool)) == 1

    def test_trigger_does_not_add_to_the_allowlist(self) -> None:
        """A trigger entry for a tool outside the list does not admit it."""
        mode = attrs_mode(triggers={"other": Trigger(trigger="t", source="s")})
        run = drive([call("other"), done()], turn=turn(deliberate_mode=mode))
        assert run.of_type(DispatchTool) == []


def attrs_mode(**changes: object) -> DeliberateMode:
    import attrs

    return attrs.evolve(DELIBERATE, **changes)


class TestAfterDispatch:
    def test_duration_is_logged(self) -> None:
        """Every dispatched call logs `Function call completed: NAME (N ms)`."""
        run = drive([call(), done()], [ok()])
        assert "Function call completed: web_search (0 ms)" in [e.message for e in run.of_type(Log)]

    def test_success_outside_direct_messages_counts_as_usage(self) -> None:
        """Successful calls are counted as tool usage."""
        run = drive([call(), done()], [ok()])
        assert run.of_type(CountToolUsage) == [CountToolUsage(name="web_search")]

    def test_direct_messages_and_failures_are_not_counted(self) -> None:
        """Neither a DM nor a failure counts as usage."""
        assert (
            drive([call(), done()], [ok()], turn=turn(direct_message=True)).of_type(CountToolUsage)
            == []
        )
        assert drive([call(), done()], [fail()]).of_type(CountToolUsage) == []

    def test_failure_emits_the_hidden_failed_tool_notice(self) -> None:
        """The notice carries the reason, the arguments and the data."""
        run = drive([call(args={"q": "x"}), done()], [fail("upstream 503", data={"code": 503})])
        notice = run.of_type(SendNotice)[0]
        assert notice.hidden and notice.level is Level.ERROR
        assert notice.details == {
            "tool_name": "web_search",
            "reason": "upstream 503",
            "args": {"q": "x"},
            "data": {"code": 503},
        }

    def test_success_in_deliberate_mode_retains_the_affordance(self) -> None:
        """The tool stays exposed for the next turns."""
        run = drive([call(), done()], [ok()], turn=turn(deliberate_mode=DELIBERATE))
        assert run.of_type(RetainAffordance) == [RetainAffordance(name="web_search")]

    def test_failure_retains_no_affordance(self) -> None:
        """Only a success keeps the tool exposed."""
        run = drive([call(), done()], [fail()], turn=turn(deliberate_mode=DELIBERATE))
        assert run.of_type(RetainAffordance) == []

    def test_trigger_notice_names_tool_trigger_and_source_on_success_or_failure(self) -> None:
        """A trigger-admitted tool is noticed, hidden, whatever its outcome."""
        mode = attrs_mode(triggers={"web_search": Trigger(trigger="search for", source="message")})
        for result in (ok(), fail()):
            run = drive([call(), done()], [result], turn=turn(deliberate_mode=mode))
            trigger = [n for n in run.of_type(SendNotice) if n.key is NoticeKey.DELIBERATE_TRIGGER]
            assert [(n.hidden, n.level, n.details) for n in trigger] == [
                (
                    True,
                    Level.INFO,
                    {"tool_name": "web_search", "trigger": "search for", "source": "message"},
                )
            ]

    def test_blocked_call_gets_no_trigger_notice(self) -> None:
        """A refused call was not admitted by its trigger."""
        mode = attrs_mode(allowed=("x",), triggers={"web_search": Trigger(trigger="t", source="s")})
        run = drive([call(), done()], turn=turn(deliberate_mode=mode))
        assert [n for n in run.of_type(SendNotice) if n.key is NoticeKey.DELIBERATE_TRIGGER] == []


class TestShortTermMemoryGuard:
    def test_second_memory_update_is_marked_unavailable_for_the_turn(self) -> None:
        """After one successful update the registry is told to refuse another."""
        stm = "update_short_term_memory"
        run = drive([call(stm), call(stm), done()], [ok()])
        contexts = [d.context.unavailable_for_turn for d in run.of_type(DispatchTool)]
        assert contexts == [frozenset(), frozenset({stm})]

    def test_failed_memory_update_does_not_arm_the_guard(self) -> None:
        """Only a success forbids the second update."""
        stm = "update_short_term_memory"
        run = drive([call(stm), call(stm), done()], [fail(), ok()])
        assert run.of_type(DispatchTool)[1].context.unavailable_for_turn == frozenset()

    def test_other_tools_do_not_arm_the_guard(self) -> None:
        """A success of any other tool leaves the memory tool available."""
        run = drive([call("web_search"), call("web_search"), done()], [ok()])
        assert run.of_type(DispatchTool)[1].context.unavailable_for_turn == frozenset()

    def test_a_memory_update_named_with_spaces_arms_the_guard(self) -> None:
        """The trimmed name is compared by value: ' update_short_term_memory ' counts."""
        stm = "update_short_term_memory"
        run = drive([call(f" {stm} "), call(stm), done()], [ok()])
        assert run.of_type(DispatchTool)[1].context.unavailable_for_turn == frozenset({stm})


class TestSticker:
    def test_sticker_id_read_from_json_is_selected(self) -> None:
        """Ids are compared by value: an id decoded from the tool's JSON result still matches."""
        result = ok(json.loads('{"status": "sticker_selected_successfully", "sticker_id": "s1"}'))
        run = drive([call(PICK), done()], [result], turn=turn(guild_stickers=STICKERS))
        assert run.result.selected_sticker == STICKERS[0]

    def test_sticker_tool_named_with_spaces_selects(self) -> None:
        """The trimmed name is compared by value: ' select_sticker_for_response ' is the tool."""
        run = drive([call(f" {PICK} "), done()], [picked("s1")], turn=turn(guild_stickers=STICKERS))
        assert run.result.selected_sticker == STICKERS[0]

    def test_sendable_guild_sticker_is_selected(self) -> None:
        """A success naming a sendable guild sticker is the selection."""
        run = drive([call(PICK), done()], [picked("s1")], turn=turn(guild_stickers=STICKERS))
        assert run.result.selected_sticker == STICKERS[0]

    def test_unsendable_unknown_or_other_status_is_a_miss(self) -> None:
        """Any other sticker result is `none`."""
        misses = (picked("s2"), picked("nope"), picked("s1", "no_match"), picked("s1", "unsent"))
        for result in (*misses, fail()):
            run = drive([call(PICK), done()], [result], turn=turn(guild_stickers=STICKERS))
            assert run.result.selected_sticker is None

    def test_later_miss_clears_an_earlier_selection(self) -> None:
        """The latest sticker result wins, a miss included."""
        run = drive(
            [call(PICK), call(PICK), done()],
            [picked("s1"), picked("nope")],
            turn=turn(guild_stickers=STICKERS),
        )
        assert run.result.selected_sticker is None

    def test_other_tools_leave_the_selection(self) -> None:
        """Only the sticker tool changes the selection."""
        for other in ("web_search", "roll_dice"):
            run = drive(
                [call(PICK), call(other), done()],
                [picked("s1"), ok()],
                turn=turn(guild_stickers=STICKERS),
            )
            assert run.result.selected_sticker == STICKERS[0]


class TestResponse:
    def test_success_response_is_the_data(self) -> None:
        """The model reads the tool's data."""
        run = drive([call(), done()], [ok({"hits": 3})])
        assert run.final.function_history[0].function_response == {
            "name": "web_search",
            "response": {"result": {"hits": 3}},
        }

    def test_empty_object_is_data(self) -> None:
        """`{}` is returned as it is."""
        assert drive([call(), done()], [ok({})]).final.function_history[0].response == {}

    def test_success_without_data_is_completed(self) -> None:
        """No data reads as `{status: completed}`."""
        assert drive([call(), done()], [ok()]).final.function_history[0].response == {
            "status": "completed"
        }

    def test_failure_reason_prefers_message_then_error_then_generic(self) -> None:
        """The reason is the message, else the error, else a generic text."""
        from toolloop.states import ToolResult

        cases = [
            (ToolResult(success=False, message="m", error="e"), "m"),
            (ToolResult(success=False, error="e"), "e"),
            (ToolResult(success=False), GENERIC_FAILURE),
        ]
        for result, reason in cases:
            response = drive([call(), done()], [result]).final.function_history[0].response
            assert response == {
                "status": "tool_execution_failed",
                "reason": reason,
                "tool_name": "web_search",
            }

    def test_blank_pre_tool_text_leaves_no_parts(self) -> None:
        """Parts are absent when the stream said nothing visible."""
        run = drive([call(text="  \n"), done()], [ok()])
        assert run.final.function_history[0].pre_tool_call_text_parts is None

    def test_pre_tool_text_is_kept_as_streamed(self) -> None:
        """The text is not trimmed."""
        run = drive([call(text=" Let me look.\n"), done()], [ok()])
        assert run.final.function_history[0].pre_tool_call_text_parts == (
            {"type": "text", "text": " Let me look.\n"},
        )

    def test_image_metadata_is_kept_on_the_entry(self) -> None:
        """A tool's image metadata travels with its entry."""
        run = drive([call(), done()], [ok({"x": 1}, image_metadata={"url": "u"})])
        assert run.final.function_history[0].image_metadata == {"url": "u"}


def test_only_the_memory_tool_arms_the_memory_guard() -> None:
    """Another tool's success (whatever its name sorts like) leaves the memory tool available."""
    stm = "update_short_term_memory"
    run = drive([call("roll_dice"), call(stm), done()], [ok()])
    assert run.of_type(DispatchTool)[1].context.unavailable_for_turn == frozenset()
