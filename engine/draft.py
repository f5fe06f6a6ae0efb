"""A draft of the next state: read through, write aside, build once.

A handler changes several fields across helper functions; building a frozen
`IterationState` for each change would copy the whole state several times per
event. A `Draft` reads unchanged fields from the current state, keeps the
changes in a dict, and `commit` builds the next state exactly once.
"""

from __future__ import annotations

from typing import Any

import attrs
from toolloop.states import IterationState


class Draft:
    """The next state while a handler decides it."""

    __slots__ = ("_base", "_changes")

    def __init__(self, base: IterationState) -> None:
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "_changes", {})

    def __getattr__(self, name: str) -> Any:
        changes = self._changes
        return changes[name] if name in changes else getattr(self._base, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._changes[name] = value

    def commit(self) -> IterationState:
        """The next state: the base with every change applied, built once."""
        return attrs.evolve(self._base, **self._changes) if self._changes else self._base
