"""Stage 03: the enhanced-context restart (SPEC 6a), as pure context changes."""

from typing import Any

import attrs

from toolloop.states import ContextItem, ContextState

RESTART_PREFIX = "context_restart_"
METADATA_DIRECTIVE = (
    "Message metadata (authors and times) is now revealed in the context above; "
    "do not call the reveal tool again this turn."
)
#: A word in the restart type -> the resource not to fetch again this turn.
DISABLE_FLAGS = {
    "youtube": "youtube",
    "image": "image",
    "gif": "gif",
    "message_metadata": "message_metadata",
}


def restart_type(data: Any) -> str | None:
    """The restart type a successful tool's data asks for, or None."""
    if isinstance(data, dict):
        kind = data.get("type")
        if isinstance(kind, str) and kind.startswith(RESTART_PREFIX):
            return kind
    return None


def pending_context_key(data: dict[str, Any]) -> str | None:
    """The stash key of the enrichment item, when the tool stashed one."""
    key = data.get("pending_context_key")
    return key if isinstance(key, str) and key else None


def apply_restart(context: ContextState, kind: str, item: ContextItem | None) -> ContextState:
    """The context after a restart of `kind`, with the enrichment item appended."""
    disabled = context.disabled | {flag for word, flag in DISABLE_FLAGS.items() if word in kind}
    items, tail = context.items, context.tail_directives
    if "message_metadata" in kind:
        items = tuple(_annotated(entry) for entry in items)
        tail = tail if METADATA_DIRECTIVE in tail else (*tail, METADATA_DIRECTIVE)
    if item is not None:
        items = (*items, item)
    return attrs.evolve(context, items=items, disabled=disabled, tail_directives=tail)


def enhanced_item(data: dict[str, Any]) -> ContextItem | None:
    """The inline enrichment item of a restart, when the tool sent one."""
    item = data.get("enhanced_context_item")
    return None if item is None else ContextItem(kind="enrichment", content=item)


def _annotated(item: ContextItem) -> ContextItem:
    """A message with its author/time references; one line per merged original message."""
    if item.kind != "message":
        return item
    ids = item.message_ids or ("",)
    references = [
        f"[{item.author or 'unknown'} at {item.timestamp or 'unknown time'}]"
        + (f" message {message_id}" if message_id else "")
        for message_id in ids
    ]
    metadata: dict[str, Any] = {"references": references}
    if item.reply_to is not None:
        metadata["reply_to"] = item.reply_to
    return attrs.evolve(item, metadata=metadata)
