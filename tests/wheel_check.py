"""What a user's `import toolloop` gives, run in a fresh venv that holds only the built wheel.

`make wheel-check` runs this file with that venv's Python (stdlib and the wheel
only, no test tools): importing toolloop loads neither trio nor rich, and one
real tool-calling turn over loopback HTTP completes under both anyio backends.
"""

import json
import sys
from collections.abc import Iterator
from typing import Any

import anyio

import toolloop
import toolloop.testing


def responder(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Ask for `add` once, then say what it returned."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if not results:
        call = {"index": 0, "id": "c1", "function": {"name": "add", "arguments": '{"a": 2}'}}
        yield chunk({"tool_calls": [call]}, "tool_calls")
    else:
        yield chunk({"content": f"The sum is {json.loads(results[0])['sum']}."}, "stop")


registry = toolloop.ToolRegistry()


@registry.tool(parameters={"type": "object", "properties": {"a": {"type": "integer"}}})
async def add(args: dict[str, Any], call: toolloop.ToolCall) -> dict[str, Any]:
    """Add 40."""
    return {"sum": args["a"] + 40}


async def one_turn(base_url: str) -> str:
    channel = toolloop.testing.RecordingChannel()
    async with toolloop.OpenAICompatProvider(base_url=base_url, model="m") as provider:
        result = await toolloop.run_tool_loop(
            turn=toolloop.TurnSettings(),
            config=toolloop.LoopConfig(),
            provider=provider,
            registry=registry,
            channel=channel,
            control=toolloop.MemoryTurnControl(),
        )
    return f"{result.status.value} | {channel.text}"


def main() -> None:
    leaked = sorted({"trio", "rich"} & set(sys.modules))
    assert not leaked, f"import toolloop loaded {leaked}"
    assert "site-packages" in (toolloop.__file__ or ""), toolloop.__file__
    with toolloop.testing.ModelServer(responder, delay=0) as server:
        for backend in ("asyncio", "trio"):
            said = anyio.run(one_turn, server.base_url, backend=backend)
            assert said == "completed | The sum is 42.", said
            print(f"import toolloop, one turn under {backend}: {said}")


if __name__ == "__main__":
    main()
