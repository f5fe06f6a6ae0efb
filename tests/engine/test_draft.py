"""The draft: a mutable copy of a state, frozen once by `commit`."""

from __future__ import annotations

import attrs
import pytest

from toolloop.engine.draft import Draft, UnknownField
from toolloop.engine.step import initial_state
from toolloop.states import LoopConfig, TurnSettings


def test_commit_holds_the_writes_and_leaves_the_base_state_unchanged() -> None:
    """The committed state is the base with the draft's writes; the base keeps its fields."""
    base = initial_state(LoopConfig(), TurnSettings())
    draft = Draft(base)
    draft.iteration = 3
    state = draft.commit()
    assert state == attrs.evolve(base, iteration=3)
    assert base.iteration == 0


def test_writes_after_commit_do_not_reach_the_committed_state() -> None:
    """The state keeps the draft's fields; what is written to the draft later is not in it."""
    draft = Draft(initial_state(LoopConfig(), TurnSettings()))
    state = draft.commit()
    draft.iteration = 7
    assert state.iteration == 0


def test_a_misspelt_field_is_refused_at_commit_naming_it() -> None:
    """`draft.consecutive_tool_erors = 3` raises UnknownField with the field it meant."""
    draft = Draft(initial_state(LoopConfig(), TurnSettings()))
    draft.consecutive_tool_erors = 3
    with pytest.raises(
        UnknownField,
        match=r"^IterationState has no field 'consecutive_tool_erors' "
        r"\(did you mean 'consecutive_tool_errors'\?\)$",
    ):
        draft.commit()


def test_a_misspelt_field_is_refused_when_a_result_is_built_from_the_draft() -> None:
    """`peek`, which a finishing action builds the result from, refuses a stray field too."""
    draft = Draft(initial_state(LoopConfig(), TurnSettings()))
    draft.pendng = None
    with pytest.raises(UnknownField) as raised:
        draft.peek()
    assert raised.value.names == ["pendng"]
    assert isinstance(raised.value, AttributeError)


def test_a_draft_committed_twice_says_so() -> None:
    """The second commit is refused: the draft gave its fields to the first state."""
    draft = Draft(initial_state(LoopConfig(), TurnSettings()))
    draft.commit()
    with pytest.raises(RuntimeError, match=r"^the draft was already committed$"):
        draft.commit()
