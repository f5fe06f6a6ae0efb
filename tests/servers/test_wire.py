"""Raw wire behaviour of llama-cpp-python's server and llama.cpp's llama-server.

These pin what the provider adapter must handle, straight from the servers'
streams: each test is one observed behaviour (or its contrast on the other
server), so a server upgrade that changes one shows up here first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.harness import LLAMA_CPP_PYTHON, LLAMA_SERVER, Endpoints
from tests.servers.tiny_model import (
    GET_WEATHER_TOOL,
    PLAIN,
    VERBATIM,
    WEATHER,
    WEATHER_ARGS,
    WEATHER_TEXT,
)
from tests.servers.wire import chat_body, raw_exchange, stream_chat

NAMED_TOOL_CHOICE = {"type": "function", "function": {"name": "get_weather"}}
PARIS = {"city": "Paris"}


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """Yield an HTTP client with a pooled connection, as an adapter holds one."""
    with httpx.Client(timeout=60.0) as http:
        yield http


def _forced_call(endpoints: Endpoints, server: str, **fields: Any) -> dict[str, Any]:
    """Return the request body that forces get_weather on ``server``, the way it allows."""
    endpoint = endpoints.get(server, WEATHER.name)
    choice = NAMED_TOOL_CHOICE if server == LLAMA_CPP_PYTHON else "required"
    return chat_body(endpoint, tools=[GET_WEATHER_TOOL], tool_choice=choice, **fields)


def test_plain_stream_is_the_exact_answer(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """A plain streamed completion is the exact answer, multi-byte character included."""
    endpoint = endpoints.get(server_kind, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint))
    assert (stream.status, stream.text) == (200, "Tea is ready ☕ enjoy.")


def test_plain_stream_finishes_stop_then_done(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """A completed stream reports finish_reason "stop" and closes with [DONE]."""
    endpoint = endpoints.get(server_kind, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint))
    assert (stream.finish_reason, stream.done) == ("stop", True)


def test_each_token_arrives_as_its_own_content_delta(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """The verbatim model's answer arrives one token per delta, split inside the code span."""
    endpoint = endpoints.get(server_kind, VERBATIM.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint))
    assert stream.contents == list(VERBATIM.pieces)


def test_max_tokens_finishes_length(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """A stream cut by max_tokens delivers the first tokens and reports finish_reason "length"."""
    endpoint = endpoints.get(server_kind, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, max_tokens=2))
    assert (stream.text, stream.finish_reason) == ("Tea is", "length")


def test_tool_capable_model_answers_text_when_not_forced(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """With tools offered and tool_choice "auto" the weather model answers its text and stops."""
    endpoint = endpoints.get(server_kind, WEATHER.name)
    body = chat_body(endpoint, tools=[GET_WEATHER_TOOL], tool_choice="auto")
    stream = stream_chat(client, endpoint, body)
    assert (stream.text, stream.finish_reason, stream.tool_call_fragments) == (
        WEATHER.answer,
        "stop",
        [],
    )


def test_history_with_a_tool_round_is_answered(
    endpoints: Endpoints, server_kind: str, client: httpx.Client
) -> None:
    """A history of a tool call (content "") and its tool result is accepted and answered."""
    endpoint = endpoints.get(server_kind, WEATHER.name)
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    call["function"]["arguments"] = json.dumps(PARIS)  # type: ignore[index]
    messages = [
        *chat_body(endpoint)["messages"],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"result": "sunny"}'},
    ]
    body = chat_body(endpoint, messages=messages, tools=[GET_WEATHER_TOOL])
    stream = stream_chat(client, endpoint, body)
    assert (stream.status, stream.text, stream.finish_reason) == (200, WEATHER.answer, "stop")


@pytest.mark.parametrize("server", [LLAMA_CPP_PYTHON, LLAMA_SERVER])
def test_forced_tool_call_carries_valid_arguments(
    endpoints: Endpoints, server: str, client: httpx.Client
) -> None:
    """A forced native call is get_weather with valid JSON arguments, finish "tool_calls"."""
    endpoint = endpoints.get(server, WEATHER.name)
    stream = stream_chat(client, endpoint, _forced_call(endpoints, server))
    first = stream.tool_call_fragments[0]
    assert (first["function"]["name"], json.loads(stream.arguments), stream.finish_reason) == (
        "get_weather",
        PARIS,
        "tool_calls",
    )


def test_llama_server_streams_prose_before_the_required_call(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """Under "required" llama-server's grammar lets the text come first, as content deltas."""
    stream = stream_chat(
        client, endpoints.get(LLAMA_SERVER, WEATHER.name), _forced_call(endpoints, LLAMA_SERVER)
    )
    assert stream.contents == list(WEATHER_TEXT)


def test_llama_cpp_python_streams_arguments_token_by_token(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-cpp-python streams a named call's arguments a token per fragment, then ""."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name)
    stream = stream_chat(client, endpoint, _forced_call(endpoints, LLAMA_CPP_PYTHON))
    arguments = [f["function"]["arguments"] for f in stream.tool_call_fragments]
    assert arguments == [*WEATHER_ARGS, ""]


def test_llama_cpp_python_repeats_id_and_name_in_every_fragment(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """Every llama-cpp-python tool-call fragment repeats the call's id and name."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name)
    stream = stream_chat(client, endpoint, _forced_call(endpoints, LLAMA_CPP_PYTHON))
    fragments = stream.tool_call_fragments
    ids = {f["id"] for f in fragments}
    names = [f["function"]["name"] for f in fragments]
    assert (len(ids), names) == (1, ["get_weather"] * len(fragments))


def test_llama_server_sends_id_and_name_once(endpoints: Endpoints, client: httpx.Client) -> None:
    """llama-server sends the id and name in the first fragment only (the contrast)."""
    stream = stream_chat(
        client, endpoints.get(LLAMA_SERVER, WEATHER.name), _forced_call(endpoints, LLAMA_SERVER)
    )
    later = stream.tool_call_fragments[1:]
    assert later and all("id" not in f and "name" not in f["function"] for f in later)


def test_llama_cpp_python_reports_tool_calls_when_max_tokens_cut_the_arguments(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-cpp-python says "tool_calls" for a call whose arguments max_tokens cut short."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name)
    stream = stream_chat(client, endpoint, _forced_call(endpoints, LLAMA_CPP_PYTHON, max_tokens=3))
    assert (stream.arguments, stream.finish_reason) == ('{"city":', "tool_calls")


def test_llama_server_reports_length_when_max_tokens_cut_the_arguments(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-server ends a call cut by max_tokens with finish_reason "length" (the contrast)."""
    endpoint = endpoints.get(LLAMA_SERVER, WEATHER.name)
    body = _forced_call(endpoints, LLAMA_SERVER, max_tokens=len(WEATHER_TEXT) + 2)
    stream = stream_chat(client, endpoint, body)
    assert (stream.arguments, stream.finish_reason) == ("{", "length")


def _overflowing_prompt() -> list[dict[str, str]]:
    # One byte token per "x": past the 2048-token context once templated.
    return [{"role": "user", "content": "x" * 3000}]


def test_llama_cpp_python_error_after_start_is_an_empty_200_stream(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """A llama-cpp-python error once streaming began is HTTP 200, no event and no [DONE]."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, messages=_overflowing_prompt()))
    assert (stream.status, stream.content_type.split(";")[0], stream.events, stream.done) == (
        200,
        "text/event-stream",
        [],
        False,
    )


def test_llama_cpp_python_unknown_tool_choice_is_an_empty_200_stream(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """A tool_choice naming no offered tool fails the same way on llama-cpp-python: 200, nothing."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, WEATHER.name)
    choice = {"type": "function", "function": {"name": "get_time"}}
    body = chat_body(endpoint, tools=[GET_WEATHER_TOOL], tool_choice=choice)
    stream = stream_chat(client, endpoint, body)
    assert (stream.status, stream.events, stream.done) == (200, [], False)


def test_llama_cpp_python_closes_the_keep_alive_connection_after_the_empty_stream(
    endpoints: Endpoints,
) -> None:
    """After its empty error stream (sent keep-alive, chunked) llama-cpp-python closes the connection."""  # noqa: E501
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    received, closed = raw_exchange(endpoint, chat_body(endpoint, messages=_overflowing_prompt()))
    head, _, rest = received.partition(b"\r\n\r\n")
    assert (b"connection: keep-alive" in head.lower(), rest, closed) == (True, b"0\r\n\r\n", True)


def test_llama_cpp_python_keeps_the_connection_after_a_completed_stream(
    endpoints: Endpoints,
) -> None:
    """After a completed stream llama-cpp-python keeps the connection open (the contrast)."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    received, closed = raw_exchange(endpoint, chat_body(endpoint), wait_s=2.0)
    assert (b"[DONE]" in received, closed) == (True, False)


def test_llama_server_rejects_an_overflowing_prompt_with_400(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-server rejects a prompt past its context with HTTP 400 (the contrast)."""
    endpoint = endpoints.get(LLAMA_SERVER, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, messages=_overflowing_prompt()))
    assert (stream.status, json.loads(stream.body)["error"]["type"]) == (
        400,
        "exceed_context_size_error",
    )


def test_llama_cpp_python_validation_error_is_http_500(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-cpp-python answers a request that fails validation with HTTP 500."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, max_tokens="many"))
    assert (stream.status, "validation error" in json.loads(stream.body)["error"]["message"]) == (
        500,
        True,
    )


def test_llama_server_validation_error_is_http_400(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-server answers the same invalid request with HTTP 400 (the contrast)."""
    endpoint = endpoints.get(LLAMA_SERVER, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, max_tokens="many"))
    assert (stream.status, json.loads(stream.body)["error"]["type"]) == (
        400,
        "invalid_request_error",
    )


def _history(content: str | None) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "Again"},
    ]


def test_llama_cpp_python_rejects_null_assistant_content(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-cpp-python rejects an assistant history entry whose content is null, as HTTP 500."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, messages=_history(None)))
    assert (stream.status, "validation error" in json.loads(stream.body)["error"]["message"]) == (
        500,
        True,
    )


def test_llama_cpp_python_accepts_empty_assistant_content(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """The same history with content "" is answered by llama-cpp-python."""
    endpoint = endpoints.get(LLAMA_CPP_PYTHON, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, messages=_history("")))
    assert (stream.status, stream.text) == (200, PLAIN.answer)


def test_llama_server_accepts_null_assistant_content(
    endpoints: Endpoints, client: httpx.Client
) -> None:
    """llama-server answers a history whose assistant content is null (the contrast)."""
    endpoint = endpoints.get(LLAMA_SERVER, PLAIN.name)
    stream = stream_chat(client, endpoint, chat_body(endpoint, messages=_history(None)))
    assert (stream.status, stream.text) == (200, PLAIN.answer)
