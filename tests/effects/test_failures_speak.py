"""A turn that fails says why: in its result, and at WARNING in the log, never silently.

Against the loopback server (and a port nothing listens on): a refused
connection, a model the server does not have, a wrong key. The result names
the move that ended it and the failed stream's error, with a hint; the log
names the provider, its URL (never the key) and the status. A tool that
raises logs its traceback with its arguments redacted; the model reads only
the error's type and message.
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Annotated, Any

import pytest

from tests.openai_server import OpenAIServer, error_reply, text_reply, tool_call_reply
from toolloop import (
    LoopConfig,
    OpenAICompatProvider,
    Secret,
    ToolRegistry,
    TurnStatus,
    run_turn,
)
from toolloop.testing import RecordingChannel

pytestmark = pytest.mark.anyio
KEY = "sk-loopback-secret-4242"


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def one_turn(
    base_url: str,
    *,
    model: str = "m",
    registry: ToolRegistry | None = None,
    config: LoopConfig | None = None,
) -> Any:
    async with OpenAICompatProvider(base_url=base_url, model=model, api_key=KEY) as provider:
        return await run_turn(
            "What is up?",
            provider=provider,
            registry=registry or ToolRegistry(),
            channel=RecordingChannel(),
            config=config or LoopConfig(),
        )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "toolloop"]


async def test_a_refused_connection_names_the_server_and_asks_if_it_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`error`, ended by `stream_failed`; the error and the WARNING say where, and ask."""
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    result = await one_turn(base_url)
    assert (result.status, result.ended_by) == (TurnStatus.ERROR, "stream_failed")
    assert result.error.type == "ConnectError"
    assert result.error.message.startswith(f"POST {base_url}/chat/completions: could not connect")
    assert result.error.message.endswith(f"(is the server at {base_url} running?)")
    assert result.reason == f"error (stream_failed): {result.error.message}"
    [warning] = warnings_of(caplog)
    assert warning.getMessage() == (
        f"stream error: provider custom at {base_url}/chat/completions (attempt 0, iteration 0): "
        f"ConnectError: {result.error.message}"
    )


async def test_a_model_the_server_lacks_quotes_the_server_and_names_the_model(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A 404 ends `error`: the status, the URL, the server's words, and which model to check."""
    server.script(error_reply(404, "The model `gpt-9` does not exist", "not_found_error"))
    result = await one_turn(server.base_url, model="gpt-9")
    assert (result.status, result.ended_by) == (TurnStatus.ERROR, "stream_failed")
    assert result.error.message == (
        f"HTTP 404 from {server.base_url}/chat/completions: The model `gpt-9` does not exist "
        f"(is the model 'gpt-9' served at {server.base_url}, and is that the API's root?)"
    )
    [warning] = warnings_of(caplog)
    assert warning.status.value == "error"  # type: ignore[attr-defined]
    assert warning.endpoint == f"{server.base_url}/chat/completions"  # type: ignore[attr-defined]
    assert "HTTP 404" in warning.getMessage()


async def test_a_wrong_key_says_so_and_never_shows_the_key(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A 401 ends `error` with the server's words and a hint; the key is in no log or message."""
    caplog.set_level(logging.DEBUG)
    server.script(error_reply(401, f"Incorrect API key provided: {KEY}", "invalid_api_key"))
    result = await one_turn(server.base_url)
    assert (result.status, result.ended_by) == (TurnStatus.ERROR, "stream_failed")
    assert result.error.message.startswith(f"HTTP 401 from {server.base_url}/chat/completions: ")
    assert result.error.message.endswith("(is the API key right, and allowed to use this model?)")
    assert "Incorrect API key provided: " in result.error.message
    [warning] = warnings_of(caplog)
    assert warning.getMessage().endswith(f"http_status: {result.error.message}")
    assert KEY not in result.reason
    assert [r for r in caplog.records if KEY in r.getMessage()] == []


async def test_a_silent_stream_times_out_with_a_warning_naming_the_provider(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream that goes quiet ends `timeout` (`stream_failed`), logged at WARNING with its URL."""
    server.script(text_reply("Hel", "lo", "!").stalled_after(1))
    quick = LoopConfig(stream_sdk_call_timeout_ms=1_000, stream_abandoned_settle_timeout_ms=0)
    result = await one_turn(server.base_url, config=quick)
    assert (result.status, result.ended_by) == (TurnStatus.TIMEOUT, "stream_failed")
    assert result.error.message == "no data from the provider for 1 s"
    [warning] = warnings_of(caplog)
    assert warning.getMessage() == (
        f"stream timeout: provider custom at {server.base_url}/chat/completions "
        "(attempt 0, iteration 0): timeout: no data from the provider for 1 s"
    )


async def test_the_iteration_ceiling_is_not_mistaken_for_a_silent_stream(
    server: OpenAIServer,
) -> None:
    """A `timeout` at the ceiling is ended by `ceiling_reached`, with no stream error."""
    registry = ToolRegistry()

    @registry.tool(parameters={"type": "object", "properties": {}})
    async def look(args: dict[str, Any], call: Any) -> dict[str, Any]:
        """Look again."""
        return {"seen": "nothing"}

    server.script(*(tool_call_reply("look", {}) for _ in range(3)))
    config = LoopConfig(max_function_call_iterations=2)
    result = await one_turn(server.base_url, registry=registry, config=config)
    assert (result.status, result.ended_by, result.error) == (
        TurnStatus.TIMEOUT,
        "ceiling_reached",
        None,
    )
    assert result.reason == "timeout (ceiling_reached)"


async def test_a_raising_tool_logs_its_traceback_and_the_model_reads_type_and_message(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Its traceback is logged at ERROR, the secret redacted; the model reads `ValueError: ...`."""
    registry = ToolRegistry()

    @registry.tool()
    async def fetch(city: str, token: Annotated[str, Secret]) -> dict[str, Any]:
        """Fetch the weather with an API token."""
        raise ValueError(f"no weather for {city}")

    server.script(
        tool_call_reply("fetch", {"city": "Oslo", "token": "tok-very-secret"}),
        text_reply("Sorry."),
    )
    result = await one_turn(server.base_url, registry=registry)
    assert (result.status, result.ended_by) == (TurnStatus.COMPLETED, "completed")
    [raised] = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert raised.getMessage() == (
        'tool "fetch" raised ValueError; arguments {"city": "Oslo", "token": "[redacted]"}'
    )
    assert raised.exc_info is not None and raised.exc_info[0] is ValueError
    assert "tok-very-secret" not in caplog.text
    said_to_model = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert json.loads(said_to_model[0]["content"]) == {
        "status": "tool_execution_failed",
        "reason": 'tool "fetch" raised ValueError: no weather for Oslo',
        "tool_name": "fetch",
    }
