"""`toolloop.engine.build`: each hand-written builder makes what its class's call makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from tests.builder_checks import assert_makes_what_the_class_makes, assert_takes_the_fields
from toolloop.engine import build
from toolloop.engine.commands import DispatchTool, Level, Log, StreamOnce
from toolloop.engine.events import StopRequest, StreamEnded, ToolSettled
from toolloop.engine.step import Step, _step, initial_state
from toolloop.engine.table import Move
from toolloop.states import (
    ContextItem,
    FunctionCall,
    LoopConfig,
    PendingCall,
    ProviderDescriptor,
    StreamResult,
    StreamStatus,
    ToolContext,
    ToolHistoryEntry,
    ToolResult,
    TurnSettings,
)

CALL = FunctionCall(name="web_search", args={"query": "cats"})
STREAM = StreamResult(status=StreamStatus.FUNCTION_CALL, data=CALL)
CONTEXT = ToolContext(
    channel_id="c",
    user_id="u",
    guild_id=None,
    locale="en",
    provider=ProviderDescriptor(),
    persona_name="p",
    user_impersonation=False,
    iteration=3,
    suppress_progress_notices=True,
    show_kill_hint=False,
)

# Each builder, its class, and fields for every parameter that has no default.
CASES: list[tuple[Callable[..., Any], type, dict[str, Any]]] = [
    (
        build.stream_once,
        StreamOnce,
        {
            "iteration": 2,
            "function_history": (),
            "accumulated_model_parts": ({"text": "a"},),
            "context": (ContextItem(kind="enrichment", content="x"),),
            "tail_directives": ("t",),
            "disabled": frozenset({"image"}),
            "suppress_text_output": True,
        },
    ),
    (build.dispatch_tool, DispatchTool, {"call": CALL, "context": CONTEXT}),
    (
        build.tool_context,
        ToolContext,
        {name: value for name, value in attrs.asdict(CONTEXT, recurse=False).items()},
    ),
    (build.pending_call, PendingCall, {"stream": STREAM, "name": "web_search"}),
    (build.log, Log, {"level": Level.INFO, "message": "m"}),
    (
        build.tool_history_entry,
        ToolHistoryEntry,
        {"function_call": CALL, "function_response": {"name": "web_search"}},
    ),
]
CASES += [
    (build.stream_ended, StreamEnded, {"result": STREAM, "stop": StopRequest.FOLLOW_UP}),
    (build.tool_settled, ToolSettled, {"result": ToolResult(success=True), "duration_ms": 7}),
]
IDS = [cls.__name__ for _, cls, _ in CASES]


@pytest.mark.parametrize(("builder", "cls", "fields"), CASES, ids=IDS)
def test_a_builder_takes_its_classs_fields_with_the_same_defaults(
    builder: Callable[..., Any], cls: type, fields: dict[str, Any]
) -> None:
    """Keyword-only parameters named as the fields, in order; a factory's default is None."""
    assert_takes_the_fields(builder, cls)


@pytest.mark.parametrize(("builder", "cls", "fields"), CASES, ids=IDS)
def test_a_builder_makes_the_value_its_class_makes(
    builder: Callable[..., Any], cls: type, fields: dict[str, Any]
) -> None:
    """Equal, with the same fields set (defaults filled) and the dict as small (keys shared)."""
    assert_makes_what_the_class_makes(builder, cls, fields)


def test_a_log_without_fields_gets_a_dict_of_its_own() -> None:
    """As `Log`'s factory: two lines never share one `fields` dict."""
    first, second = (build.log(level=Level.INFO, message="m") for _ in range(2))
    assert first.fields == {} and first.fields is not second.fields


def test_the_step_builder_makes_the_step_its_class_makes() -> None:
    """`step`'s own `_step` (positional, private) against `Step(...)`."""
    state = initial_state(LoopConfig(), TurnSettings())
    built, called = (
        _step(state, (), Move.STARTED),
        Step(state=state, effects=(), move=Move.STARTED),
    )
    assert built == called and list(vars(built)) == [field.name for field in attrs.fields(Step)]
