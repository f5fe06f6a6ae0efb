"""The loopback Gemini server's wire format, checked with the official `google-genai` client.

The client, pointed at the server (`http_options` base URL), must parse every
transcript the server streams, and the server must accept every request the
client builds for the same conversation; the adapter's requests must say what
the client's say. So the server is Gemini as the official client knows it,
and the adapter tests against it mean something.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from tests.providers import gemini_transcripts as t
from tests.providers.conftest import RecordingSink, make_request
from toolloop.gemini import GeminiProvider
from toolloop.states import ContextItem, ToolHistoryEntry
from toolloop.testing import GeminiServer

KEY = "wire-test-key"
QUESTION = ContextItem(author="alice", content="Weather in Paris?")
TRANSCRIPTS: dict[str, Callable[[], list[t.Chunk]]] = {
    "text": t.plain_text,
    "thoughts and signed empty text": t.thinking_then_text,
    "one call": t.one_call,
    "parallel calls": t.parallel_calls,
    "max tokens in a call": lambda: t.ended("MAX_TOKENS", t.call("get_weather", {"city": "P"})),
    "safety": lambda: t.ended("SAFETY", t.text("Well")),
    "recitation": lambda: t.ended("RECITATION"),
    "prohibited content": lambda: t.ended("PROHIBITED_CONTENT"),
    "blocklist": lambda: t.ended("BLOCKLIST"),
    "spii": lambda: t.ended("SPII"),
    "malformed call": lambda: t.ended("MALFORMED_FUNCTION_CALL"),
    "unexpected call": lambda: t.ended("UNEXPECTED_TOOL_CALL"),
    "blocked prompt": lambda: [t.blocked("SAFETY")],
}


@pytest.fixture
def server() -> Iterator[GeminiServer]:
    with GeminiServer(t.scripted(), api_key=KEY) as running:
        yield running


def client(server: GeminiServer) -> genai.Client:
    options = types.HttpOptions(base_url=server.root_url, api_version="v1beta")
    return genai.Client(api_key=KEY, http_options=options)


def stream(server: GeminiServer, contents: Any) -> list[types.GenerateContentResponse]:
    official = client(server)  # held: the client closes its connections when collected
    return list(official.models.generate_content_stream(model="m", contents=contents))


def dumped(response: types.GenerateContentResponse) -> dict[str, Any]:
    """The response as JSON, without the HTTP headers the client adds to it."""
    found: dict[str, Any] = response.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"sdk_http_response"}
    )
    return found


@pytest.mark.parametrize("name", sorted(TRANSCRIPTS))
def test_the_client_parses_every_chunk_the_server_streams(server: GeminiServer, name: str) -> None:
    """Each transcript comes back from the client chunk for chunk, signatures and all."""
    transcript = TRANSCRIPTS[name]()
    server.responder = t.scripted(transcript)
    parsed = stream(server, "Weather in Paris?")
    assert [dumped(chunk) for chunk in parsed] == transcript


def conversation_contents(parts: list[types.Part]) -> list[types.Content]:
    """The question, the model's turn as the client got it, and one response per call."""
    answers = [
        types.Part(
            function_response=types.FunctionResponse(
                name=part.function_call.name, response={"result": "clear"}
            )
        )
        for part in parts
        if part.function_call is not None
    ]
    return [
        types.Content(role="user", parts=[types.Part(text="alice: Weather in Paris?")]),
        types.Content(role="model", parts=parts),
        types.Content(role="user", parts=answers),
    ]


def received_parts(responses: list[types.GenerateContentResponse]) -> list[types.Part]:
    return [
        part
        for response in responses
        for candidate in response.candidates or ()
        for part in (candidate.content.parts if candidate.content else None) or ()
    ]


def test_the_server_accepts_the_clients_request_for_a_parallel_call_turn(
    server: GeminiServer,
) -> None:
    """The client replays the model turn with its signature; the server takes it and answers."""
    server.responder = t.scripted(t.parallel_calls(), t.plain_text())
    parts = received_parts(stream(server, "alice: Weather in Paris?"))
    answer = stream(server, conversation_contents(parts))
    assert "".join(r.text or "" for r in answer) == "Sunny in Paris."


def test_the_server_refuses_the_clients_request_without_the_signature(
    server: GeminiServer,
) -> None:
    """The same request with the signature dropped is the 400 Gemini 3 sends."""
    server.responder = t.scripted(t.one_call())
    parts = received_parts(stream(server, "alice: Weather in Paris?"))
    unsigned = [part.model_copy(update={"thought_signature": None}) for part in parts]
    with pytest.raises(errors.ClientError, match="missing a thought_signature"):
        stream(server, conversation_contents(unsigned))


@pytest.mark.anyio
@pytest.mark.parametrize("transcript", [t.one_call, t.parallel_calls, t.thinking_then_text])
async def test_the_adapter_sends_what_the_client_sends_for_the_same_conversation(
    server: GeminiServer, transcript: Callable[[], list[t.Chunk]]
) -> None:
    """After a reply, the adapter's next `contents` equal the official client's, part for part."""
    server.responder = t.scripted(transcript(), t.plain_text(), transcript(), t.plain_text())
    async with GeminiProvider(base_url=server.base_url, model="m", api_key=KEY) as gemini:
        first = await gemini.stream(make_request(context=(QUESTION,)), RecordingSink())
        history = tuple(
            ToolHistoryEntry(
                function_call=call,
                function_response={"name": call.name, "response": {"result": "clear"}},
            )
            for call in first.batch
        )
        prefill = () if history else first.model_parts
        request = make_request(context=(QUESTION,), history=history, parts=prefill)
        await gemini.stream(request, RecordingSink())
    parts = received_parts(stream(server, "alice: Weather in Paris?"))
    contents = conversation_contents(parts)
    if not history:
        contents = contents[:2]
    stream(server, contents)
    adapter, official = server.requests[1].body, server.requests[3].body
    assert adapter["contents"] == official["contents"]
