"""Token usage as each provider reports it, read into one `TokenUsage`.

OpenAI-compatible servers send `usage` (`prompt_tokens`, `completion_tokens`,
`completion_tokens_details.reasoning_tokens`) on a last chunk of their own,
with empty `choices`, when the request asks for it (`stream_options`); Gemini
repeats `usageMetadata` (`promptTokenCount`, `candidatesTokenCount`,
`thoughtsTokenCount`) on every chunk, so only the last one counts. Reasoning
is output: Gemini counts thoughts apart from the candidates, and they are
added. Usage only informs: a field of the wrong shape costs the usage (None,
with a warning naming the field), never the reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from toolloop.states import TokenUsage

log = logging.getLogger(__name__)


class _BadUsage(Exception):
    """A usage field is not a count; the message names it."""


def _count(usage: Any, *path: str) -> int:
    """The count at `path` under `usage`: 0 when absent or null, else a non-negative integer."""
    value = usage
    for depth, key in enumerate(path):
        if value is None:
            return 0
        if not isinstance(value, dict):
            raise _BadUsage(f"`{'.'.join(path[:depth]) or 'usage'}` is not an object")
        value = value.get(key)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise _BadUsage(f"`{'.'.join(path)}` is not a count: {value!r:.40}")
    return value


def openai_usage(usage: Any) -> TokenUsage:
    """A chat-completions `usage` object as TokenUsage."""
    return TokenUsage(
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        reasoning_tokens=_count(usage, "completion_tokens_details", "reasoning_tokens"),
    )


def gemini_usage(metadata: Any) -> TokenUsage:
    """A Gemini `usageMetadata` object as TokenUsage: thoughts are output and reasoning."""
    thoughts = _count(metadata, "thoughtsTokenCount")
    return TokenUsage(
        input_tokens=_count(metadata, "promptTokenCount"),
        output_tokens=_count(metadata, "candidatesTokenCount") + thoughts,
        reasoning_tokens=thoughts,
    )


def reported(read: Callable[[Any], TokenUsage], value: Any, where: str) -> TokenUsage | None:
    """The usage a provider reported (None when it sent none); one of the wrong shape is
    logged, naming `where` and the field, and not reported."""
    if value is None:
        return None
    try:
        return read(value)
    except _BadUsage as bad:
        log.warning("%s: the usage is not reported: %s", where, bad)
        return None
