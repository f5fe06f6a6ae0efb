"""The loop's limits (SPEC section 2), as parsed by `toolloop.engine.config_parsing`."""

import attrs

SOFT_WARN_ITERATION_THRESHOLD = 20
"""The iteration at which the still-working notice is sent (fixed)."""
SUPPRESS_FOLLOW_UP_AFTER_PRE_TOOL_TEXT = frozenset({"update_short_term_memory"})
"""Tools that end the turn after visible text unless the registry wants a follow-up."""
VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS = 8_192
"""SPEC's default cap on the text the verbatim parser may hold back; the config sets it."""


@attrs.frozen(kw_only=True)
class LoopConfig:
    """The configured limits; defaults are SPEC's."""

    max_function_call_iterations: int = 100
    max_consecutive_tool_errors: int = 5
    nai_tool_failure_retry_threshold: int = 3
    stream_sdk_call_timeout_ms: int = 120_000
    stream_abandoned_settle_timeout_ms: int = 5_000
    tool_execution_timeout_ms: int = 300_000
    verbatim_tool_call_max_buffer_chars: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS
    tool_parallel_limit: int = 8
    """Tool calls of one batch that run at once (1: one after another, SPEC 6b)."""
    tool_approval_timeout_ms: int = 300_000
    """How long a call that needs approval waits for a decision (SPEC 6c)."""


def in_seconds(milliseconds: int) -> str:
    """A configured duration as messages and notices write it: `300` for 300000 ms,
    `12.5` for 12500 ms (no trailing `.0` when whole)."""
    seconds = milliseconds / 1000
    return str(int(seconds)) if seconds.is_integer() else str(seconds)


@attrs.frozen(kw_only=True)
class ConfigWarning:
    """One invalid configuration value and what was used instead."""

    variable: str
    value: str
    used: int
