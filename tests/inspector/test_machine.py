"""The page's machine is the table's: every row an edge, every exit under its statuses."""

from __future__ import annotations

import attrs
import pytest

from toolloop.effects.inspect.machine import RAISED, UnknownExit, exit_statuses, machine
from toolloop.engine import actions as do
from toolloop.engine.table import TABLE
from toolloop.states import Phase, TurnStatus


def test_every_row_of_the_table_is_one_edge_of_the_page() -> None:
    drawn = machine()
    edges = {(edge["source"], edge["move"], edge["dest"]) for edge in drawn["edges"]}
    assert edges == {(row.source.value, str(row.move), row.dest.value) for row in TABLE}
    assert drawn["phases"] == [phase.value for phase in Phase]
    for row in TABLE:
        (edge,) = [
            edge
            for edge in drawn["edges"]
            if (edge["source"], edge["move"], edge["dest"])
            == (row.source.value, str(row.move), row.dest.value)
        ]
        assert set(row.rule.split()) <= set(edge["rules"])
        assert edge["event"] == row.event.__name__


def test_every_exit_into_finished_is_grouped_under_a_status_the_loop_ends_with() -> None:
    drawn = machine()
    into_finished = {edge["id"] for edge in drawn["edges"] if edge["dest"] == "finished"}
    grouped = {edge for ids in drawn["exits"].values() for edge in ids}
    assert grouped == into_finished
    assert set(drawn["exits"]) <= {status.value for status in TurnStatus} | {RAISED}
    completed = drawn["exits"]["completed"]
    assert "streaming:completed:finished" in completed
    assert "dispatching:end_turn:finished" in completed
    assert "streaming:stream_failed:finished" in drawn["exits"]["error"]
    assert "streaming:stream_failed:finished" in drawn["exits"]["timeout"]


def test_a_finishing_row_the_inspector_does_not_know_is_an_error_naming_it() -> None:
    (row,) = [row for row in TABLE if row.dest is Phase.FINISHED][:1]
    unknown = attrs.evolve(
        row, actions=tuple(a for a in row.actions if a is not do.finish_with_sticker)
    )
    with pytest.raises(UnknownExit, match=r"streaming --completed--> finished \(SPEC 4.3\)"):
        exit_statuses(unknown)
