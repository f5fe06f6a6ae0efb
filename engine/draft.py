"""A draft of the next state: a mutable copy, frozen once.

The actions of a row change several fields; building a frozen `IterationState`
for each change would copy the whole state several times per event. A `Draft`
starts as a copy of the current state's fields in a plain object, so reading
and writing them costs what a local attribute does, and `commit` hands that
dict to the next state, so each event copies the state's fields once.

A write to a name that is not a field (a typo such as
`draft.consecutive_tool_erors = 3`) would leave the real field unchanged and
give the frozen state a stray attribute that equality, attrs and mypy all
miss; `commit` refuses it with `UnknownField`. The check is one `len` per
event: a state's dict holds exactly its fields, so any stray write shows as
one more key (checking each write instead, in `__setattr__`, costs about a
microsecond per event; see `make bench`).
"""

import difflib
from typing import TYPE_CHECKING, Any

import attrs

from toolloop.states import IterationState
from toolloop.states.errors import ToolloopError

FIELDS = tuple(field.name for field in attrs.fields(IterationState))
_COUNT = len(FIELDS)
# Module names: `object.__new__` looks `__new__` up on `object` at each call.
_new, _set = object.__new__, object.__setattr__


class UnknownField(ToolloopError, AttributeError):
    """A draft was given an attribute that is not a field of `IterationState`."""

    def __init__(self, names: list[str]) -> None:
        hints = [_hint(name) for name in names]
        super().__init__(f"IterationState has no field {', '.join(hints)}")
        self.names = names


def _refused(fields: dict[str, Any]) -> Exception:
    """Why a draft whose dict is not exactly the fields cannot become a state."""
    stray = [name for name in fields if name not in FIELDS]
    return UnknownField(stray) if stray else RuntimeError("the draft was already committed")


def _hint(name: str) -> str:
    close = difflib.get_close_matches(name, FIELDS, n=1)
    return f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)


class Draft:
    """The next state while the actions of a row build it; not to be used after `commit`."""

    def __init__(self, base: IterationState) -> None:
        # IterationState is frozen and dict-backed: copying its dict is one C call,
        # where reading its 20 fields one by one would be twenty.
        self.__dict__ = base.__dict__.copy()

    if TYPE_CHECKING:
        # The fields are IterationState's, copied at run time; typed loosely here.
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def peek(self) -> IterationState:
        """The state the draft holds now, as a copy (the draft stays usable)."""
        fields = self.__dict__
        if len(fields) != _COUNT:
            raise _refused(fields)
        return _state(fields.copy())

    def commit(self) -> IterationState:
        """The next state, holding the draft's fields; the draft is left empty.

        The state takes the draft's dict itself rather than a copy; the draft gets
        a new empty one, so nothing done to it afterwards reaches the frozen state.
        """
        fields = self.__dict__
        if len(fields) != _COUNT:
            raise _refused(fields)
        self.__dict__ = {}
        return _state(fields)


def _state(fields: dict[str, Any]) -> IterationState:
    """The frozen state holding `fields` as its dict (IterationState's `__init__` would copy)."""
    state: IterationState = _new(IterationState)
    _set(state, "__dict__", fields)
    return state
