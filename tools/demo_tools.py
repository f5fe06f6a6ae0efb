"""The demo's tools: small but real (safe arithmetic and the clock of any time zone)."""

import ast
import datetime
import operator
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolloop.states.errors import ToolloopError

_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class DemoInputError(ToolloopError, ValueError):
    """Input a demo tool cannot work on; the registry hands its message to the model."""


CALCULATE = {
    "type": "object",
    "properties": {"expression": {"type": "string", "description": "Arithmetic, e.g. 2 * (3 + 4)"}},
    "required": ["expression"],
}
GET_TIME = {
    "type": "object",
    "properties": {
        "timezone": {"type": "string", "description": "An IANA zone, e.g. Europe/Paris"}
    },
    "required": ["timezone"],
}


def calculate(expression: str) -> dict[str, Any]:
    """Evaluate arithmetic safely: numbers and + - * / // % ** only."""
    value = _evaluate(ast.parse(expression, mode="eval").body)
    return {"expression": expression, "value": value}


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        if isinstance(node.op, ast.Pow) and abs(_evaluate(node.right)) > 100:
            raise DemoInputError("exponent too large")
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise DemoInputError(f"not arithmetic: {ast.unparse(node)}")


def get_time(timezone: str) -> dict[str, Any]:
    """The current time in an IANA time zone."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise DemoInputError(f"unknown time zone {timezone!r}") from None
    now = datetime.datetime.now(zone)
    return {"timezone": timezone, "time": now.strftime("%H:%M"), "weekday": now.strftime("%A")}
