"""A chat-completions model in a process of its own, as a bot's model is: uvicorn serving
bench_loop's script over the real protocol, with no pause between chunks. Each reply asks
for `add_one` until the conversation holds as many tool results as the request's `calls`
(else `CALLS`), then answers. Every turn of a bench may connect at once, so the socket
queues `BACKLOG` connections (the stdlib server's 5 reset them).

    python -m tests.bench.model_process CALLS

It prints its base URL on a line of its own, then serves until it is terminated.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from toolloop.testing.model_server import DONE, ROUTE, sse_event

MODEL = "bench-model"
BACKLOG = 4096


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "bench", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}
    return sse_event(chunk)


def replies(calls: int) -> tuple[list[bytes], bytes]:
    """The body asking for the call after `done` results (by `done`), and the answer's."""
    asks = []
    for done in range(calls):
        function = {"name": "add_one", "arguments": json.dumps({"n": done})}
        call = {"index": 0, "id": f"call_{done}", "type": "function", "function": function}
        asks.append(_chunk({"tool_calls": [call]}) + _chunk({}, "tool_calls") + DONE)
    return asks, _chunk({"content": "done"}) + _chunk({}, "stop") + DONE


def app(calls: int) -> Starlette:
    """The model: a request's `calls` (else `calls`) tool calls, one a reply, then an answer."""
    asks, answer = replies(calls)

    async def complete(request: Request) -> StreamingResponse:
        body = await request.json()
        done = sum(1 for message in body["messages"] if message.get("role") == "tool")
        reply = asks[done] if done < body.get("calls", calls) else answer
        return StreamingResponse(iter((reply,)), media_type="text/event-stream")

    return Starlette(routes=[Route(ROUTE, complete, methods=["POST"])])


def serve(calls: int) -> None:
    """Serve on a free loopback port, printed first, until terminated."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(BACKLOG)
    print(f"http://127.0.0.1:{listening.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(app(calls), log_level="warning", backlog=BACKLOG)
    uvicorn.Server(config).run(sockets=[listening])


if __name__ == "__main__":
    serve(int(sys.argv[1]))
