"""Small builders for stream and tool results, so tests read like the SPEC."""

from __future__ import annotations

from typing import Any

from toolloop.states import (
    ApiFamily,
    FunctionCall,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
)

NOVELAI = ProviderDescriptor(name="novelai", api_family=ApiFamily.NOVELAI)


def call(
    name: str = "web_search",
    args: dict[str, Any] | None = None,
    *,
    text: str = "",
    truncated: bool = False,
    details: str = "",
    thought_log: dict[str, Any] | None = None,
    parts: tuple[dict[str, Any], ...] = (),
) -> StreamResult:
    """A `function_call` stream result; `parts` are its model parts."""
    return StreamResult(
        status=StreamStatus.FUNCTION_CALL,
        accumulated_text=text,
        details_content=details,
        thought_log=thought_log,
        data=FunctionCall(name=name, args=args, arguments_truncated=truncated),
        model_parts=parts,
    )


def batch(*calls: FunctionCall, text: str = "") -> StreamResult:
    """A `function_call` stream carrying several calls, in the model's order (SPEC 6b)."""
    return StreamResult(
        status=StreamStatus.FUNCTION_CALL,
        accumulated_text=text,
        data=calls[0],
        calls=calls,
        model_parts=said(text) if text.strip() else (),
    )


def said(text: str) -> tuple[dict[str, Any], ...]:
    """The model parts of a stream that said `text`, as a text-only provider reports them."""
    return ({"type": "text", "text": text},)


def done(
    text: str = "Done.", *, details: str = "", thought_log: dict[str, Any] | None = None
) -> StreamResult:
    """A `completed` stream result."""
    return StreamResult(
        status=StreamStatus.COMPLETED,
        accumulated_text=text,
        details_content=details,
        thought_log=thought_log,
    )


def ended(status: StreamStatus, text: str = "") -> StreamResult:
    """A stream result of any terminal status."""
    error = (
        StreamError(type="x", message="boom")
        if status in (StreamStatus.ERROR, StreamStatus.TIMEOUT)
        else None
    )
    return StreamResult(status=status, accumulated_text=text, data=error)


def ok(data: Any = None, **kwargs: Any) -> ToolResult:
    """A successful tool result."""
    return ToolResult(success=True, data=data, **kwargs)


def fail(error: str = "upstream 503", **kwargs: Any) -> ToolResult:
    """A failed tool result."""
    return ToolResult(success=False, error=error, **kwargs)


def turn(**kwargs: Any) -> TurnSettings:
    """Turn settings with SPEC's defaults and the given changes."""
    return TurnSettings(**kwargs)
