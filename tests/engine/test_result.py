"""Stage 04, build result (SPEC section 8)."""

from __future__ import annotations

from tests.engine.builders import call, done, ok, turn
from tests.engine.drive import drive
from toolloop.engine.result import build_result, memory_payload
from toolloop.engine.step import initial_state
from toolloop.states import LoopConfig, Persona, Sticker, ThoughtLogOwner, TurnSettings, TurnStatus


def test_text_is_trimmed() -> None:
    """The response text is trimmed."""
    assert memory_payload("  hi \n", "") == "hi"


def test_details_follow_under_the_scene_metadata_header() -> None:
    """Non-blank details are appended after a `[Scene Metadata]` line, both trimmed."""
    assert memory_payload(" hi ", " rain \n") == "hi\n\n[Scene Metadata]\nrain"


def test_blank_details_are_left_out() -> None:
    """Blank details add nothing."""
    assert memory_payload("hi", "  ") == "hi"


def test_persona_response_carries_the_persona_identity() -> None:
    """One response with the persona's name, ids and the text."""
    persona = Persona(name="Mika", id=7, lineage_id=3)
    run = drive([done("hello")], turn=turn(persona=persona))
    (response,) = run.result.persona_responses
    assert (
        response.persona_name,
        response.text,
        response.persona_id,
        response.persona_lineage_id,
    ) == (
        "Mika",
        "hello",
        7,
        3,
    )


def test_empty_text_gives_no_persona_response() -> None:
    """Nothing said, nothing remembered."""
    assert drive([done("   ")]).result.persona_responses == ()


def test_thought_log_owner_is_absent_without_a_thought_log() -> None:
    """No thought log, no owner."""
    assert drive([done()]).result.thought_log_owner is None


def test_thought_log_owner_under_impersonation_is_the_user() -> None:
    """Impersonation shows the user's name (default `User`) and avatar."""
    run = drive(
        [done(thought_log={"t": 1})],
        turn=turn(user_impersonation=True, impersonated_avatar_url="a.png"),
    )
    assert run.result.thought_log_owner == ThoughtLogOwner(
        type="user_impersonation", username="User", avatar_url="a.png"
    )
    named = drive(
        [done(thought_log={"t": 1})],
        turn=turn(user_impersonation=True, impersonated_username="kit"),
    )
    assert named.result.thought_log_owner.username == "kit"


def test_thought_log_owner_of_an_alter_is_the_persona() -> None:
    """An alter persona owns its thought log."""
    alter = Persona(name="Alt", is_alter=True)
    run = drive([done(thought_log={"t": 1})], turn=turn(persona=alter))
    assert run.result.thought_log_owner == ThoughtLogOwner(type="persona", persona=alter)


def test_thought_log_owner_defaults() -> None:
    """Otherwise the owner is the default identity."""
    assert drive([done(thought_log={"t": 1})]).result.thought_log_owner == ThoughtLogOwner(
        type="default"
    )


def test_sticker_only_on_completed() -> None:
    """Build result drops the sticker on every other status."""
    state = initial_state(LoopConfig(), TurnSettings())
    sticker = Sticker(id="s", name="n")
    for status in TurnStatus:
        result = build_result(state, status, text="x", sticker=sticker)
        assert (result.selected_sticker is not None) is (status is TurnStatus.COMPLETED)


def test_tool_response_delivered_is_only_present_when_true() -> None:
    """The flag is None unless a tool delivered the reply."""
    assert drive([call(), done()], [ok()]).result.tool_response_delivered is None


def test_stream_results_are_all_kept_in_order() -> None:
    """Every stream result of every iteration reaches the result."""
    streams = [call(text="a"), call(text="b"), done("c")]
    assert drive(streams, [ok()]).result.stream_results == tuple(streams)
