"""`constructor`: a frozen attrs value built without attrs' call, as its `__init__` builds it."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolloop import states
from toolloop.effects import ports
from toolloop.effects.registry import ToolCall
from toolloop.engine import commands, events
from toolloop.engine.construct import UnsupportedClass, constructor
from toolloop.engine.step import Step

CLASSES = sorted(
    {
        cls
        for module in (states, commands, events, ports)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if attrs.has(cls)
    }
    | {Step, ToolCall},
    key=lambda cls: cls.__qualname__,
)
BUILDABLE = [cls for cls in CLASSES if all(field.kw_only for field in attrs.fields(cls))]
values = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.tuples(st.integers()))


@st.composite
def keywords(draw: st.DrawFn, cls: type) -> dict[str, Any]:
    """Keywords for `cls`: every field without a default, each one with a default or not."""
    return {
        field.alias: draw(values)
        for field in attrs.fields(cls)
        if field.default is attrs.NOTHING or draw(st.booleans())
    }


@pytest.mark.parametrize("cls", BUILDABLE, ids=lambda cls: cls.__qualname__)
@given(data=st.data())
def test_a_constructor_builds_the_same_value_as_the_class(cls: type, data: st.DataObject) -> None:
    """Same type, same fields, equal: for any keywords, defaults and factories included."""
    kwargs = data.draw(keywords(cls))
    built, expected = constructor(cls)(**kwargs), cls(**kwargs)
    assert type(built) is cls
    assert attrs.asdict(built, recurse=False) == attrs.asdict(expected, recurse=False)
    assert built == expected


@attrs.frozen(kw_only=True, slots=False)
class Shadowing:
    """Fields named like what a generated constructor could use for itself."""

    fields: int
    instance: int
    cls: int = 0


def test_fields_named_like_the_constructors_own_names_are_set() -> None:
    """`fields`, `instance` and `cls` are fields like any other."""
    built = constructor(Shadowing)(fields=1, instance=2, cls=3)
    assert vars(built) == {"fields": 1, "instance": 2, "cls": 3}


@pytest.mark.parametrize("cls", BUILDABLE, ids=lambda cls: cls.__qualname__)
def test_a_built_value_takes_no_more_memory_than_one_the_class_builds(cls: type) -> None:
    """A dict shares its keys with the class's other instances, as `__init__`'s does."""
    kwargs = {field.alias: None for field in attrs.fields(cls)}
    built, expected = constructor(cls)(**kwargs), cls(**kwargs)
    assert sys.getsizeof(built) == sys.getsizeof(expected)
    if "__dict__" in dir(cls):
        assert sys.getsizeof(vars(built)) == sys.getsizeof(vars(expected))


def test_a_factory_default_is_called_for_each_value() -> None:
    """Two values built without `fields` get two dicts, as `__init__` gives them."""
    new_log = constructor(commands.Log)
    first, second = (new_log(level=commands.Level.INFO, message="m") for _ in range(2))
    assert first.fields == {} and first.fields is not second.fields


def test_the_built_value_stays_frozen() -> None:
    """A value built by a constructor refuses assignment like one built by its class."""
    log = constructor(commands.Log)(level=commands.Level.INFO, message="m")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        log.message = "changed"  # type: ignore[misc]


def test_a_slotted_class_is_built_through_its_slots() -> None:
    """`ContextState` is slotted: the built value has no instance dict and equals the class's."""
    assert states.ContextState in BUILDABLE and "__dict__" not in dir(states.ContextState)
    built = constructor(states.ContextState)()
    assert not hasattr(built, "__dict__") and built == states.ContextState()


@attrs.frozen(kw_only=True, slots=False)
class DictBase:
    kept: int


@attrs.frozen(kw_only=True)
class SlottedChild(DictBase):
    slotted: int


def test_each_field_goes_where_the_class_keeps_it() -> None:
    """A slotted child of a dict-backed class: the base's field in the dict, its own in a slot."""
    built = constructor(SlottedChild)(kept=1, slotted=2)
    assert vars(built) == {"kept": 1} and built == SlottedChild(kept=1, slotted=2)


@attrs.frozen(kw_only=True, slots=False)
class Checked:
    """A class whose `__init__` does more than fill its fields."""

    count: int = attrs.field(validator=attrs.validators.instance_of(int))
    name: str = attrs.field(converter=str)
    parts: list[int] = attrs.field(default=attrs.Factory(lambda self: [], takes_self=True))

    def __attrs_post_init__(self) -> None:
        pass


@attrs.frozen(slots=False)
class Positional:
    """A class whose fields `__init__` also takes by position."""

    count: int


@attrs.frozen(kw_only=True, slots=False)
class Aliased:
    """A class whose field's keyword starts with an underscore."""

    count: int = attrs.field(alias="_count")


def test_a_class_whose_init_does_more_is_refused_naming_each_reason() -> None:
    """Validators, converters, post-init and factories taking self are each named."""
    with pytest.raises(UnsupportedClass) as refused:
        constructor(Checked)
    assert str(refused.value) == (
        "constructor cannot build Checked: it has an __attrs_pre_init__ or __attrs_post_init__; "
        "field 'count' has a validator or converter; "
        "field 'name' has a validator or converter; "
        "field 'parts' has a factory taking self"
    )


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        # Such an alias could shadow the constructor's own names.
        (Aliased, "field 'count' has an alias starting with an underscore"),
        # The constructor is keyword-only.
        (Positional, "field 'count' is not a keyword-only argument of __init__"),
    ],
    ids=["underscore alias", "positional"],
)
def test_a_class_whose_keywords_the_constructor_cannot_take_is_refused(
    cls: type, reason: str
) -> None:
    """An alias starting with `_` or a positional field: refused, naming the field and why."""
    with pytest.raises(UnsupportedClass) as refused:
        constructor(cls)
    assert str(refused.value) == f"constructor cannot build {cls.__qualname__}: {reason}"


def test_what_is_not_an_attrs_class_is_refused() -> None:
    """`constructor(dict)` says what it was given."""
    with pytest.raises(UnsupportedClass, match=r"^<class 'dict'> is not an attrs class$"):
        constructor(dict)
