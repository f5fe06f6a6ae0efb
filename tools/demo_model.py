"""The demo's embedded model: a scripted chat-completions "model" that reads the conversation.

It is not a language model, but it answers like one over the real protocol: it
looks at the request (the user's question, the tool results already in the
history) and streams the next move as server-sent-event chunks, word by word.
First it narrates and calls `calculate`, then `get_time`, then it answers with
what the tools really returned. `make demo` serves it on loopback, so the whole
conversation crosses real HTTP with no API key.
"""

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states.errors import ToolloopError
from toolloop.testing.model_server import ModelServer

MODEL = "toolloop-demo"
KEY_VARIABLE = "OPENAI_API_KEY"
PLAN = (
    ("calculate", {"expression": "17 * 23 + 4"}, "Let me work out the sum first."),
    ("get_time", {"timezone": "Asia/Tokyo"}, "Now the time in Tokyo."),
)


def chunks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunk objects of the next reply to the conversation in `body`."""
    results = _tool_results(body.get("messages", []))
    if len(results) < len(PLAN):
        name, args, narration = PLAN[len(results)]
        yield from _text(narration)
        yield _tool_call(f"call_{len(results)}", name, args)
        yield _finish("tool_calls")
        return
    yield from _text(answer(results))
    yield _finish("stop")


def answer(results: dict[str, Any]) -> str:
    """The final answer, from the tool results by tool name."""
    total, clock = results.get("calculate") or {}, results.get("get_time") or {}
    return (
        f"17 × 23 + 4 is {total.get('value', '?')}, and in Tokyo it is now "
        f"{clock.get('time', '?')} ({clock.get('weekday', '?')})."
    )


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The tool results in the history, by tool name."""
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        for call in message.get("tool_calls") or ()
    }
    results: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool":
            name = names.get(message.get("tool_call_id", ""), "")
            results[name] = json.loads(message.get("content") or "null")
    return results


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "demo", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}


def _text(text: str) -> Iterator[dict[str, Any]]:
    words = text.split(" ")
    for index, word in enumerate(words):
        yield _chunk({"content": word + (" " if index < len(words) - 1 else "")})


def _tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(args)}
    return _chunk(
        {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": function}]}
    )


def _finish(reason: str) -> dict[str, Any]:
    return _chunk({}, reason)


@contextlib.contextmanager
def endpoint(base_url: str | None) -> Iterator[str]:
    """The given endpoint, or this model served on loopback for as long as it is used."""
    if base_url is not None:
        yield base_url
        return
    with ModelServer(chunks) as server:
        yield server.base_url


class BadKey(ToolloopError, ValueError):
    """The API key in `OPENAI_API_KEY` is one the provider refuses (its message never quotes it)."""


def provider(
    url: str,
    *,
    base_url: str | None,
    model: str | None,
    key: str | None,
    accepts_images: bool = False,
) -> OpenAICompatProvider:
    """The provider for `endpoint(base_url)`'s `url`; a key the provider refuses raises `BadKey`.

    The embedded model (no `base_url`) needs no key, so none is sent to it and a
    stray one in the environment is not even read; it reads no images either, so
    `accepts_images` (the endpoint's model reads images) is for `base_url` only.
    """
    if base_url is None:
        return OpenAICompatProvider(base_url=url, model=model or MODEL, name="demo")
    try:
        return OpenAICompatProvider(
            base_url=url,
            model=model or MODEL,
            api_key=key or None,
            name="endpoint",
            accepts_images=accepts_images,
        )
    except ValueError as error:  # with no headers or extra body given, only the key is checked
        raise BadKey(f"{KEY_VARIABLE}: {error}") from None
