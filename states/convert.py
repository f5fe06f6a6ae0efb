"""The cattrs converter of every datum: how states are written to and read from JSON.

Unions are tagged with `_type` (the class name), so a trace read back holds the
same classes it was written from. A key no field has is refused, not dropped:
what is read back is exactly what was written.
"""

from __future__ import annotations

from typing import Any

import cattrs
from cattrs.strategies import configure_tagged_union

from toolloop.states.calls import FunctionCall, StreamError

converter = cattrs.Converter(omit_if_default=False, forbid_extra_keys=True)
converter.register_unstructure_hook_func(
    lambda cls: getattr(cls, "__origin__", cls) is frozenset, lambda value: sorted(value)
)


def register_union(union: Any) -> None:
    """Tag a union of attrs classes with `_type`, alone and as an optional field."""
    configure_tagged_union(union, converter, tag_name="_type")
    converter.register_unstructure_hook(
        union | None, lambda value: None if value is None else converter.unstructure(value, union)
    )
    converter.register_structure_hook(
        union | None, lambda data, _: None if data is None else converter.structure(data, union)
    )


register_union(FunctionCall | StreamError)


def to_json(value: Any, as_type: Any = None) -> Any:
    """Unstructure `value` into JSON-ready data; pass its union (`Event`, `Effect`) to tag it."""
    return converter.unstructure(value, as_type)


def from_json(data: Any, cls: Any) -> Any:
    """Structure JSON data into `cls`, raising cattrs' errors on a mismatch."""
    return converter.structure(data, cls)
