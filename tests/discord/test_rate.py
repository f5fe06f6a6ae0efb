"""The edit window: at most 5 edits in any 5 seconds, spread one a second."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolloop.effects.discord.rate import EditWindow


def edits_at(requests: list[float]) -> list[float]:
    """When each requested edit goes, each request waiting for `next_at`."""
    window, times, now = EditWindow(), [], 0.0
    for request in sorted(requests):
        now = window.next_at(max(now, request))
        window.record(now)
        times.append(now)
    return times


@given(st.lists(st.floats(min_value=0, max_value=30), max_size=60))
def test_no_five_second_window_holds_more_than_five_edits(requests: list[float]) -> None:
    """Invariant: whatever the requests, any 5 s span holds at most 5 edits."""
    times = edits_at(requests)
    assert all(sum(1 for t in times if start <= t < start + 5.0) <= 5 for start in times)


def test_a_burst_is_spread_one_edit_a_second() -> None:
    """Ten edits wanted at once go at 0, 1, 2, ... 9 s."""
    assert edits_at([0.0] * 10) == [float(i) for i in range(10)]


def test_a_window_needs_a_positive_size() -> None:
    """A zero-edit window is refused by name."""
    with pytest.raises(
        ValueError,
        match=r"^an edit window needs edits >= 1 and period > 0 \(got edits=0, period=5.0\)$",
    ):
        EditWindow(edits=0)


def test_a_streams_first_message_keeps_only_the_limit() -> None:
    """Without spreading, a request goes at once until five went in the last 5 s."""
    window = EditWindow()
    assert window.next_at(0.0) == 0.0
    window.record(0.0)
    assert (window.next_at(0.1), window.next_at(0.1, spread=False)) == (1.0, 0.1)
    for _ in range(4):
        window.record(0.1)
    assert window.next_at(0.2, spread=False) == 5.0
