"""The exit policy after visible pre-tool text (SPEC section 7)."""

from __future__ import annotations

import pytest

from tests.engine.builders import NOVELAI, call, done, ok, turn
from tests.engine.drive import drive
from toolloop.engine.policy import should_end_after_pre_tool_text
from toolloop.states import ApiFamily, ProviderDescriptor, TurnStatus

CUSTOM = ProviderDescriptor()
STM = "update_short_term_memory"


@pytest.mark.parametrize(
    ("provider", "tool", "follow_up", "ends"),
    [
        (NOVELAI, STM, False, True),
        (NOVELAI, STM, True, True),
        (NOVELAI, "web_search", True, False),
        (NOVELAI, "roll_dice", False, True),
        (CUSTOM, STM, False, True),
        (CUSTOM, STM, True, False),
        (CUSTOM, "web_search", False, False),
        (CUSTOM, "web_search", True, False),
    ],
)
def test_exit_policy_table_after_visible_text(provider, tool, follow_up, ends) -> None:
    """Each row of the table of SPEC 7 decides as written."""
    assert should_end_after_pre_tool_text(provider, tool, follow_up, "I said this.") is ends


@pytest.mark.parametrize("family", list(ApiFamily))
def test_policy_never_ends_without_visible_text(family) -> None:
    """Blank pre-tool text never ends the turn, whatever the provider or tool."""
    provider = ProviderDescriptor(api_family=family)
    assert not should_end_after_pre_tool_text(provider, STM, False, " \n ")


def test_ending_policy_finishes_completed_with_the_pre_tool_text() -> None:
    """A NovelAI success after text ends `completed` with that text."""
    run = drive(
        [call("roll_dice", text="Rolling!"), done("never")],
        [ok({"n": 4})],
        turn=turn(provider=NOVELAI),
    )
    assert run.result.status is TurnStatus.COMPLETED
    assert run.result.persona_responses[0].text == "Rolling!"
    assert len(run.final.stream_results) == 1


def test_follow_up_tool_on_novelai_continues() -> None:
    """Search results must be presented: NovelAI continues when the registry asks."""
    run = drive(
        [call("web_search", text="Searching."), done("Found.")],
        [ok()],
        turn=turn(provider=NOVELAI),
        requires_follow_up=True,
    )
    assert run.result.persona_responses[0].text == "Found."


def test_policy_needs_a_successful_tool() -> None:
    """A failure after text is never ended by the exit policy."""
    from tests.engine.builders import fail

    run = drive([call(STM, text="Noted."), done("Again.")], [fail()])
    assert run.result.persona_responses[0].text == "Again."


def test_memory_tool_is_matched_by_value_not_identity() -> None:
    """A tool name decoded from the wire is a new string: it still selects the memory rule."""
    from_wire = "".join(["update_short", "_term_memory"])
    assert from_wire is not STM
    assert should_end_after_pre_tool_text(NOVELAI, from_wire, True, "I said this.")
