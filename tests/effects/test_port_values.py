"""`toolloop.effects.port_values`: each hand-written builder makes what its class's call makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.builder_checks import assert_makes_what_the_class_makes, assert_takes_the_fields
from toolloop.effects import port_values
from toolloop.effects.in_memory import MemoryTurnControl
from toolloop.effects.ports import StreamingContext, StreamRequest, StreamSpan, ToolInvocation
from toolloop.engine.commands import StreamOnce
from toolloop.states import ToolSpec, TurnSettings


async def _notify(text: str) -> None:
    """A tool's progress notices, dropped."""


ONCE = StreamOnce(
    iteration=1,
    function_history=(),
    accumulated_model_parts=(),
    context=(),
    tail_directives=(),
    disabled=frozenset(),
    suppress_text_output=False,
)
STREAMING = StreamingContext(
    reply_to="m1", identity=None, pre_tool_text="Looking.", text_suppressed=False
)

# Each builder, its class, and fields for every parameter that has no default (and some more).
CASES: list[tuple[Callable[..., Any], type, dict[str, Any]]] = [
    (port_values.stream_span, StreamSpan, {"attempt": 1, "iteration": 4, "suppressed": True}),
    (
        port_values.stream_request,
        StreamRequest,
        {
            "turn": TurnSettings(),
            "once": ONCE,
            "tools": (ToolSpec(name="search", description="d", parameters={}),),
            "verbatim": True,
        },
    ),
    (
        port_values.tool_invocation,
        ToolInvocation,
        {"killed": MemoryTurnControl().killed, "notify": _notify, "streaming": STREAMING},
    ),
]
IDS = [cls.__name__ for _, cls, _ in CASES]


@pytest.mark.parametrize(("builder", "cls", "fields"), CASES, ids=IDS)
def test_a_builder_is_its_class_without_the_call(
    builder: Callable[..., Any], cls: type, fields: dict[str, Any]
) -> None:
    """It takes the fields as keyword-only parameters with the class's defaults, in order,
    and makes a value equal to the class's, with the same fields set and as small a dict."""
    assert_takes_the_fields(builder, cls)
    assert_makes_what_the_class_makes(builder, cls, fields)
