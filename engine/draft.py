"""A draft of the next state: a mutable copy, frozen once.

A handler changes several fields across helper functions; building a frozen
`IterationState` for each change would copy the whole state several times per
event. A `Draft` starts as a copy of the current state's fields in a plain
object, so reading and writing them costs what a local attribute does, and
`commit` builds the next state exactly once.
"""

from typing import TYPE_CHECKING, Any

from toolloop.states import IterationState


class Draft:
    """The next state while a handler decides it; not to be used after `commit`."""

    def __init__(self, base: IterationState) -> None:
        # IterationState is frozen and dict-backed: copying its dict is one C call,
        # where reading its 20 fields one by one would be twenty.
        self.__dict__.update(base.__dict__)

    if TYPE_CHECKING:
        # The fields are IterationState's, copied at run time; typed loosely here.
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def commit(self) -> IterationState:
        """The next state: the draft's fields as a frozen IterationState, built once."""
        state: IterationState = object.__new__(IterationState)
        state.__dict__.update(self.__dict__)
        return state
