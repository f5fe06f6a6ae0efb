"""A draft of the next state: read through, write aside, build once.

A handler changes several fields across helper functions; building a frozen
`IterationState` for each change would copy the whole state several times per
event. A `Draft` reads unchanged fields from the current state, keeps the
changes in a dict, and `commit` builds the next state exactly once.
"""

from typing import Any

from toolloop.states import IterationState


class Draft:
    """The next state while a handler decides it."""

    __slots__ = ("_base", "_changes")
    _base: IterationState
    _changes: dict[str, Any]

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
        base, changes = self._base, self._changes
        if not changes:
            return base
        # IterationState is frozen and dict-backed: copying its dict is one C call,
        # where attrs.evolve would read and set its 25 fields one by one.
        state: IterationState = object.__new__(IterationState)
        fields = state.__dict__
        fields.update(base.__dict__)
        fields.update(changes)
        return state
