"""A running turn's trace goes to its file step by step and reads back whole."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from tests.effects.harness import ScriptProvider, calling, completed
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.observe.trace_file import TraceWriter, trace_file
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.trace import TraceError, load_bytes, replay
from toolloop.states import JsonObject, LoopConfig, StreamResult, TurnSettings


async def search(args: JsonObject, call: ToolCall) -> JsonObject:
    return {"hits": 3}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(search)
    return tools


async def a_turn(observer: TraceWriter, provider: ScriptProvider | None = None) -> None:
    await run_tool_loop(
        turn=TurnSettings(),
        config=LoopConfig(),
        provider=provider or ScriptProvider(calling("search", {"q": "x"}), completed()),
        registry=registry(),
        channel=RecordingChannel(),
        control=MemoryTurnControl(),
        observer=observer.observe,
    )


def step_lines(text: str) -> int:
    return text.count('{"kind": "step"')


def test_each_step_is_in_the_file_before_the_next_provider_call() -> None:
    """Streamed, not built in memory: the second call sees the first iteration already written."""
    file = io.StringIO()
    writer = TraceWriter(file)
    seen: list[int] = []

    async def look(request: StreamRequest, sink: StreamSink) -> StreamResult:
        seen.append(step_lines(file.getvalue()))
        return await completed()(request, sink)

    provider = ScriptProvider(calling("search", {"q": "x"}), look)
    anyio.run(a_turn, writer, provider)
    # TurnStarted, the call's StreamEnded, the tool's ToolSettled: three steps before call two
    assert seen == [3]
    assert '{"kind": "end"' not in file.getvalue()
    writer.close()
    assert file.getvalue().endswith('{"kind": "end", "steps": 4}\n')


def test_the_file_reads_back_and_replays(tmp_path: Path) -> None:
    """`trace_file` writes a whole trace: it loads, ends with its step count and replays."""
    path = tmp_path / "turn.jsonl"
    with trace_file(path) as writer:
        anyio.run(a_turn, writer)
    trace = load_bytes(path.read_bytes())
    assert [record.move for record in trace.steps] == [
        "started",
        "dispatched",
        "tool_succeeded",
        "completed",
    ]
    assert replay(trace) == []


def test_a_turn_that_raised_is_recorded_to_its_last_step(tmp_path: Path) -> None:
    """The block raising still writes the end line: everything the loop did was recorded."""
    path = tmp_path / "turn.jsonl"
    with pytest.raises(RuntimeError, match=r"^host gave up$"), trace_file(path) as writer:
        anyio.run(a_turn, writer)
        raise RuntimeError("host gave up")
    assert len(load_bytes(path.read_bytes()).steps) == 4


class FullDisk(io.StringIO):
    """A file whose writes fail after the first, as on a disk that fills up."""

    def write(self, text: str) -> int:
        if self.tell():
            raise OSError(28, "No space left on device")
        return super().write(text)


def test_a_failed_write_leaves_the_turn_alone_and_close_raises_it() -> None:
    """The turn completes; the file keeps no end line; `close` raises the write's error."""
    file = FullDisk()
    writer = TraceWriter(file)
    anyio.run(a_turn, writer)
    with pytest.raises(OSError, match="No space left on device"):
        writer.close()
    with pytest.raises(TraceError, match="without its end line"):
        load_bytes(file.getvalue().encode())
