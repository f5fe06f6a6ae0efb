"""A short soak in the main suite; `make soak` runs the full 10,000 turns per backend."""

from __future__ import annotations

import pytest

from tests.effects.harness import BACKENDS, Backend
from tests.reliability.soak import run_soak

TURNS = 400
ENDS = {"completed", "error", "timeout", "stopped_by_user", "raised ProviderBroke"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_soak_of_random_turns_leaves_no_kill_handle_registration_or_task_behind(
    backend: Backend,
) -> None:
    """Kills, stops, follow-ups, timeouts, failing, raising and hanging tools: nothing leaks.

    The turns are not all alike: every kind of end the soak aims at occurs.
    """
    soak = run_soak(backend, TURNS, seed=1, sample_every=TURNS)
    assert soak.leaks == []
    assert sum(soak.statuses.values()) == TURNS
    assert set(soak.statuses) >= ENDS
