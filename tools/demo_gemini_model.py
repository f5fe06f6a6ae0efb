"""The demo's embedded model, speaking Gemini's native protocol (`toolloop demo --provider gemini`).

The same plan as `demo_model` (narrate, call `calculate`, then `get_time`, then
answer with what the tools returned), streamed as `GenerateContentResponse`
chunks by the loopback `GeminiServer`, which refuses a request the way Gemini 3
does when a thought signature is missing or moved. Each reply starts with a
thought part (reasoning the channel never shows) and signs its call, so the
demo exercises the signature round trip with no key.
"""

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

from toolloop.testing.gemini_server import GeminiServer
from toolloop.tools.demo_model import MODEL, PLAN, answer

__all__ = ["MODEL", "chunks", "endpoint"]


def chunks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of the next reply to the conversation in `body`."""
    results = _tool_results(body.get("contents", []))
    if len(results) < len(PLAN):
        name, args, narration = PLAN[len(results)]
        yield _chunk({"text": f"The plan calls for {name} next.", "thought": True})
        yield from _text(narration)
        signature = base64.b64encode(f"demo-signature-{len(results)}".encode()).decode()
        yield _chunk({"functionCall": {"name": name, "args": args}, "thoughtSignature": signature})
        yield _finish()
        return
    yield from _text(answer(results))
    yield _finish()


def _tool_results(contents: list[dict[str, Any]]) -> dict[str, Any]:
    """The tool results in the conversation, by tool name."""
    return {
        part["functionResponse"]["name"]: part["functionResponse"]["response"].get("result")
        for content in contents
        for part in content.get("parts", ())
        if "functionResponse" in part
    }


def _chunk(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "index": 0}]}


def _text(text: str) -> Iterator[dict[str, Any]]:
    words = text.split(" ")
    for index, word in enumerate(words):
        yield _chunk({"text": word + (" " if index < len(words) - 1 else "")})


def _finish() -> dict[str, Any]:
    chunk = _chunk()
    chunk["candidates"][0]["finishReason"] = "STOP"
    return chunk


@contextlib.contextmanager
def endpoint(base_url: str | None) -> Iterator[str]:
    """The given API root, or this model served on loopback for as long as it is used."""
    if base_url is not None:
        yield base_url
        return
    with GeminiServer(chunks, delay=0.04) as server:
        yield server.base_url
