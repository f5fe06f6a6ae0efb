"""What a host sees of a running turn: the typed events `on_event` receives (docs/embedding.md).

`run_tool_loop(on_event=...)` and `run_generation_turn(on_event=...)` call
a `HostObserver` with each of these as it happens (`toolloop.discord`'s bot
hands them over wrapped in a `ChannelEvent`): a status line, a log or a
dashboard reads a turn through them, never through the engine's effects.
Every event names its attempt and its iteration (`NoticeShown` and
`TurnFinished` through their notice and result); tool arguments arrive with
the registry's secrets redacted.
"""

from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalEvent,
    ApprovalExpired,
    ApprovalWithdrawn,
    HostEvent,
    HostObserver,
    NoticeShown,
    StreamFinished,
    StreamFirstChunk,
    StreamStarted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)

__all__ = [  # noqa: RUF022 (in the order a turn meets them)
    "HostObserver",
    "HostEvent",
    # a provider call
    "StreamStarted",
    "StreamFirstChunk",
    "StreamFinished",
    # a tool call
    "ToolStarted",
    "ToolFinished",
    # a person's approval of a call (SPEC 6c)
    "ApprovalEvent",
    "ApprovalAsked",
    "ApprovalAnswered",
    "ApprovalExpired",
    "ApprovalWithdrawn",
    # the channel and the end
    "NoticeShown",
    "TurnFinished",
]
