"""The adapter's cost per chunk on llama-server's real stream, beside a bare httpx read.

A tiny model (`tests/servers/tiny_model.py`) with its end-of-sequence tokens
banned by `logit_bias` keeps talking until `max_tokens`, so llama-server
sends one SSE event per token, as it does for any model. The stream is paced
by the server's generation, so wall time measures the server; what is
measured here is this process's CPU time (`time.process_time`, the server is
another process) per chunk: the adapter's `stream()` whole against
`aiter_bytes` over the same request, best of ROUNDS, alternating. Each token
arrives on its own, so both sides pay a wakeup per chunk (about 100 µs here),
which varies more between runs on a busy machine than the adapter's own part;
`bench_openai_compat` isolates that part on a pre-encoded body. Skips,
saying why, when the cached llama-server build is absent (`python -m
tests.servers.build` makes it).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx

from tests.providers.conftest import make_request
from tests.servers import build
from tests.servers.harness import CONTEXT_SIZE, free_port, start, stop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.states import StreamStatus

MODEL = "tiny-plain"
TOKENS = 1500
ROUNDS = 5
#: `</s>` and `<|im_end|>` of the tiny models: banned, so the reply runs to TOKENS.
NO_END = {"2": -100, "4": -100}
EXTRA = {"max_tokens": TOKENS, "logit_bias": NO_END}


class CountingSink:
    """Counts the chunks the adapter reports (one `progress` per event) and drops the text."""

    def __init__(self) -> None:
        self.chunks = 0

    def progress(self) -> None:
        self.chunks += 1

    async def deliver(self, text: str) -> None:
        pass


async def through_adapter(base_url: str, client: httpx.AsyncClient) -> int:
    """One whole stream through the adapter; the number of chunks."""
    provider = OpenAICompatProvider(base_url=base_url, model=MODEL, client=client, extra_body=EXTRA)
    sink = CountingSink()
    result = await provider.stream(make_request(tools=()), sink)
    assert result.status is StreamStatus.COMPLETED, result
    return sink.chunks


async def bare_read(base_url: str, client: httpx.AsyncClient) -> int:
    """The same request read with `aiter_bytes` only; the number of data events it carried."""
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    blocks: list[bytes] = []
    url = f"{base_url}/chat/completions"
    async with client.stream("POST", url, json={**body, **EXTRA}) as response:
        async for block in response.aiter_bytes():
            blocks.append(block)
    return b"".join(blocks).count(b"data: {")


Side = Callable[[str, httpx.AsyncClient], Awaitable[int]]


async def cpu_per_chunk(base_url: str, sides: dict[str, Side]) -> dict[str, float]:
    """The best of ROUNDS runs of each side, in CPU µs per chunk; the sides alternate.

    `chunks` is the count of the last run (the same stream each time: greedy decoding).
    """
    best = dict.fromkeys(sides, float("inf"))
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        for _ in range(ROUNDS):
            for name, side in sides.items():
                started = time.process_time()
                chunks = await side(base_url, client)
                best[name] = min(best[name], (time.process_time() - started) / chunks * 1e6)
    return {**best, "chunks": chunks}


def main() -> None:
    if not build.cpp_server_ready():
        print(f"llama_server: skipped: {build.llama_server_binary()} is not built", flush=True)
        print("  (run `python -m tests.servers.build`, or `make test-servers`)", flush=True)
        return
    from tests.servers.tiny_model import write_all  # gguf and numpy, only when it runs

    with tempfile.TemporaryDirectory() as folder:
        model = write_all(Path(folder))[MODEL]
        port = free_port()
        command = [str(build.llama_server_binary()), "--model", str(model), "--alias", MODEL]
        command += ["--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(CONTEXT_SIZE)]
        command += ["--parallel", "1", "--threads", "2", "--no-webui"]
        root = f"http://127.0.0.1:{port}"
        server = start(command, f"{root}/v1", f"{root}/health", Path(folder) / "server.log")
        try:
            report(server.base_url)
        finally:
            stop(server.process)


def report(base_url: str) -> None:
    sides: dict[str, Side] = {"adapter": through_adapter, "bare_httpx": bare_read}
    for backend in ("trio", "asyncio"):
        best = anyio.run(cpu_per_chunk, base_url, sides, backend=backend)
        adapter, bare = best["adapter"], best["bare_httpx"]
        print(f"llama_server_{backend}_stream: {best['chunks']:.0f} chunks")
        print(f"llama_server_{backend}_adapter: {adapter:.1f} us/chunk (cpu)")
        print(f"llama_server_{backend}_bare_httpx: {bare:.1f} us/chunk (cpu)")
        print(f"llama_server_{backend}_difference: {adapter - bare:.1f} us/chunk (cpu)")


if __name__ == "__main__":
    main()
