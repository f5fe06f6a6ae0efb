"""Constructors for the frozen values `step` builds on every tool iteration.

On CPython 3.11 calling an attrs class with keywords costs more than what its
`__init__` does: the call packs the keywords into a dict and unpacks them again
for `__init__`, which then fetches a setter it does not use. `constructor(cls)`
returns a plain function with the same keyword-only signature (mypy checks its
calls as it checks the class's) that sets each field in the instance's dict,
as `__init__` does without the call's overhead; a 12-field `ToolContext`
builds in about two thirds of the time, and an iteration builds eight such
values (`make bench` shows what `step` gains). Setting the fields one by one
keeps the dict sharing its keys with the class's other instances: assigning a
whole new dict would not, and a held value would take about 40% more memory.

A slotted class is built through its slots' own setters instead: about a
third slower than a dict-backed one, for the values a turn holds to its end
(a history entry takes 72 bytes slotted, 192 with its dict).

It takes only the classes it builds exactly as their `__init__` would: frozen
and keyword-only, with plain defaults or factories, and no validator,
converter or `__attrs_post_init__`. Anything else is refused when the
constructor is made, on import, not on a step.
"""

import inspect
import types
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import attrs

from toolloop.states.errors import ToolloopError

P = ParamSpec("P")
T = TypeVar("T")


class UnsupportedClass(ToolloopError, TypeError):
    """`constructor` was given a class it cannot build the way its `__init__` would."""


def constructor(cls: Callable[P, T]) -> Callable[P, T]:
    """A function building `cls` from the keywords its `__init__` takes, as `__init__` would."""
    if not (isinstance(cls, type) and attrs.has(cls)):
        raise UnsupportedClass(f"{cls!r} is not an attrs class")
    _check(cls)
    names: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_unset": object()}
    params, items = [], []
    for field in attrs.fields(cls):
        name, default = field.alias, field.default
        value = name
        if default is attrs.NOTHING:
            params.append(name)
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            names[f"_factory_{name}"] = default.factory
            params.append(f"{name}=_unset")
            value = f"_factory_{name}() if {name} is _unset else {name}"
        else:
            names[f"_default_{name}"] = default
            params.append(f"{name}=_default_{name}")
        slot = inspect.getattr_static(cls, field.name, None)
        if isinstance(slot, types.MemberDescriptorType):
            names[f"_set_{name}"] = slot.__set__
            items.append(f"    _set_{name}(_instance, {value})\n")
        else:
            items.append(f"    _fields[{field.name!r}] = {value}\n")
    signature = f"*, {', '.join(params)}" if params else ""
    source = (
        f"def {cls.__name__}({signature}):\n"
        "    _instance = _new(_cls)\n"
        f"{'    _fields = _instance.__dict__' if '__dict__' in dir(cls) else ''}\n"
        f"{''.join(items)}"
        "    return _instance\n"
    )
    exec(compile(source, f"<constructor {cls.__qualname__}>", "exec"), names)
    built: Callable[P, T] = names[cls.__name__]
    built.__qualname__ = f"constructor({cls.__qualname__})"
    return built


def _check(cls: type) -> None:
    """Refuse a class whose `__init__` does more than fill its fields."""
    problems = []
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        problems.append("it has an __attrs_pre_init__ or __attrs_post_init__")
    for field in attrs.fields(cls):
        if not field.kw_only or not field.init:
            problems.append(f"field {field.name!r} is not a keyword-only argument of __init__")
        if field.alias.startswith("_"):
            problems.append(f"field {field.name!r} has an alias starting with an underscore")
        if field.validator is not None or field.converter is not None:
            problems.append(f"field {field.name!r} has a validator or converter")
        if isinstance(field.default, attrs.Factory) and field.default.takes_self:  # type: ignore[arg-type]
            problems.append(f"field {field.name!r} has a factory taking self")
    if problems:
        raise UnsupportedClass(
            f"constructor cannot build {cls.__qualname__}: {'; '.join(problems)}"
        )
