"""Generated attempts for the conformance and invariant properties: small caps, every status.

Weighted so that every declared move is common: most streams ask for a tool
(valid, blank, padded or missing names; truncated now and then), tools succeed,
fail, end the turn, restart (with or without a stash key) or pick a sticker,
NovelAI is one provider in three, and the caps are one to four, so the ceiling,
the error cap and the NovelAI threshold are hit often.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.engine.builders import batch, call, ended
from tests.engine.drive import Run, drive
from tests.engine.strategies import TOOLS, silences, texts
from toolloop.engine.events import StopRequest
from toolloop.states import (
    ApiFamily,
    ContextItem,
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

calls = st.builds(
    lambda name, text, truncated: call(name, {"q": "x"}, text=text, truncated=truncated),
    st.sampled_from([*TOOLS, *TOOLS, "  ", " web_search "]),
    texts,
    st.sampled_from([False, False, False, True]),
)
without_data = st.just(StreamResult(status=StreamStatus.FUNCTION_CALL, data=None))
terminal = st.builds(
    lambda status, text: ended(status, text),
    st.sampled_from([s for s in StreamStatus if s is not StreamStatus.FUNCTION_CALL]),
    texts,
)
batches = st.builds(
    lambda several, text: batch(*(one.data for one in several), text=text),
    st.lists(calls, min_size=2, max_size=4),
    texts,
)
#: Nine calls and a batch for two terminal streams and one call without data
#: (one_of would not weigh).
kinds = {"call": calls, "batch": batches, "terminal": terminal, "without_data": without_data}
stream = st.sampled_from(
    ["call"] * 9 + ["batch"] + ["terminal", "terminal", "without_data"]
).flatmap(kinds.__getitem__)
streams = st.lists(stream, min_size=1, max_size=10)

tool_data = st.sampled_from(
    [
        None,
        {"hits": 3},
        {"type": "context_restart_youtube", "enhanced_context_item": {"text": "t"}},
        {"type": "context_restart_message_metadata", "pending_context_key": "k"},
        {"status": "sticker_selected_successfully", "sticker_id": "s1"},
    ]
)
tool_results = st.lists(
    st.builds(
        lambda success, data, end_turn: ToolResult(
            success=success, data=data, error=None if success else "failed", end_turn=end_turn
        ),
        st.booleans(),
        tool_data,
        st.sampled_from([False, False, False, True]),
    ),
    min_size=1,
    max_size=10,
)
stops = st.lists(
    st.sampled_from([StopRequest.NONE] * 8 + [StopRequest.STOP, StopRequest.FOLLOW_UP]),
    min_size=1,
    max_size=20,
)
turns = st.builds(
    lambda family, surface, impersonation, deliberate: TurnSettings(
        provider=ProviderDescriptor(name=family.value, api_family=family),
        surface_user_errors=surface,
        user_impersonation=impersonation,
        deliberate_mode=deliberate,
        guild_stickers=(Sticker(id="s1", name="gong"),),
    ),
    st.sampled_from([ApiFamily.NOVELAI, ApiFamily.CUSTOM, ApiFamily.OPENAI]),
    st.booleans(),
    st.sampled_from([False, False, True]),
    st.sampled_from(
        [
            DeliberateMode(),
            DeliberateMode(active=True, allowed=("web_search", "roll_dice")),
            DeliberateMode(active=True, triggers={"web_search": Trigger(trigger="t", source="s")}),
        ]
    ),
)
small_configs = st.builds(
    lambda iterations, errors, nai, parallel: LoopConfig(
        max_function_call_iterations=iterations,
        max_consecutive_tool_errors=errors,
        nai_tool_failure_retry_threshold=nai,
        tool_parallel_limit=parallel,
    ),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 3),
)
stashes = st.sampled_from([(), (("k", ContextItem(kind="enrichment", content="stashed")),)])

attempts: st.SearchStrategy[Run] = st.builds(
    lambda s, t, p, u, c, f, k, o, q: drive(
        s, t, stops=p, turn=u, config=c, requires_follow_up=f, stash=dict(k), picks=o, silences=q
    ),
    streams,
    tool_results,
    stops,
    turns,
    small_configs,
    st.booleans(),
    stashes,
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    silences,
)

#: Attempts whose tools wait for approval (SPEC 6c): mostly batches, every way a wait
#: ends (approved, denied, unanswered, answered for other arguments), stops meanwhile.
decisions = st.lists(
    st.sampled_from(["approve", "approve", "approve", "deny", "timeout", "other"]),
    min_size=1,
    max_size=4,
)
approval_stream = st.sampled_from(["call"] * 3 + ["batch"] * 6 + ["terminal"]).flatmap(
    kinds.__getitem__
)
approval_attempts: st.SearchStrategy[Run] = st.builds(
    lambda s, t, p, u, c, f, k, o, a, d: drive(
        s,
        t,
        stops=p,
        turn=u,
        config=c,
        requires_follow_up=f,
        stash=dict(k),
        picks=o,
        approval_tools=a,
        decisions=d,
    ),
    st.lists(approval_stream, min_size=1, max_size=6),
    st.lists(
        st.builds(
            lambda success, data: ToolResult(
                success=success, data=data, error=None if success else "failed"
            ),
            st.sampled_from([True, True, True, False]),
            tool_data,
        ),
        min_size=1,
        max_size=10,
    ),
    st.lists(
        st.sampled_from([StopRequest.NONE] * 5 + [StopRequest.STOP, StopRequest.FOLLOW_UP]),
        min_size=1,
        max_size=20,
    ),
    turns,
    small_configs,
    st.booleans(),
    stashes,
    st.lists(st.integers(0, 3), min_size=1, max_size=4),
    st.sampled_from([frozenset(TOOLS[:1]), frozenset(TOOLS)]),
    decisions,
)
every_attempt = st.one_of(attempts, approval_attempts)
"""Both kinds, for the properties every run keeps."""


def _approved_then_denied(result: ToolResult, **settings: object) -> Run:
    """A batch of two waiting calls: the first approved runs to `result`, then the second is
    denied, the last of the batch to be done (SPEC 6c)."""
    two = batch(call("web_search", {"q": "a"}).data, call("web_search", {"q": "b"}).data)
    return drive(
        [two, ended(StreamStatus.COMPLETED, "ok")],
        [result],
        approval_tools=frozenset({"web_search"}),
        decisions=["approve", "deny"],
        picks=[0, 1, 0],
        **settings,  # type: ignore[arg-type]
    )


_NOVELAI = TurnSettings(provider=ProviderDescriptor(name="novelai", api_family=ApiFamily.NOVELAI))
_DENIED_AFTER_TEXT = call("web_search", {"q": "a"}, text="Let me look.")
#: Runs of the moves a batch finished by a denial takes too rarely to be generated.
RARE_WAITING: tuple[Run, ...] = (
    _approved_then_denied(ToolResult(success=True, data={"type": "context_restart_youtube"})),
    _approved_then_denied(
        ToolResult(success=True, data={"type": "context_restart_gif", "pending_context_key": "k"})
    ),
    _approved_then_denied(ToolResult(success=True, end_turn=True)),
    *(
        drive(
            [_DENIED_AFTER_TEXT, ended(StreamStatus.COMPLETED, "ok")],
            approval_tools=frozenset({"web_search"}),
            decisions=["deny"],
            turn=_NOVELAI,
            config=LoopConfig(nai_tool_failure_retry_threshold=threshold),
        )
        for threshold in (1, 2)
    ),
    drive(  # denied after text on the last iteration: the ceiling row of a NovelAI failure
        [_DENIED_AFTER_TEXT],
        approval_tools=frozenset({"web_search"}),
        decisions=["deny"],
        turn=_NOVELAI,
        config=LoopConfig(max_function_call_iterations=1),
    ),
)
