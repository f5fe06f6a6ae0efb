"""Reading a scenario's JSON strictly: each value with its path, each read checked.

`parse_json` keeps the keys an object repeats (JSON would keep the last one
silently); a `Node` is a value and its path inside the file (`streams[3].call`),
and its reads raise one `ScenarioError` naming the file, that path and what was
expected there. `toolloop.tools.scenario` builds the scenario from these reads.
"""

from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Any, TypeVar

import attrs

from toolloop.states import JsonObject, json_policy
from toolloop.states.errors import ToolloopError

E = TypeVar("E", bound=enum.Enum)


class ScenarioError(ToolloopError, ValueError):
    """A scenario file that cannot be run: where in it, and what was expected there."""

    def __init__(self, file: str, path: str, expected: str, got: str) -> None:
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: expected {expected}, got {got}")
        self.file = file
        self.path = path
        self.expected = expected
        self.got = got


def parse_json(text: str, file: str) -> Node:
    """The root of a JSON text, every object remembering its repeated keys; `file` names it."""
    try:
        raw = json_policy.loads(text, where=file, object_pairs_hook=_Object)
    except json_policy.JsonInputError as error:
        where = f"line {error.line} column {error.column}" if error.line else ""
        if error.reason != error.problem:  # not JSON at all: the parser's reason
            raise ScenarioError(file, where, "valid JSON", error.reason) from None
        raise ScenarioError(file, "", "JSON within toolloop's bounds", error.problem) from None
    return Node(file, "", raw)


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys its text gave more than once."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        counts = Counter(key for key, _ in pairs)
        self.duplicates = sorted(key for key, count in counts.items() if count > 1)


@attrs.frozen
class Node:
    """A value of the file and its path, with checked reads that raise `ScenarioError`."""

    file: str
    path: str
    value: Any

    def fail(self, expected: str, got: str | None = None) -> ScenarioError:
        return ScenarioError(
            self.file, self.path, expected, _describe(self.value) if got is None else got
        )

    def child(self, key: str | int) -> Node:
        if isinstance(key, int):
            return Node(self.file, f"{self.path}[{key}]", self.value[key])
        return Node(self.file, f"{self.path}.{key}" if self.path else key, self.value[key])

    def fields(self, allowed: Collection[str]) -> dict[str, Node]:
        """The object's members, after rejecting unknown and repeated keys."""
        self.of_type(dict, "an object")
        for key in self.value:
            if key not in allowed:
                keys = ", ".join(sorted(allowed))
                raise Node(self.file, self.child(key).path, None).fail(
                    f"one of the keys {keys}", f"the unknown key {key!r}"
                )
        for key in self.value.duplicates:
            raise self.child(key).fail("each key once", f"{key!r} twice")
        return {key: self.child(key) for key in self.value}

    def items(self) -> Iterator[Node]:
        self.of_type(list, "an array")
        return (self.child(index) for index in range(len(self.value)))

    def of_type(self, kind: type | tuple[type, ...], expected: str) -> Any:
        if not isinstance(self.value, kind) or _is_bool_as_int(self.value, kind):
            raise self.fail(expected)
        return self.value

    def enum(self, cls: type[E]) -> E:
        names = ", ".join(member.value for member in cls)
        self.of_type(str, f"one of {names}")
        try:
            return cls(self.value)
        except ValueError:
            raise self.fail(f"one of {names}") from None


def _is_bool_as_int(value: Any, kind: type | tuple[type, ...]) -> bool:
    """JSON `true` is not an integer, although Python's bool is an int."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return isinstance(value, bool) and bool not in kinds


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else json.dumps(value)


Reader = Callable[[Node], Any]


def read(fields: dict[str, Node], key: str, reader: Reader, default: Any) -> Any:
    return reader(fields[key]) if key in fields else default


def string(node: Node) -> str:
    value: str = node.of_type(str, "a string")
    return value


def nonblank(node: Node) -> str:
    value = string(node)
    if not value.strip():
        raise node.fail("a non-blank name")
    return value


def optional_string(node: Node) -> str | None:
    value: str | None = node.of_type((str, type(None)), "a string or null")
    return value


def boolean(node: Node) -> bool:
    value: bool = node.of_type(bool, "true or false")
    return value


def integer(node: Node) -> int:
    value: int = node.of_type(int, "an integer")
    return value


def json_object(node: Node) -> JsonObject:
    value: JsonObject = node.of_type(dict, "an object")
    return value


def optional_object(node: Node) -> JsonObject | None:
    value: JsonObject | None = node.of_type((dict, type(None)), "an object or null")
    return value


def anything(node: Node) -> Any:
    return node.value


def strings(node: Node) -> tuple[str, ...]:
    return tuple(string(item) for item in node.items())


def members(node: Node) -> Iterator[tuple[str, Node]]:
    """The members of a free-form object (its keys are not checked)."""
    for key in node.value.duplicates:
        raise node.child(key).fail("each key once", f"{key!r} twice")
    return ((key, node.child(key)) for key in node.value)


def required(parent: Node, fields: dict[str, Node], key: str, reader: Reader) -> Any:
    if key not in fields:
        path = f"{parent.path}.{key}" if parent.path else key
        raise ScenarioError(parent.file, path, f"the required key {key!r}", "nothing")
    return reader(fields[key])


def non_empty(node: Node, reader: Reader, what: str) -> tuple[Any, ...]:
    items = tuple(reader(item) for item in node.items())
    if not items:
        raise node.fail(f"a non-empty array of {what}", "an empty array")
    return items
