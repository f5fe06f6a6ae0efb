"""One JSON policy for everything that comes from outside the process.

Provider streams, tool arguments and results, scenario files and trace lines
all pass through here, so each has the same bounds: at most `MAX_JSON_CHARS`
characters, at most `MAX_JSON_DEPTH` levels of nesting, no `NaN` or
`Infinity` (they are not JSON, and a model must never see them echoed back),
only JSON's own types, strings that are Unicode text (no lone surrogate
from a `\ud800` escape, which no UTF-8 writer, terminal or HTTP client can
encode) and integers Python can write as text (`sys.get_int_max_str_digits`).
A value within these bounds can be walked, redacted, structured and dumped
again without an error, which is why the depth bound is far below Python's
recursion limit.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from toolloop.states.errors import ToolloopError

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "JsonInputError",
    "NonJsonConstant",
    "check_json",
    "loads",
    "refuse_constant",
]

#: Characters one JSON document may have.
MAX_JSON_CHARS = 16 * 1024 * 1024
#: Levels of arrays and objects one JSON value may nest.
MAX_JSON_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")
_ARRAYS = (list, tuple)
#: Bits of an integer Python writes as text under any digit limit (640 digits at the least).
_SHORT_INT_BITS = 2000


class JsonInputError(ToolloopError, ValueError):
    """JSON from outside broke the policy: says where it came from and what was wrong."""

    def __init__(
        self, where: str, problem: str, *, reason: str = "", line: int = 0, column: int = 0
    ) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem
        self.reason = reason or problem
        """For text that is not JSON, the parser's reason alone (`Expecting value`)."""
        self.line = line
        """For text that is not JSON, where the parser stopped (1-based; 0: not known)."""
        self.column = column


class NonJsonConstant(ToolloopError, ValueError):
    """`NaN`, `Infinity` or `-Infinity` in a text: Python's `json` reads them, JSON has none."""


def refuse_constant(name: str) -> Any:
    """`parse_constant` for `json`: `NaN`, `Infinity` and `-Infinity` are not JSON."""
    raise NonJsonConstant(f"{name} (not a JSON number)")


def loads(
    text: str | bytes,
    *,
    where: str,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """Decode `text` under the policy, or raise `JsonInputError` naming `where`."""
    if len(text) > MAX_JSON_CHARS:
        raise JsonInputError(
            where, f"is {len(text)} characters long, more than the {MAX_JSON_CHARS} allowed"
        )
    try:
        value = json.loads(
            text, parse_constant=refuse_constant, object_pairs_hook=object_pairs_hook
        )
    except RecursionError:
        raise JsonInputError(where, f"nests deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError as error:
        raise JsonInputError(where, f"is not UTF-8 text ({error.reason})") from None
    except json.JSONDecodeError as error:
        problem, at = f"is not valid JSON: {error}", (error.lineno, error.colno)
        raise JsonInputError(where, problem, reason=error.msg, line=at[0], column=at[1]) from None
    except ValueError as error:  # the refused constants
        raise JsonInputError(where, f"is not valid JSON: {error}", reason=str(error)) from None
    check_json(value, where=where)
    return value


def check_json(value: Any, *, where: str) -> None:
    """Check that `value` is JSON data within the depth bound, without recursing.

    JSON data is `dict` with `str` keys, `list` (or `tuple`), `str`, `int`
    (that Python can write as text), finite `float`, `bool` and `None`.
    Raises `JsonInputError` naming `where` and the path of the first
    offending value (never the value itself, which may be a secret).
    """
    if not _is_json(value):
        _find_problem(value, where)


def _is_json(value: Any) -> bool:
    """Whether `check_json` passes `value`: its walk without the paths only a refusal needs."""
    # Each entry: values, and the depth they are at.
    stack: list[tuple[Iterable[Any], int]]
    if isinstance(value, dict):  # the usual root: its keys here, its values below
        if not _text_keys(value):
            return False
        stack = [(value.values(), 1)]
    else:
        stack = [((value,), 0)]
    while stack:
        values, depth = stack.pop()
        for item in values:  # the kinds in the order of how often they come
            if isinstance(item, str):
                if not item.isascii() and _SURROGATE.search(item):
                    return False
            elif item is None:
                continue
            elif isinstance(item, int):  # bool is an int
                if item.bit_length() > _SHORT_INT_BITS and not _writable(item):
                    return False
            elif isinstance(item, dict):
                if depth >= MAX_JSON_DEPTH or not _text_keys(item):
                    return False
                stack.append((item.values(), depth + 1))
            elif isinstance(item, _ARRAYS):
                if depth >= MAX_JSON_DEPTH:
                    return False
                stack.append((item, depth + 1))
            elif not isinstance(item, float) or not math.isfinite(item):
                return False
    return True


def _writable(number: int) -> bool:
    """Whether Python writes `number` as text: not beyond `sys.get_int_max_str_digits()`."""
    try:
        int.__repr__(number)
    except ValueError:
        return False
    return True


def _text_keys(item: dict[Any, Any]) -> bool:
    for key in item:
        if not isinstance(key, str) or (not key.isascii() and _SURROGATE.search(key)):
            return False
    return True


def _find_problem(value: Any, where: str) -> None:
    """Raise `JsonInputError` for the first value `check_json` refuses, with its path."""
    # Each entry: (value, depth, trail); a trail is (parent trail, key), made
    # into a path only when something is wrong.
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, trail = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_JSON_DEPTH:
                raise JsonInputError(where, f"nests deeper than {MAX_JSON_DEPTH} levels")
            for key, child in item.items():
                if not isinstance(key, str):
                    raise JsonInputError(where, f"{_path(trail)} has a key that is not a string")
                if _SURROGATE.search(key):
                    raise JsonInputError(where, f"{_path(trail)} has a key {_NOT_TEXT}")
                stack.append((child, depth + 1, (trail, key)))
        elif isinstance(item, list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise JsonInputError(where, f"nests deeper than {MAX_JSON_DEPTH} levels")
            stack.extend((child, depth + 1, (trail, i)) for i, child in enumerate(item))
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                raise JsonInputError(where, f"{_path(trail)} is a string {_NOT_TEXT}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonInputError(where, f"{_path(trail)} is {item}, which JSON cannot carry")
        elif isinstance(item, int):
            if not _writable(item):
                digits = sys.get_int_max_str_digits()
                problem = f"is an integer of more than {digits} digits, which Python cannot write"
                raise JsonInputError(where, f"{_path(trail)} {problem}")
        elif not (item is None or isinstance(item, str | int)):  # bool is an int
            kind = type(item).__name__
            raise JsonInputError(where, f"{_path(trail)} is a {kind}, which is not a JSON value")


_NOT_TEXT = "with a lone surrogate, which is not Unicode text"


def _path(trail: Any) -> str:
    """`$.a[0].b` for the trail `((((None, "a"), 0), "b")`."""
    keys: list[str | int] = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    return "$" + "".join(
        f"[{k}]" if isinstance(k, int) else f".{_short(k)}" for k in reversed(keys)
    )


def _short(key: str) -> str:
    """A key as a path shows it: a long one (it came from outside) is cut."""
    return key if len(key) <= 40 else f"{key[:40]}…"
