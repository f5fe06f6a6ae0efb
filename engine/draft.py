"""A draft of the next state: a mutable copy, frozen once.

A handler changes several fields across helper functions; building a frozen
`IterationState` for each change would copy the whole state several times per
event. A `Draft` starts as a copy of the current state's fields in a plain
object, so reading and writing them costs what a local attribute does, and
`commit` hands that dict to the next state, so each event copies the state's
fields once.
"""

from typing import TYPE_CHECKING, Any

from toolloop.states import IterationState


class Draft:
    """The next state while a handler decides it; not to be used after `commit`."""

    def __init__(self, base: IterationState) -> None:
        # IterationState is frozen and dict-backed: copying its dict is one C call,
        # where reading its 20 fields one by one would be twenty.
        self.__dict__ = base.__dict__.copy()

    if TYPE_CHECKING:
        # The fields are IterationState's, copied at run time; typed loosely here.
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def commit(self) -> IterationState:
        """The next state, holding the draft's fields; the draft is left empty.

        The state takes the draft's dict itself rather than a copy; the draft gets
        a new empty one, so nothing done to it afterwards reaches the frozen state.
        """
        state: IterationState = object.__new__(IterationState)
        object.__setattr__(state, "__dict__", self.__dict__)
        self.__dict__ = {}
        return state
