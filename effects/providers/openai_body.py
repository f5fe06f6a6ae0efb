"""The chat-completions request body of one stream, built from its `StreamRequest`.

The mapping:

* a context item of kind `message` is a `user` message, or an `assistant`
  message when its author is the turn's persona; a user message is prefixed
  `"{author}: "`, and the reference lines of revealed metadata come first;
  a user message with images is in the content-part form (its text, then an
  `image_url` part per image); a host adds images only when the provider
  `accepts_images`;
* an item of kind `system` is a `system` message as is; any other kind
  (enrichment) is a `system` message headed `[{kind}]`;
* each tail directive is a `system` message after the context;
* each history entry is an assistant message with `tool_calls` whose content is
  the entry's pre-tool text ("" when none, never null), then the `tool`
  message with the JSON result;
* the text of the accumulated model parts is a final assistant message (prefill);
* the tools are `tools: [{"type": "function", "function": {...}}]`;
* `stream_options: {"include_usage": true}` asks for the token usage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from toolloop.effects.ports import StreamRequest
from toolloop.states import ContextItem, FunctionCall, JsonObject, ToolHistoryEntry, ToolSpec

#: Body keys the adapter owns; `extra_body` may not set them.
RESERVED_BODY_KEYS = frozenset({"messages", "stream", "tools"})
#: Body keys that servers reject when no tools are sent.
TOOL_ONLY_BODY_KEYS = ("tool_choice", "parallel_tool_calls")


def build_body(request: StreamRequest, model: str, extra_body: Mapping[str, Any]) -> JsonObject:
    """The chat-completions request body of one stream (mapping in the module docstring)."""
    once = request.once
    messages = [
        *(context_message(item, request.turn.persona.name) for item in once.context),
        *({"role": "system", "content": text} for text in once.tail_directives),
        *history_messages(once.function_history),
        *prefill_messages(once.accumulated_model_parts),
    ]
    body: JsonObject = {
        "model": model,
        "messages": messages,
        "stream": True,
        # The usage chunk at the stream's end; `extra_body` may turn it off
        # (`{"include_usage": False}`) or drop the field (`None`) for a server that refuses it.
        "stream_options": {"include_usage": True},
        **extra_body,
    }
    if body["stream_options"] is None:
        del body["stream_options"]  # `extra_body={"stream_options": None}`: a server refuses it.
    if request.tools:
        body["tools"] = [tool_schema(tool) for tool in request.tools]
    else:
        for key in TOOL_ONLY_BODY_KEYS:
            body.pop(key, None)
    return body


def context_message(item: ContextItem, persona_name: str) -> JsonObject:
    """One context item as a chat message."""
    text = _as_text(item.content)
    if item.kind == "system":
        return {"role": "system", "content": text}
    if item.kind != "message":
        return {"role": "system", "content": f"[{item.kind}]\n{text}"}
    if item.author == persona_name:
        return {"role": "assistant", "content": _with_references(item, text)}
    spoken = _with_references(item, f"{item.author}: {text}" if item.author else text)
    if not item.images:
        return {"role": "user", "content": spoken}
    images = [{"type": "image_url", "image_url": {"url": url}} for url in item.images]
    return {"role": "user", "content": [{"type": "text", "text": spoken}, *images]}


def _with_references(item: ContextItem, text: str) -> str:
    """The text under the reference lines of revealed metadata (SPEC 6a), if any."""
    metadata = item.metadata or {}
    lines = [str(line) for line in metadata.get("references", ())]
    if metadata.get("reply_to") is not None:
        lines.append(f"(in reply to {metadata['reply_to']})")
    return "\n".join([*lines, text])


def _as_text(content: Any) -> str:
    """Content as message text: strings as they are, anything else as JSON."""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def history_messages(history: tuple[ToolHistoryEntry, ...]) -> Iterator[JsonObject]:
    """Each reply's calls as one assistant turn, then one tool message per call.

    The assistant turn carries every call the model made in that reply (the
    entries of a batch, `same_turn`) with the pre-tool text; the `tool`
    messages follow in the same order, each matched to its call by id.
    """
    turn: JsonObject | None = None
    replies: list[JsonObject] = []
    for number, entry in enumerate(history):
        call = entry.function_call
        call_id = call_id_of(call, number)
        tool_call = {
            **call.passthrough.get("tool_call", {}),
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args or {})},
        }
        if turn is None or not entry.same_turn:
            if turn is not None:
                yield turn
                yield from replies
            turn = {
                **call.passthrough.get("message", {}),
                "role": "assistant",
                "content": _parts_text(entry.pre_tool_call_text_parts or ()),
                "tool_calls": [],
            }
            replies = []
        turn["tool_calls"].append(tool_call)
        result = json.dumps(entry.response, ensure_ascii=False)
        replies.append({"role": "tool", "tool_call_id": call_id, "content": result})
    if turn is not None:
        yield turn
        yield from replies


def call_id_of(call: FunctionCall, number: int) -> str:
    """The call's id (the provider's, or the one the adapter made), or `call_{number}`
    (its place in the history) for a call that came without one."""
    if call.call_id:
        return call.call_id
    passed = call.passthrough.get("id")
    return passed if isinstance(passed, str) and passed else f"call_{number}"


def prefill_messages(parts: tuple[JsonObject, ...]) -> Iterator[JsonObject]:
    """The accumulated model parts as the model's own last turn (SPEC 3), when not blank.

    They are what the model said earlier in this attempt that no history entry
    owns (the text of a stream that ended in a context restart): ending the
    messages with it as an `assistant` turn tells the model it already said
    it, and a server that continues a trailing assistant turn (llama.cpp) picks
    up right after it.
    """
    text = _parts_text(parts)
    if text.strip():
        yield {"role": "assistant", "content": text}


def model_parts(text: str) -> tuple[JsonObject, ...]:
    """A stream's visible text as its model parts: one text part, none when blank (SPEC 3)."""
    return ({"type": "text", "text": text},) if text.strip() else ()


def _parts_text(parts: tuple[JsonObject, ...]) -> str:
    """The joined text of the `{"type": "text", "text": ...}` parts; other parts are skipped."""
    return "".join(
        part["text"]
        for part in parts
        if part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def tool_schema(tool: ToolSpec) -> JsonObject:
    """A tool as the `tools` array wants it."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}
