"""The OpenAI-compatible adapter's cost per chunk over loopback HTTP, beside a bare httpx read.

The loopback server sends the same pre-encoded body (100k content chunks, as
OpenAI shapes them) to both sides. The adapter side runs `stream()` whole:
request, SSE decoding, one `json.loads` per chunk, delta handling, progress
and delivery to a sink that does nothing. The bare side only reads the bytes
with `aiter_bytes`. Reported per backend: µs per chunk for each, their
difference (what decoding and delta handling cost) and their ratio, each the
best of several rounds; and, as the machine's floor, `json.loads` alone on
the same chunks. Target: the whole path at most 10 µs per chunk.

Then one event whose `data:` line is LONG_LINES_MB megabytes (a reply sent as a
single chunk): ms per MB for each size, which stays flat when reading a line
is linear in its length.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

import anyio
import httpx

from tests.openai_server import DONE, OpenAIServer, chunk, raw_reply
from tests.providers.conftest import make_request
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states import StreamStatus

CHUNKS = 100_000
ROUNDS = 3
LONG_LINES_MB = (2, 8, 14)


class NullSink:
    """A sink that costs as little as a sink can."""

    def progress(self) -> None:
        pass

    async def deliver(self, text: str) -> None:
        pass


def body() -> bytes:
    """The SSE body: a role chunk, CHUNKS content chunks, a finish chunk and `[DONE]`."""
    lines = [json.dumps(chunk({"content": f" tok{n % 10}"})) for n in range(CHUNKS)]
    events = b"".join(b"data: " + line.encode() + b"\n\n" for line in lines)
    return events + b"data: " + json.dumps(chunk({}, "stop")).encode() + b"\n\n" + DONE


async def through_adapter(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    provider = OpenAICompatProvider(base_url=server.base_url, model="m", client=client)
    result = await provider.stream(make_request(), NullSink())
    assert result.status is StreamStatus.COMPLETED, result


async def bare_read(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    url = server.base_url + "/chat/completions"
    async with client.stream("POST", url, json={"stream": True}) as response:
        async for _ in response.aiter_bytes():
            pass


async def best_of(
    server: OpenAIServer, payload: bytes, side: Callable[..., Awaitable[None]]
) -> float:
    """The fastest of ROUNDS runs of `side`, in µs per chunk."""
    best = float("inf")
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        for _ in range(ROUNDS):
            server.script(raw_reply(payload))
            start = time.perf_counter()
            await side(server, client)
            best = min(best, time.perf_counter() - start)
    return best / CHUNKS * 1e6


def json_floor(payload: bytes) -> float:
    """The best of ROUNDS `json.loads` passes over the chunks alone, in µs per chunk."""
    lines = [line[6:] for line in payload.decode().split("\n") if line.startswith("data: {")]
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for line in lines:
            json.loads(line)
        best = min(best, time.perf_counter() - start)
    return best / CHUNKS * 1e6


def long_line_body(megabytes: int) -> bytes:
    """One content chunk whose `data:` line is `megabytes` MB long, a finish chunk and `[DONE]`."""
    line = json.dumps(chunk({"content": "x" * (megabytes * 1024 * 1024)})).encode()
    stop = json.dumps(chunk({}, "stop")).encode()
    return b"data: " + line + b"\n\ndata: " + stop + b"\n\n" + DONE


async def long_line(server: OpenAIServer, payload: bytes) -> float:
    """The fastest of ROUNDS streams of `payload` through the adapter, in seconds."""
    best = float("inf")
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        for _ in range(ROUNDS):
            server.script(raw_reply(payload))
            start = time.perf_counter()
            await through_adapter(server, client)
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    payload = body()
    print(f"openai_compat_json_loads_floor: {json_floor(payload):.2f} us/chunk")
    with OpenAIServer() as server:
        for backend in ("trio", "asyncio"):
            adapter = anyio.run(best_of, server, payload, through_adapter, backend=backend)
            bare = anyio.run(best_of, server, payload, bare_read, backend=backend)
            print(f"openai_compat_{backend}_adapter: {adapter:.2f} us/chunk")
            print(f"openai_compat_{backend}_bare_httpx: {bare:.2f} us/chunk")
            print(f"openai_compat_{backend}_decoding: {adapter - bare:.2f} us/chunk")
            print(f"openai_compat_{backend}_ratio: {adapter / bare:.1f} x")
        for megabytes in LONG_LINES_MB:
            payload = long_line_body(megabytes)
            seconds = anyio.run(long_line, server, payload, backend="trio")
            print(f"openai_compat_long_line_{megabytes}mb: {seconds * 1e3 / megabytes:.1f} ms/MB")


if __name__ == "__main__":
    main()
