"""A test folder that runs only when asked for: its marker in `-m`, or its variable set to 1.

The slow suites (`servers`, `mcp_node`, `browser`) need something `make test`
does not install; their conftests ask here whether to collect at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def asked_for(config: pytest.Config, marker: str, variable: str) -> bool:
    """`-m` names the marker (not negated), or the environment variable is 1."""
    if os.environ.get(variable) == "1":
        return True
    markexpr = str(config.getoption("markexpr", "") or "")
    return marker in markexpr and f"not {marker}" not in markexpr


def ignore_unless_asked(
    path: Path, config: pytest.Config, marker: str, variable: str
) -> bool | None:
    """`pytest_ignore_collect`'s answer: skip the folder's modules unless asked for."""
    if path.suffix == ".py" and not asked_for(config, marker, variable):
        return True
    return None


def mark_folder(items: list[pytest.Item], folder: Path, marker: str) -> None:
    """Give every collected test below `folder` the suite's marker."""
    mark = getattr(pytest.mark, marker)
    for item in items:
        if folder in item.path.parents:
            item.add_marker(mark)
