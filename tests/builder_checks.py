"""What a hand-written builder (`toolloop.engine.build`, `toolloop.effects.port_values`)
owes its class: the same parameters with the same defaults, and the value the class makes."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import attrs


def assert_takes_the_fields(builder: Callable[..., Any], cls: type) -> None:
    """Keyword-only parameters named as the fields, in order; a factory's default is None.

    And a class a builder may stand in for: one with no validator, converter or
    `__attrs_post_init__`, which a builder, setting the fields itself, would skip.
    """
    assert not hasattr(cls, "__attrs_post_init__"), f"{cls.__name__} has a post-init"
    for field in attrs.fields(cls):
        assert field.validator is None, f"{cls.__name__}.{field.name} has a validator"
        assert field.converter is None, f"{cls.__name__}.{field.name} has a converter"
    parameters = inspect.signature(builder).parameters.values()
    assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY for parameter in parameters)
    expected = [
        (field.alias, None if isinstance(field.default, attrs.Factory) else field.default)  # type: ignore[arg-type]
        for field in attrs.fields(cls)
    ]
    found = [
        (
            parameter.name,
            attrs.NOTHING if parameter.default is parameter.empty else parameter.default,
        )
        for parameter in parameters
    ]
    assert found == expected


def assert_makes_what_the_class_makes(
    builder: Callable[..., Any], cls: type, fields: dict[str, Any]
) -> None:
    """Equal, with the same fields set (defaults filled) and the dict as small (keys shared)."""
    built, called = builder(**fields), cls(**fields)
    assert type(built) is cls and built == called
    for field in attrs.fields(cls):
        assert getattr(built, field.name) == getattr(called, field.name)
    if hasattr(called, "__dict__"):
        assert list(vars(built)) == list(vars(called))
        assert sys.getsizeof(vars(built)) == sys.getsizeof(vars(called))
