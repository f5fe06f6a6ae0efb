"""Hypothesis strategies for whole scripted attempts of the pure core."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.engine.builders import call, ended
from toolloop.engine.events import StopRequest
from toolloop.states import (
    ApiFamily,
    DeliberateMode,
    LoopConfig,
    ProviderDescriptor,
    Sticker,
    StreamResult,
    StreamStatus,
    ToolResult,
    Trigger,
    TurnSettings,
)

TOOLS = ["web_search", "update_short_term_memory", "select_sticker_for_response", "roll_dice"]
texts = st.sampled_from(["", "  ", "Let me look.", "Sure!"])
details = st.sampled_from(["", "scene: rain"])
thought_logs = st.sampled_from([None, {"text": "hmm"}])

calls = st.builds(
    lambda name, text, truncated, detail, log: _with(
        call(name, {"q": "x"}, text=text, truncated=truncated, details=detail), log
    ),
    st.sampled_from([*TOOLS, "  ", " web_search "]),
    texts,
    st.booleans(),
    details,
    thought_logs,
)
terminal = st.builds(
    lambda status, text, detail, log: _with(
        StreamResult(
            status=status, accumulated_text=text, details_content=detail, data=ended(status).data
        ),
        log,
    ),
    st.sampled_from([s for s in StreamStatus if s is not StreamStatus.FUNCTION_CALL]),
    texts,
    details,
    thought_logs,
)
streams = st.lists(st.one_of(calls, calls, calls, terminal), min_size=1, max_size=30)

tool_data = st.sampled_from(
    [
        None,
        {},
        {"hits": 3},
        {"type": "context_restart_youtube", "enhanced_context_item": {"text": "t"}},
        {"type": "context_restart_message_metadata", "pending_context_key": "k"},
        {"status": "sticker_selected_successfully", "sticker_id": "s1"},
        {"status": "sticker_selected_successfully", "sticker_id": "nope"},
    ]
)
tool_results = st.lists(
    st.builds(
        lambda success, data, end_turn, delivered: ToolResult(
            success=success,
            data=data,
            error=None if success else "failed",
            end_turn=end_turn,
            response_delivered=delivered,
        ),
        st.booleans(),
        tool_data,
        st.sampled_from([False, False, False, True]),
        st.booleans(),
    ),
    min_size=1,
    max_size=30,
)
silences = st.lists(st.booleans(), min_size=1, max_size=10)
"""For each `timeout` stream, whether the loop's inactivity timeout ended it (`drive`)."""
stops = st.lists(
    st.sampled_from([StopRequest.NONE] * 6 + [StopRequest.STOP, StopRequest.FOLLOW_UP]),
    min_size=1,
    max_size=60,
)
turns = st.builds(
    lambda family, surface, suppress, impersonation, deliberate, stop_context, dm: TurnSettings(
        provider=ProviderDescriptor(name=family.value, api_family=family),
        surface_user_errors=surface,
        suppress_user_errors=suppress,
        user_impersonation=impersonation,
        deliberate_mode=deliberate,
        stop_context_queued=stop_context,
        direct_message=dm,
        guild_stickers=(Sticker(id="s1", name="gong"),),
    ),
    st.sampled_from(list(ApiFamily)),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(
        [
            DeliberateMode(),
            DeliberateMode(active=True, allowed=("web_search", "roll_dice")),
            DeliberateMode(active=True, triggers={"web_search": Trigger(trigger="t", source="s")}),
        ]
    ),
    st.booleans(),
    st.booleans(),
)
configs = st.builds(
    lambda iterations, errors, nai: LoopConfig(
        max_function_call_iterations=iterations,
        max_consecutive_tool_errors=errors,
        nai_tool_failure_retry_threshold=nai,
    ),
    st.integers(1, 25),
    st.integers(1, 6),
    st.integers(1, 4),
)


def _with(result: StreamResult, log: dict[str, Any] | None) -> StreamResult:
    import attrs

    return attrs.evolve(result, thought_log=log)
