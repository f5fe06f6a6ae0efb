"""Recorded Gemini transcripts, built with the official `google.genai.types`.

Each builder returns the JSON chunks Gemini streams (camelCase, as on the
wire), so the loopback server replays exactly what the official client
would parse; `tests/providers/test_gemini_wire.py` checks that it does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from google.genai import types

from toolloop.testing.gemini_server import GeminiError, GeminiResponder

Chunk = dict[str, Any]


def text(value: str, *, signature: bytes | None = None) -> types.Part:
    return types.Part(text=value, thought_signature=signature)


def thought(value: str, *, signature: bytes | None = None) -> types.Part:
    return types.Part(text=value, thought=True, thought_signature=signature)


def call(name: str, args: dict[str, Any], *, signature: bytes | None = None) -> types.Part:
    return types.Part(
        function_call=types.FunctionCall(name=name, args=args), thought_signature=signature
    )


def chunk(
    *parts: types.Part,
    finish: str | None = None,
    usage: int | types.GenerateContentResponseUsageMetadata | None = None,
) -> Chunk:
    """One `GenerateContentResponse` as JSON; `usage` sets the prompt token count, or all."""
    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=list(parts)),
                finish_reason=None if finish is None else types.FinishReason(finish),
            )
        ],
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=usage)
        if isinstance(usage, int)
        else usage,
    )
    dumped: Chunk = response.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def blocked(reason: str) -> Chunk:
    """A prompt Gemini refused: no candidates, `promptFeedback.blockReason`."""
    response = types.GenerateContentResponse(
        prompt_feedback=types.GenerateContentResponsePromptFeedback(
            block_reason=types.BlockedReason(reason)
        )
    )
    dumped: Chunk = response.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


# -- the transcripts, one per part kind and end reason ---------------------------------------

SIG_A, SIG_B, SIG_C, SIG_D = b"sig-a\x00\xff", b"sig-b", b"sig-c", b"sig-d"


def plain_text() -> list[Chunk]:
    return [chunk(text("Sunny ")), chunk(text("in Paris.")), chunk(text(""), finish="STOP")]


def thinking_then_text() -> list[Chunk]:
    """Reasoning first (signed), then the answer; the last chunk signs an empty text part."""
    return [
        chunk(thought("The user wants ")),
        chunk(thought("the weather.", signature=SIG_A)),
        chunk(text("Sunny.")),
        chunk(text("", signature=SIG_B), finish="STOP", usage=12),
    ]


def one_call() -> list[Chunk]:
    return [
        chunk(thought("Look it up.")),
        chunk(call("get_weather", {"city": "Paris"}, signature=SIG_A), finish="STOP"),
    ]


def parallel_calls() -> list[Chunk]:
    """Two calls in one reply: only the first is signed, as Gemini does."""
    return [
        chunk(text("Checking both.")),
        chunk(
            call("get_weather", {"city": "Paris"}, signature=SIG_A),
            call("get_weather", {"city": "Rome"}),
        ),
        chunk(finish="STOP", usage=30),
    ]


def ended(reason: str, *parts: types.Part) -> list[Chunk]:
    """A reply that ends with `reason` after `parts`."""
    return [chunk(*parts, finish=reason)]


def scripted(*replies: Iterable[Chunk] | GeminiError) -> GeminiResponder:
    """A responder that answers request n with reply n, then fails the test if asked again."""
    queue: Iterator[Iterable[Chunk] | GeminiError] = iter(replies)

    def respond(body: dict[str, Any]) -> Iterable[Chunk] | GeminiError:
        return next(queue, GeminiError(500, "INTERNAL", "the script ran out"))

    return respond
