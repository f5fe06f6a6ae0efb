"""The Gemini adapter's cost per chunk over loopback HTTP, beside the OpenAI-compatible one.

Both servers send a pre-encoded body of CHUNKS text chunks, each as its
protocol shapes it (Gemini's `GenerateContentResponse` repeats the usage and
model version in every chunk, OpenAI's chunk carries id, model and one
choice), and the adapters run `stream()` whole: request, SSE decoding, JSON,
part or delta handling, progress and delivery to a sink that does nothing.
Reported per backend: µs per chunk for each adapter and their ratio, each the
best of ROUNDS runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx

from tests.bench.bench_openai_compat import NullSink
from tests.bench.bench_openai_compat import body as openai_body
from tests.openai_server import OpenAIServer, raw_reply
from tests.providers.conftest import make_request
from toolloop.effects.providers.gemini import GeminiProvider
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states import StreamStatus
from toolloop.testing import GeminiServer

CHUNKS = 100_000
ROUNDS = 3
USAGE = {"promptTokenCount": 812, "candidatesTokenCount": 40, "totalTokenCount": 852}


def gemini_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": USAGE,
        "modelVersion": "gemini-3-pro",
        "responseId": "bench",
    }


def gemini_body() -> bytes:
    """CHUNKS text chunks, then the one with `finishReason`, as Gemini frames them."""
    chunks = [gemini_chunk(f" tok{n % 10}") for n in range(CHUNKS)]
    chunks.append(gemini_chunk("", "STOP"))
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


async def through_gemini(server: GeminiServer, client: httpx.AsyncClient) -> None:
    provider = GeminiProvider(base_url=server.base_url, model="m", api_key="", client=client)
    result = await provider.stream(make_request(), NullSink())
    assert result.status is StreamStatus.COMPLETED, result


async def through_openai(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    provider = OpenAICompatProvider(base_url=server.base_url, model="m", client=client)
    result = await provider.stream(make_request(), NullSink())
    assert result.status is StreamStatus.COMPLETED, result


async def best_of(
    prepare: Callable[[], None], side: Callable[..., Awaitable[None]], server: Any
) -> float:
    """The fastest of ROUNDS runs of `side`, in µs per chunk."""
    best = float("inf")
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        for _ in range(ROUNDS):
            prepare()
            start = time.perf_counter()
            await side(server, client)
            best = min(best, time.perf_counter() - start)
    return best / CHUNKS * 1e6


def main() -> None:
    gemini_payload, openai_payload = gemini_body(), openai_body()
    with GeminiServer(lambda body: [gemini_payload]) as gemini, OpenAIServer() as openai:
        for backend in ("trio", "asyncio"):
            native = anyio.run(best_of, lambda: None, through_gemini, gemini, backend=backend)
            compat = anyio.run(
                best_of,
                lambda: openai.script(raw_reply(openai_payload)),
                through_openai,
                openai,
                backend=backend,
            )
            print(f"gemini_{backend}_adapter: {native:.2f} us/chunk")
            print(f"openai_compat_{backend}_adapter: {compat:.2f} us/chunk")
            print(f"gemini_{backend}_ratio_to_openai_compat: {native / compat:.2f} x")


if __name__ == "__main__":
    main()
