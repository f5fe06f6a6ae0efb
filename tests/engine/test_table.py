"""The table as written: one row a line, its names checked on import."""

from __future__ import annotations

import inspect

import pytest

from toolloop.engine import table
from toolloop.engine.events import StreamEnded, ToolSettled
from toolloop.engine.table import FINISHED, STREAMING, TABLE, BadRow, Move, row, rows_of

ROW = ("completed", "stream_completed", "RECORDED finish_with_sticker", FINISHED, "4.3")


def test_every_row_has_a_unique_name_that_starts_with_its_move() -> None:
    """A row's name is unique, and is its move or `move:case`."""
    names = [each.name for each in TABLE]
    assert len(set(names)) == len(names)
    assert all(each.name.partition(":")[0] == each.move.value for each in TABLE)


def test_a_sequence_name_stands_for_its_actions() -> None:
    """`RECORDED` in a row is the action it names, in place."""
    written = row(STREAMING, StreamEnded, *ROW)
    assert [action.__name__ for action in written.actions] == [
        "record_stream",
        "finish_with_sticker",
    ]
    assert written.move is Move.COMPLETED


def test_a_bang_guard_is_one_that_must_not_hold() -> None:
    """`!fact` goes to `unless`, the others to `when`."""
    written = row(STREAMING, StreamEnded, "end_turn", "end_turn_requested !restart_requested",
                  "finish_with_sticker", FINISHED, "4.3h2")  # fmt: skip
    assert (written.when, written.unless) == (("end_turn_requested",), ("restart_requested",))


def test_the_rows_are_one_line_each_and_fit_a_screen() -> None:
    """The table's rows, with their group headers, take about one screen of lines."""
    source = inspect.getsource(table)
    written = source[source.index("_ROWS: dict") : source.index("# fmt: on")]
    assert len(written.splitlines()) <= 70
    assert sum(line.lstrip().startswith('("') for line in written.splitlines()) == len(TABLE)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ((*ROW[:1], "stream_done", *ROW[2:]), r"^row 'completed': 'stream_done' is no fact of"),
        ((*ROW[:2], "RECORDED finish_later", *ROW[3:]), r"'finish_later' is no action of"),
        ((*ROW[:2], "_notice", *ROW[3:]), r"'_notice' is no action of"),
        ((*ROW[:2], "Context", *ROW[3:]), r"'Context' is no action of"),
        (("vanished", *ROW[1:]), r"^row 'vanished': 'vanished' is no member of Move$"),
    ],
)
def test_a_row_naming_what_does_not_exist_is_refused(
    line: tuple[str, str, str, object, str], message: str
) -> None:
    """An unknown guard, action or move raises `BadRow` naming the row."""
    with pytest.raises(BadRow, match=message):
        row(STREAMING, StreamEnded, *line)  # type: ignore[arg-type]


def test_two_rows_with_one_name_are_refused() -> None:
    """A name used twice could not key a witness: `BadRow` names it."""
    failed = ("tool_failed", "outcome_failed", "KEPT NEXT", STREAMING, "4.3h6")
    with pytest.raises(BadRow, match=r"^rows named twice: tool_failed$"):
        rows_of({(table.DISPATCHING, ToolSettled): (failed, failed)})
