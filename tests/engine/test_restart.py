"""Stage 03, the enhanced-context restart (SPEC section 6a)."""

from __future__ import annotations

from tests.engine.builders import call, done, fail, ok, said
from tests.engine.drive import drive
from toolloop.engine.commands import Level, Log, StreamOnce, TakeStashedContext
from toolloop.engine.restart import METADATA_DIRECTIVE
from toolloop.states import ContextItem, TurnStatus

ITEM = {"text": "video transcript"}


def restart(kind: str = "context_restart_youtube", **data: object):
    return ok({"type": kind, **data})


class TestRestart:
    def test_restart_adds_no_history_and_streams_again(self) -> None:
        """A restart is not a history entry; the next iteration follows."""
        run = drive([call(), done()], [restart(enhanced_context_item=ITEM)])
        assert run.final.function_history == ()
        assert [s.iteration for s in run.of_type(StreamOnce)] == [0, 1]

    def test_restart_resets_both_error_counters(self) -> None:
        """Failures before a restart do not count after it."""
        run = drive([call()] * 9 + [done()], [fail()] * 4 + [restart()] + [fail()] * 4 + [ok()])
        assert run.result.status is TurnStatus.COMPLETED

    def test_inline_item_is_appended_to_the_context(self) -> None:
        """`enhanced_context_item` joins the end of the context."""
        run = drive([call(), done()], [restart(enhanced_context_item=ITEM)])
        assert run.of_type(StreamOnce)[1].context[-1] == ContextItem(
            kind="enrichment", content=ITEM
        )

    def test_stashed_item_is_taken_by_its_key(self) -> None:
        """`pending_context_key` wins and is taken out of the stash once."""
        stashed = ContextItem(kind="enrichment", content={"text": "stashed"})
        run = drive(
            [call(), done()],
            [restart(pending_context_key="k1", enhanced_context_item=ITEM)],
            stash={"k1": stashed},
        )
        assert run.of_type(TakeStashedContext) == [TakeStashedContext(key="k1")]
        assert run.of_type(StreamOnce)[1].context[-1] == stashed

    def test_a_stashed_restart_applies_its_type(self) -> None:
        """The restart type is kept while the stash is read: its flag is disabled after."""
        run = drive([call(), done()], [restart(pending_context_key="k1")])
        assert run.of_type(StreamOnce)[1].disabled == frozenset({"youtube"})

    def test_missing_stash_key_warns_and_continues(self) -> None:
        """An expired key logs a warning; the turn goes on without the item."""
        run = drive([call(), done()], [restart(pending_context_key="gone")])
        assert any(e.level is Level.WARNING for e in run.of_type(Log))
        assert run.of_type(StreamOnce)[1].context == ()
        assert run.result.status is TurnStatus.COMPLETED

    def test_disable_flags_follow_the_type(self) -> None:
        """Each restart type stops its resource from being fetched again."""
        for kind, flag in [
            ("context_restart_youtube", "youtube"),
            ("context_restart_image", "image"),
            ("context_restart_gif", "gif"),
            ("context_restart_message_metadata", "message_metadata"),
        ]:
            run = drive([call(), done()], [restart(kind)])
            assert run.of_type(StreamOnce)[1].disabled == frozenset({flag})

    def test_message_metadata_annotates_messages_and_adds_the_tail_directive(self) -> None:
        """Messages get a reference line per original; the tail says not to reveal again."""
        from toolloop.states import TurnSettings

        context = (
            ContextItem(
                author="ann",
                timestamp="10:00",
                message_ids=("m1", "m2"),
                content="hi",
                reply_to="m0",
            ),
            ContextItem(kind="enrichment", content="x"),
        )
        run = drive(
            [call(), call(), done()],
            [restart("context_restart_message_metadata")],
            turn=TurnSettings(context=context),
        )
        after = run.of_type(StreamOnce)[1]
        assert after.context[0].metadata == {
            "references": ["[ann at 10:00] message m1", "[ann at 10:00] message m2"],
            "reply_to": "m0",
        }
        assert after.context[1].metadata is None
        assert after.tail_directives == (METADATA_DIRECTIVE,)
        assert run.of_type(StreamOnce)[2].tail_directives == (METADATA_DIRECTIVE,)

    def test_failed_tool_with_restart_data_is_no_restart(self) -> None:
        """Only a success can restart."""
        run = drive([call(), done()], [fail(data={"type": "context_restart_youtube"})])
        assert len(run.final.function_history) == 1

    def test_restart_type_needs_the_prefix(self) -> None:
        """Other types are ordinary data."""
        run = drive([call(), done()], [ok({"type": "youtube"})])
        assert len(run.final.function_history) == 1


class TestRestartEdges:
    def test_a_second_restart_keeps_the_flag_disabled(self) -> None:
        """Disabling is sticky: the same restart twice leaves the resource disabled."""
        run = drive([call(), call(), done()], [restart(), restart()])
        assert run.of_type(StreamOnce)[2].disabled == frozenset({"youtube"})

    def test_only_messages_are_annotated(self) -> None:
        """Items of any other kind keep no metadata, whatever their name sorts like."""
        from toolloop.states import TurnSettings

        context = (ContextItem(kind="verbatim_nudge", content="x"), ContextItem(kind="system"))
        run = drive(
            [call(), done()],
            [restart("context_restart_message_metadata")],
            turn=TurnSettings(context=context),
        )
        assert [item.metadata for item in run.of_type(StreamOnce)[1].context] == [None, None]

    def test_a_message_kind_read_from_json_is_annotated(self) -> None:
        """The kind is compared by value: a `message` decoded from the host's JSON counts."""
        import json

        from toolloop.states import TurnSettings

        kind = json.loads('"message"')
        context = (ContextItem(kind=kind, author="ann", message_ids=("m1",), content="hi"),)
        run = drive(
            [call(), done()],
            [restart("context_restart_message_metadata")],
            turn=TurnSettings(context=context),
        )
        assert run.of_type(StreamOnce)[1].context[0].metadata is not None

    def test_a_key_that_is_not_a_string_is_no_stash_key(self) -> None:
        """Only a non-empty string names a stashed item; anything else is ignored."""
        for key in (5, "", None):
            run = drive([call(), done()], [restart(pending_context_key=key)])
            assert run.of_type(TakeStashedContext) == []


class TestRestartCounters:
    def test_after_a_restart_the_full_cap_of_failures_ends_in_error(self) -> None:
        """A restart sets the error count to zero, not below: five failures after it end it."""
        run = drive([call()] * 10 + [done()], [fail()] * 4 + [restart()] + [fail()] * 5 + [ok()])
        assert run.result.status is TurnStatus.ERROR
        assert len(run.of_type(StreamOnce)) == 10

    def test_after_a_restart_novelai_failures_count_from_zero(self) -> None:
        """A restart sets the NovelAI count to zero: the threshold applies in full again."""
        from tests.engine.builders import NOVELAI, turn

        run = drive(
            [call(text="Sure.")] * 5 + [done("ok")],
            [fail(), fail(), restart(), fail(), fail(), ok()],
            turn=turn(provider=NOVELAI),
        )
        assert run.moves[-1] == "completed"  # the model's reply, not the retries running out

    def test_after_a_restart_novelai_needs_every_failure_of_the_threshold(self) -> None:
        """Three NovelAI failures after a restart do exhaust the retries (the count starts at 0)."""
        from tests.engine.builders import NOVELAI, turn

        run = drive(
            [call(text="Sure.")] * 4,
            [restart(), fail(), fail(), fail()],
            turn=turn(provider=NOVELAI),
        )
        assert len(run.of_type(StreamOnce)) == 4


class TestModelParts:
    def test_a_restarted_streams_parts_are_sent_with_the_next_call(self) -> None:
        """After a restart the model is told what it already said (SPEC 4, amended)."""
        watching = call(text="Let me watch it.", parts=said("Let me watch it."))
        run = drive([watching, done()], [restart()])
        assert [s.accumulated_model_parts for s in run.of_type(StreamOnce)] == [
            (),
            said("Let me watch it."),
        ]

    def test_parts_pile_up_across_restarts_in_order(self) -> None:
        """Each restarted stream's parts follow the earlier ones."""
        first, second = call(text="One.", parts=said("One.")), call(text="Two.", parts=said("Two."))
        run = drive([first, second, done()], [restart(), restart()])
        assert run.of_type(StreamOnce)[2].accumulated_model_parts == (*said("One."), *said("Two."))

    def test_a_history_entry_after_restarts_owns_their_text_first(self) -> None:
        """The entry's pre-tool text is the restarted streams' text, then its own (SPEC 6.15)."""
        streams = [
            call(text="Let me watch it.", parts=said("Let me watch it.")),
            call(text="Now searching.", parts=said("Now searching.")),
            done(),
        ]
        run = drive(streams, [restart(), ok()])
        entry = run.final.function_history[0]
        assert entry.pre_tool_call_text_parts == (
            *said("Let me watch it."),
            *said("Now searching."),
        )
        assert run.of_type(StreamOnce)[2].accumulated_model_parts == ()

    def test_only_text_parts_move_into_the_entry(self) -> None:
        """A non-text part of a restarted stream is not pre-tool text."""
        thought = {"type": "reasoning", "text": "hmm"}
        streams = [call(text="Hm.", parts=(thought, *said("Hm."))), call(), done()]
        run = drive(streams, [restart(), ok()])
        assert run.final.function_history[0].pre_tool_call_text_parts == said("Hm.")

    def test_a_silent_chain_after_a_silent_restart_has_no_pre_tool_text(self) -> None:
        """Without text anywhere the entry carries no pre-tool parts."""
        run = drive([call(), call(), done()], [restart(), ok()])
        assert run.final.function_history[0].pre_tool_call_text_parts is None

    def test_a_refused_call_after_a_restart_owns_the_restarted_text(self) -> None:
        """A truncated call's entry takes the restarted stream's text too."""
        streams = [call(text="Watching.", parts=said("Watching.")), call(truncated=True), done()]
        run = drive(streams, [restart()])
        assert run.final.function_history[0].pre_tool_call_text_parts == said("Watching.")
