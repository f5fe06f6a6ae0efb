"""The declared machine as the inspector page draws it, read off the table.

One node per phase, one edge per (source, move, destination) with its event
and SPEC rules. The exits into FINISHED are also grouped by the status the
attempt ends with, read from the row's finishing action (`EXIT_STATUSES`).
"""

from __future__ import annotations

from typing import Any

from toolloop.engine import actions as do
from toolloop.engine.actions import Action
from toolloop.engine.table import TABLE, Row
from toolloop.states import Phase
from toolloop.states.errors import ToolloopError

RAISED = "raised"
"""The exit of a row that raises (`ImpersonationAborted`) instead of returning a result."""

EXIT_STATUSES: dict[Action, tuple[str, ...]] = {
    do.finish_with_sticker: ("completed",),
    do.finish_novelai_exhausted: ("completed",),
    do.finish_stream_failed: ("error", "timeout"),
    do.finish_malformed: ("error",),
    do.finish_error_loop: ("error",),
    do.finish_timeout: ("timeout",),
    do.finish_empty: ("empty_response",),
    do.finish_stopped: ("stopped_by_user",),
    do.abort_stopped: ("stopped_by_user",),
    do.finish_interrupted: ("follow_up_interrupt",),
    do.raise_impersonation: (RAISED,),
}
"""The statuses each finishing action can end an attempt with."""


class UnknownExit(ToolloopError, LookupError):
    """A row into FINISHED has no finishing action the inspector knows: the table grew."""


def exit_statuses(row: Row) -> tuple[str, ...]:
    """The statuses an attempt that takes `row` into FINISHED ends with."""
    found = [EXIT_STATUSES[action] for action in row.actions if action in EXIT_STATUSES]
    if len(found) != 1:
        raise UnknownExit(
            f"row {row.source.value} --{row.move}--> finished (SPEC {row.rule}) has "
            f"{len(found)} known finishing actions, not 1: add it to EXIT_STATUSES"
        )
    return found[0]


def machine(table: tuple[Row, ...] = TABLE) -> dict[str, Any]:
    """The page's machine: `phases`, `edges` and `exits` (status -> the edges ending with it)."""
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}
    exits: dict[str, list[str]] = {}
    for row in table:
        key = (row.source.value, str(row.move), row.dest.value)
        edge = edges.setdefault(
            key,
            {
                "id": "{}:{}:{}".format(*key),
                "source": key[0],
                "move": key[1],
                "dest": key[2],
                "event": row.event.__name__,
                "rules": [],
            },
        )
        edge["rules"] += [rule for rule in row.rule.split() if rule not in edge["rules"]]
        if row.dest is Phase.FINISHED:
            for status in exit_statuses(row):
                named = exits.setdefault(status, [])
                if edge["id"] not in named:
                    named.append(edge["id"])
    return {
        "phases": [phase.value for phase in Phase],
        "edges": list(edges.values()),
        "exits": exits,
    }
