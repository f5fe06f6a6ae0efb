"""The request body of Gemini's `streamGenerateContent`: context, history, model parts, tools.

Gemini 3 checks thought signatures on the model turns of the current turn: a
`functionCall` part that came with a `thoughtSignature` must come back with
it, on the same part, byte for byte, or the request is refused (HTTP 400,
"Function call is missing a thought_signature in functionCall parts"). So the
parts the model sent are never rebuilt from the loop's data: each call of a
Gemini stream carries, in its passthrough, the exact parts of the model turn
that lead up to it (`gemini.parts`, see `gemini.py`), and the calls of one
stream share a turn key (`gemini.turn`). Replaying the history puts each
stream's parts back as one model turn, then one user turn with a
`functionResponse` per call, in the calls' order.

A call Gemini did not make (one from another model of the fallback chain, or
a history entry the loop injected) has no parts to replay: its model turn is
built, and its first `functionCall` part carries `SKIP_SIGNATURE`, the value
Google documents for exactly this case.

The mapping:

* a context item of kind `system` and every tail directive join
  `systemInstruction`, in order;
* a `message` item is a `model` turn when its author is the persona, else a
  `user` turn prefixed `"{author}: "` (with the reference lines, as the
  OpenAI-compatible adapter writes them); an enrichment item is a `user`
  turn headed `[{kind}]`;
* the history as above;
* the accumulated model parts (what the model said this attempt that no
  history entry owns) are a last `model` turn, without their `functionCall`
  parts (a call without its response is refused);
* the tools are one `functionDeclarations` list, with JSON Schema parameters
  (`parametersJsonSchema`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolloop.effects.ports import StreamRequest
from toolloop.effects.providers.openai_body import context_message
from toolloop.states import FunctionCall, JsonObject, ToolHistoryEntry, ToolSpec

#: The signature Google documents for function calls the model did not make.
SKIP_SIGNATURE = "skip_thought_signature_validator"
#: The passthrough key of a Gemini call: `{"turn": key, "parts": [...]}`.
PASSTHROUGH_KEY = "gemini"
#: Body keys the adapter owns; `extra_body` may not set them.
RESERVED_BODY_KEYS = frozenset({"contents", "systemInstruction", "tools"})


def build_body(request: StreamRequest, extra_body: Mapping[str, Any]) -> JsonObject:
    """The `streamGenerateContent` request body of one stream (mapping in the module docstring)."""
    once = request.once
    persona = request.turn.persona.name
    system: list[JsonObject] = []
    contents: list[JsonObject] = []
    for item in once.context:
        message = context_message(item, persona)
        part = {"text": message["content"]}
        if item.kind == "system":
            system.append(part)
        else:
            role = "model" if message["role"] == "assistant" else "user"
            contents.append({"role": role, "parts": [part]})
    system.extend({"text": text} for text in once.tail_directives)
    contents.extend(history_contents(once.function_history))
    prefill = [part for part in once.accumulated_model_parts if "functionCall" not in part]
    if prefill:
        contents.append({"role": "model", "parts": prefill})
    body: JsonObject = {"contents": contents, **extra_body}
    if system:
        body["systemInstruction"] = {"parts": system}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [declaration(t) for t in request.tools]}]
    return body


def declaration(tool: ToolSpec) -> JsonObject:
    """A tool as a Gemini function declaration."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": tool.parameters,
    }


def history_contents(history: tuple[ToolHistoryEntry, ...]) -> Iterator[JsonObject]:
    """Each stream's calls as one model turn, then one user turn answering them in order."""
    for group in _by_turn(history):
        if _native(group[0].function_call) is None:
            parts = _built_turn(group[0])
        else:
            parts = [part for entry in group for part in _native(entry.function_call) or ()]
        yield {"role": "model", "parts": parts}
        responses = [_response_part(entry) for entry in group]
        yield {"role": "user", "parts": responses}


def _by_turn(history: tuple[ToolHistoryEntry, ...]) -> Iterator[list[ToolHistoryEntry]]:
    """Consecutive entries of one Gemini stream together; any other entry alone."""
    group: list[ToolHistoryEntry] = []
    for entry in history:
        key = _turn_key(entry.function_call)
        if group and (key is None or key != _turn_key(group[0].function_call)):
            yield group
            group = []
        group.append(entry)
    if group:
        yield group


def _turn_key(call: FunctionCall) -> str | None:
    passthrough = call.passthrough.get(PASSTHROUGH_KEY)
    return passthrough.get("turn") if isinstance(passthrough, dict) else None


def _native(call: FunctionCall) -> list[JsonObject] | None:
    """The Gemini parts a call carries (as they arrived), or None for a call Gemini did not make."""
    passthrough = call.passthrough.get(PASSTHROUGH_KEY)
    parts = passthrough.get("parts") if isinstance(passthrough, dict) else None
    return parts if isinstance(parts, list) else None


def _built_turn(entry: ToolHistoryEntry) -> list[JsonObject]:
    """The model turn of a call Gemini did not make: its pre-tool text, the call, the skip value."""
    call = entry.function_call
    parts: list[JsonObject] = [
        {"text": part["text"]}
        for part in entry.pre_tool_call_text_parts or ()
        if isinstance(part.get("text"), str)
    ]
    parts.append(
        {
            "functionCall": {"name": call.name, "args": call.args or {}},
            "thoughtSignature": SKIP_SIGNATURE,
        }
    )
    return parts


def _response_part(entry: ToolHistoryEntry) -> JsonObject:
    """A `functionResponse` part: the call's name (and Gemini's id, if it gave one), the result."""
    call = entry.function_call
    response: JsonObject = {"name": call.name, "response": entry.function_response["response"]}
    given: JsonObject = next(
        (p["functionCall"] for p in _native(call) or () if "functionCall" in p), {}
    )
    if isinstance(given.get("id"), str):
        response["id"] = given["id"]
    return {"functionResponse": response}
