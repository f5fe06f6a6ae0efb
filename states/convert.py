"""The cattrs converter of every datum: how states are written to and read from JSON.

Unions are tagged with `_type` (the class name), so a trace read back holds the
same classes it was written from. A key no field has is refused, not dropped:
what is read back is exactly what was written.
"""

from __future__ import annotations

from typing import Any

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
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


def omit_when_default(cls: type, *fields: str) -> None:
    """Write `fields` of `cls` only when they differ from their default.

    For a field added after data of `cls` was written: what lacks it is read with
    its default, and what leaves it at the default is written as before. Call it
    before `register_union` tags a union holding `cls`.
    """
    omitted: dict[str, Any] = {field: override(omit_if_default=True) for field in fields}
    converter.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, converter, **omitted))


register_union(FunctionCall | StreamError)


def to_json(value: Any, as_type: Any = None) -> Any:
    """Unstructure `value` into JSON-ready data; pass its union (`Event`, `Effect`) to tag it."""
    return converter.unstructure(value, as_type)


def from_json(data: Any, cls: Any) -> Any:
    """Structure JSON data into `cls`, raising cattrs' errors on a mismatch."""
    return converter.structure(data, cls)
