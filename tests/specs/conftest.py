"""Reports the declared moves that no conformance check in this session saw taken."""

from __future__ import annotations

from typing import Any

from tests.specs.conformance import TAKEN, never_taken


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the declared moves (by row) never taken, when any conformance check ran."""
    if not TAKEN:
        return
    missing = never_taken(TAKEN)
    terminalreporter.section("declared moves never taken")
    terminalreporter.write_line(", ".join(missing) if missing else "none: every row was taken")
