"""The payload converter: attrs data as JSON through toolloop's cattrs converter.

Temporal's default JSON converter knows dataclasses, not attrs classes, enums
inside them or the tagged unions (`Event`, `Effect`) of `toolloop.states.convert`;
this one writes every attrs value as that converter does and reads it back
into the type the workflow or activity declares. Anything else (None, bytes,
plain JSON) goes through Temporal's own converters.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import cattrs
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    BinaryNullPayloadConverter,
    BinaryPlainPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    JSONPlainPayloadConverter,
)

from toolloop.states.convert import from_json, to_json
from toolloop.states.errors import ToolloopError


class AttrsJSONPayloadConverter(JSONPlainPayloadConverter):
    """`json/plain` payloads; attrs values in and out through `toolloop.states.convert`."""

    def to_payload(self, value: Any) -> Payload | None:
        if not attrs.has(type(value)) and not _holds_attrs(value):
            return super().to_payload(value)
        data = json.dumps(to_json(value), separators=(",", ":"), ensure_ascii=False)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data.encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        if type_hint is None or not _attrs_type(type_hint):
            return super().from_payload(payload, type_hint)
        try:
            return from_json(json.loads(payload.data), type_hint)
        except Exception as error:  # not JSON, or cattrs' errors: "not this shape"
            raise ForeignPayload(type_hint, _why(error)) from None


class ForeignPayload(ToolloopError, ValueError):
    """A `json/plain` payload that is not the toolloop value expected there (written by
    another converter or another version): names the type and what does not fit."""

    def __init__(self, expected: Any, problem: str) -> None:
        name = getattr(expected, "__name__", str(expected))
        super().__init__(f"a json/plain payload is not a {name}: {problem}")
        self.expected = expected
        self.problem = problem


class ToolloopPayloadConverter(CompositePayloadConverter):
    """None, bytes, then JSON with attrs values (Temporal's default order, minus protobuf)."""

    def __init__(self) -> None:
        super().__init__(
            BinaryNullPayloadConverter(),
            BinaryPlainPayloadConverter(),
            AttrsJSONPayloadConverter(),
        )


def _why(error: Exception) -> str:
    """cattrs' error as its path-and-reason sentences (`... @ $.turn`), else its message."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error, path="$"))
    return str(error)


def _holds_attrs(value: Any) -> bool:
    """A list of attrs values (a query's answer)."""
    return isinstance(value, list | tuple) and any(attrs.has(type(item)) for item in value)


def _attrs_type(hint: Any) -> bool:
    """An attrs class, optional or a list of them: what the cattrs converter reads."""
    return attrs.has(hint) or any(_attrs_type(arg) for arg in getattr(hint, "__args__", ()))


#: The data converter of every client and worker of toolloop's turns.
data_converter = DataConverter(payload_converter_class=ToolloopPayloadConverter)
