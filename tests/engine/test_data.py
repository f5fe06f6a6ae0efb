"""The engine's data (states, events, effects): frozen and keyword-only, as SPEC 3 declares."""

from __future__ import annotations

import inspect
from types import ModuleType

import attrs
import pytest

from toolloop import states
from toolloop.engine import actions, commands, config_parsing, events, trace


def _classes(*modules: ModuleType) -> list[type]:
    """The attrs classes the modules define or re-export, each once."""
    found = (cls for module in modules for _, cls in inspect.getmembers(module, inspect.isclass))
    return list(
        dict.fromkeys(c for c in found if attrs.has(c) and c.__module__.startswith("toolloop."))
    )


DATA = _classes(states, config_parsing, events, commands, actions, trace)


@pytest.mark.parametrize("cls", DATA, ids=lambda cls: cls.__qualname__)
def test_every_field_is_keyword_only(cls: type) -> None:
    """Fields are named at every construction, so adding one can never shift another."""
    assert [f.name for f in attrs.fields(cls) if not f.kw_only] == []


@pytest.mark.parametrize("cls", DATA, ids=lambda cls: cls.__qualname__)
def test_every_class_is_frozen(cls: type) -> None:
    """A state, event or effect never changes after it is built: steps share them freely."""
    instance = object.__new__(cls)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        instance.anything = None  # type: ignore[attr-defined]
