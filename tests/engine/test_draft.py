"""The draft: a mutable copy of a state, frozen once by `commit`."""

from __future__ import annotations

import attrs

from toolloop.engine.draft import Draft
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
