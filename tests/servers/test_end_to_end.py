"""The real adapter and the whole loop against llama.cpp's two servers.

Each test runs `run_tool_loop` (or one `OpenAICompatProvider.stream` for a
quirk) with the real `ToolRegistry` and a real `get_weather` tool against a
server started by the fixtures; the tiny models answer fixed text, so every
assertion is exact. The quirks are handled in the adapter: these tests only
point it at the servers that have them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import pytest

from tests.servers.harness import (
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    Endpoint,
    Endpoints,
    RunningServer,
)
from tests.servers.tiny_model import GET_WEATHER_TOOL, PLAIN, VERBATIM, WEATHER, WEATHER_TEXT
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.ports import StreamRequest, StreamSink
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.engine.commands import StreamOnce
from toolloop.states import (
    ContextItem,
    FunctionCall,
    GenerationTurnResult,
    JsonObject,
    LoopConfig,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

PARIS = {"city": "Paris"}
NAMED_TOOL_CHOICE = {"type": "function", "function": {"name": "get_weather"}}
#: The tiny models' end-of-sequence tokens (`</s>`, `<|im_end|>`), banned to keep one talking.
NO_END = {"2": -100, "4": -100}
#: Long enough that the server is still generating when the client goes away.
LONG_REPLY_TOKENS = 1500


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(main, backend="trio")


def _provider(endpoint: Endpoint, client: httpx.AsyncClient, **extra: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        base_url=endpoint.base_url,
        model=endpoint.model.name,
        server=endpoint.server,
        extra_body=extra,
        client=client,
    )


def _turn(question: str = "What is the weather in Paris?") -> TurnSettings:
    return TurnSettings(context=(ContextItem(author="user", content=question),))


@attrs.define
class Weather:
    """The real tool: records its calls; `end_turn` ends the turn with its result."""

    end_turn: bool = False
    calls: list[JsonObject] = attrs.field(factory=list)

    async def __call__(self, args: JsonObject, call: ToolCall) -> ToolResult:
        self.calls.append(args)
        return ToolResult(success=True, data={**args, "sky": "sunny"}, end_turn=self.end_turn)

    def registry(self) -> ToolRegistry:
        tool: Any = GET_WEATHER_TOOL["function"]
        registry = ToolRegistry()
        registry.register(
            self, name=tool["name"], description=tool["description"], parameters=tool["parameters"]
        )
        return registry


@attrs.define
class Run:
    """What one loop run left: its result, the channel and the tool."""

    result: GenerationTurnResult
    channel: RecordingChannel
    weather: Weather


async def _loop(
    provider: Any,
    weather: Weather | None = None,
    *,
    verbatim: bool = False,
    channel: RecordingChannel | None = None,
    control: MemoryTurnControl | None = None,
    turn: TurnSettings | None = None,
) -> Run:
    weather = weather or Weather()
    channel = channel or RecordingChannel()
    result = await run_tool_loop(
        turn=turn or _turn(),
        config=LoopConfig(),
        provider=provider,
        registry=weather.registry(),
        channel=channel,
        control=control or MemoryTurnControl(),
        verbatim=verbatim,
    )
    return Run(result, channel, weather)


def _loop_on(endpoint: Endpoint, **extra: Any) -> Run:
    async def main() -> Run:
        async with httpx.AsyncClient() as client:
            return await _loop(_provider(endpoint, client, **extra))

    result: Run = _run(main)
    return result


class ForcedFirst:
    """A provider that forces the tool call on the first request only, the way each server allows.

    The adapter's extra body is per provider, so the first request (empty
    history) goes to one with `tool_choice` and the later ones to one without:
    a forced choice on every request would loop on the tool forever.
    """

    def __init__(self, endpoint: Endpoint, client: httpx.AsyncClient) -> None:
        choice = NAMED_TOOL_CHOICE if endpoint.server == LLAMA_CPP_PYTHON else "required"
        self.forced = _provider(endpoint, client, tool_choice=choice)
        self.free = _provider(endpoint, client)

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self.free.descriptor

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        chosen = self.free if request.once.function_history else self.forced
        return await chosen.stream(request, sink)


def _forced_run(endpoint: Endpoint) -> Run:
    async def main() -> Run:
        async with httpx.AsyncClient() as client:
            return await _loop(ForcedFirst(endpoint, client))

    result: Run = _run(main)
    return result


# -- the loop end to end ---------------------------------------------------------------------


def test_plain_completion_delivers_the_exact_text(endpoints: Endpoints, server_kind: str) -> None:
    """A plain streamed completion delivers the exact answer to the channel and completes."""
    run = _loop_on(endpoints.get(server_kind, PLAIN.name))
    assert (run.channel.text, run.result.status) == ("Tea is ready ☕ enjoy.", TurnStatus.COMPLETED)


def test_max_tokens_cut_is_a_completed_reply_of_the_first_tokens(
    endpoints: Endpoints, server_kind: str
) -> None:
    """A reply cut by max_tokens (finish `length`) completes with the tokens that came."""
    run = _loop_on(endpoints.get(server_kind, PLAIN.name), max_tokens=2)
    assert (run.channel.text, run.result.status) == ("Tea is", TurnStatus.COMPLETED)


def test_forced_native_call_runs_the_tool_and_a_second_call_completes(
    endpoints: Endpoints, server_kind: str
) -> None:
    """A forced native call runs get_weather with Paris, and the model call after it completes."""
    run = _forced_run(endpoints.get(server_kind, WEATHER.name))
    statuses = [r.status for r in run.result.stream_results]
    assert (run.weather.calls, statuses, run.result.status) == (
        [PARIS],
        [StreamStatus.FUNCTION_CALL, StreamStatus.COMPLETED],
        TurnStatus.COMPLETED,
    )


def test_second_call_after_the_tool_says_the_answer(endpoints: Endpoints, server_kind: str) -> None:
    """The model call after the tool result streams the weather model's answer."""
    run = _forced_run(endpoints.get(server_kind, WEATHER.name))
    assert run.result.stream_results[-1].accumulated_text == WEATHER.answer


def test_verbatim_call_is_recovered_with_the_prose_delivered(
    endpoints: Endpoints, server_kind: str
) -> None:
    """The verbatim model's code-span call is executed and only its prose reaches the channel."""

    async def main() -> Run:
        async with httpx.AsyncClient() as client:
            endpoint = endpoints.get(server_kind, VERBATIM.name)
            return await _loop(_provider(endpoint, client), Weather(end_turn=True), verbatim=True)

    run: Run = _run(main)
    assert (run.channel.text.strip(), run.weather.calls, run.result.status) == (
        "Let me check the weather.",
        [PARIS],
        TurnStatus.COMPLETED,
    )


@attrs.define
class KillingChannel(RecordingChannel):
    """A channel whose user sends `/kill` as soon as the first text arrives."""

    control: MemoryTurnControl = attrs.field(factory=MemoryTurnControl)

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        await super().send_text(text, reply_to=reply_to)
        self.control.kill()


def _killed_long_reply(endpoint: Endpoint, client: httpx.AsyncClient) -> Awaitable[Run]:
    channel = KillingChannel()
    provider = _provider(endpoint, client, logit_bias=NO_END, max_tokens=LONG_REPLY_TOKENS)
    return _loop(provider, channel=channel, control=channel.control)


def test_kill_after_the_first_chunk_stops_the_turn(endpoints: Endpoints, server_kind: str) -> None:
    """A kill after the first chunk ends the turn stopped_by_user with that chunk delivered."""

    async def main() -> Run:
        async with httpx.AsyncClient() as client:
            return await _killed_long_reply(endpoints.get(server_kind, PLAIN.name), client)

    run: Run = _run(main)
    assert (run.channel.texts, run.result.status) == (["Tea"], TurnStatus.STOPPED_BY_USER)


#: What each server logs when a client goes away mid-stream.
DISCONNECT_LINES = {
    LLAMA_CPP_PYTHON: "Disconnected from client (via refresh/close)",
    LLAMA_SERVER: "srv          stop: cancel task",
}
#: How long the server may take to log the disconnect (a bound, not a measurement).
LOG_WAIT_S = 10.0


async def _disconnects_logged(log: Path, line: str, more_than: int) -> int:
    """The server's count of logged disconnects, once it exceeds `more_than` (or the wait ends)."""
    with anyio.move_on_after(LOG_WAIT_S):
        while _count(log, line) <= more_than:
            await anyio.sleep(0.05)
    return _count(log, line)


def _count(log: Path, line: str) -> int:
    return log.read_text(errors="replace").count(line)


def test_server_sees_the_kill_as_a_disconnect_and_serves_on(
    endpoints: Endpoints, server_kind: str, request: pytest.FixtureRequest
) -> None:
    """A kill is one disconnect in the server's log, and the next request is answered whole."""
    endpoint = endpoints.get(server_kind, PLAIN.name)
    log, line = _server_log(request, endpoint), DISCONNECT_LINES[server_kind]
    before = _count(log, line)

    async def main() -> tuple[int, Run]:
        async with httpx.AsyncClient() as client:
            await _killed_long_reply(endpoint, client)
            logged = await _disconnects_logged(log, line, before)
            return logged, await _loop(_provider(endpoint, client))

    logged, run = _run(main)
    assert (logged - before, run.channel.text) == (1, PLAIN.answer)


def _server_log(request: pytest.FixtureRequest, endpoint: Endpoint) -> Path:
    if endpoint.server == LLAMA_CPP_PYTHON:
        running: RunningServer = request.getfixturevalue("llama_cpp_python")
    else:
        running = request.getfixturevalue("llama_server")[endpoint.model.name]
    return running.log


def test_demo_runs_against_the_server(endpoints: Endpoints, server_kind: str) -> None:
    """`toolloop demo --base-url URL --model NAME` completes a conversation with the server."""
    pytest.importorskip("toolloop.tools.demo", reason="the demo CLI (tools/demo.py) is not in yet")
    endpoint = endpoints.get(server_kind, WEATHER.name)
    command = [sys.executable, "-m", "toolloop.tools.cli", "demo"]
    command += ["--base-url", endpoint.base_url, "--model", endpoint.model.name]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, WEATHER.answer in done.stdout) == (0, True), done.stdout + done.stderr


# -- the quirks, handled in the adapter ------------------------------------------------------


def _stream(endpoint: Endpoint, *turns: TurnSettings, **extra: Any) -> list[StreamResult]:
    """One adapter stream per turn, in order, on one provider (one pooled connection)."""

    async def main() -> list[StreamResult]:
        async with httpx.AsyncClient() as client:
            provider = _provider(endpoint, client, **extra)
            return [await provider.stream(_request(turn), _Quiet()) for turn in turns]

    results: list[StreamResult] = _run(main)
    return results


def _request(turn: TurnSettings) -> StreamRequest:
    once = StreamOnce(
        iteration=0,
        function_history=(),
        accumulated_model_parts=(),
        context=turn.context,
        tail_directives=(),
        disabled=frozenset(),
        suppress_text_output=False,
    )
    tools = Weather().registry().specs(ProviderDescriptor())
    return StreamRequest(turn=turn, once=once, tools=tools)


class _Quiet:
    """A sink that takes the text and drops it."""

    def progress(self) -> None:
        pass

    async def deliver(self, text: str) -> None:
        pass


def _forced_choice(server: str) -> Any:
    return NAMED_TOOL_CHOICE if server == LLAMA_CPP_PYTHON else "required"


def test_llama_cpp_python_repeated_id_and_name_make_one_call(endpoints: Endpoints) -> None:
    """llama-cpp-python's fragments, each repeating id and name, assemble into one whole call."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name)
    [result] = _stream(endpoint, _turn(), tool_choice=NAMED_TOOL_CHOICE)
    call = result.data
    assert isinstance(call, FunctionCall)
    assert (call.name, call.args, call.arguments_truncated) == ("get_weather", PARIS, False)


def test_call_id_is_kept_once(endpoints: Endpoints, server_kind: str) -> None:
    """The call's id is passed through as sent, not repeated (`call_xcall_x`)."""
    endpoint = endpoints.get(server_kind, WEATHER.name)
    [result] = _stream(endpoint, _turn(), tool_choice=_forced_choice(server_kind))
    assert isinstance(result.data, FunctionCall)
    call_id = result.data.passthrough["id"]
    assert call_id and call_id[: len(call_id) // 2] != call_id[len(call_id) // 2 :]


#: max_tokens that cut each server's forced call inside its arguments (see test_wire).
CUTTING_MAX_TOKENS = {LLAMA_CPP_PYTHON: 3, LLAMA_SERVER: len(WEATHER_TEXT) + 2}


def test_arguments_cut_by_max_tokens_are_truncated(endpoints: Endpoints, server_kind: str) -> None:
    """A call cut inside its arguments is `arguments_truncated`, whatever finish reason came."""
    endpoint = endpoints.get(server_kind, WEATHER.name)
    choice = _forced_choice(server_kind)
    [result] = _stream(
        endpoint, _turn(), tool_choice=choice, max_tokens=CUTTING_MAX_TOKENS[server_kind]
    )
    call = result.data
    assert isinstance(call, FunctionCall)
    assert (result.status, call.name, call.args, call.arguments_truncated) == (
        StreamStatus.FUNCTION_CALL,
        "get_weather",
        {},
        True,
    )


OVERFLOWING = _turn("x" * 3000)  # one byte token per "x": past the 2048-token context


def test_llama_cpp_python_empty_200_stream_is_an_error_that_says_so(endpoints: Endpoints) -> None:
    """An HTTP 200 stream closing with no event and no [DONE] is an `error` result saying so."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    [result] = _stream(endpoint, OVERFLOWING)
    assert isinstance(result.data, StreamError)
    assert (result.status, result.data.type, result.data.message) == (
        StreamStatus.ERROR,
        "incomplete_stream",
        "the stream closed after 0 chunks without [DONE] or a finish reason",
    )


def test_request_after_the_empty_200_stream_succeeds_on_the_same_provider(
    endpoints: Endpoints,
) -> None:
    """The next request on the provider's pool completes although the server closed the socket."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    results = _stream(endpoint, OVERFLOWING, _turn(), OVERFLOWING, _turn())
    assert [r.status for r in results] == [StreamStatus.ERROR, StreamStatus.COMPLETED] * 2, results


def test_llama_cpp_python_validation_error_is_a_final_error_result(endpoints: Endpoints) -> None:
    """llama-cpp-python's HTTP 500 for an invalid request is an `error`, not worth a retry."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    [result] = _stream(endpoint, _turn(), max_tokens="many")
    error = result.data
    assert isinstance(error, StreamError)
    prefix = f"HTTP 500 from {endpoint.chat_url}: 1 validation error"
    assert (result.status, error.type, error.message.startswith(prefix), error.retryable) == (
        StreamStatus.ERROR,
        "http_status",
        True,
        False,
    )


def test_llama_cpp_python_accepts_the_history_of_a_call_without_text(
    endpoints: Endpoints,
) -> None:
    """After a call with no text before it (content "", not null) llama-cpp-python answers."""
    run = _forced_run(endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name))
    first, second = run.result.stream_results
    assert (first.accumulated_text, second.status) == ("", StreamStatus.COMPLETED)
