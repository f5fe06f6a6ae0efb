"""What goes on the wire: the request body, argument recovery, and the server's protocol.

The body and recovery tests are pure; the last class checks the loopback server
against the official `openai` client, so the adapter's tests rest on the real
wire format.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import AsyncOpenAI
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from pydantic import TypeAdapter, ValidationError

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from tests.providers.conftest import WEATHER, make_request
from toolloop.effects.providers.openai_body import build_body
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.providers.openai_stream import complete_pairs
from toolloop.states import ContextItem, FunctionCall, ToolHistoryEntry


def entry(
    call: FunctionCall, result: Any, pre_text: str | None = None, *, same_turn: bool = False
) -> ToolHistoryEntry:
    """A history entry answering `call` with `result` (`same_turn`: a later call of a batch)."""
    parts = ({"type": "text", "text": pre_text},) if pre_text is not None else None
    response = {"name": call.name, "response": {"result": result}}
    return ToolHistoryEntry(
        function_call=call,
        function_response=response,
        pre_tool_call_text_parts=parts,
        same_turn=same_turn,
    )


REQUEST_TYPE = TypeAdapter(CompletionCreateParamsStreaming)


def as_the_openai_client_types_it(body: dict[str, Any]) -> Any:
    """`body` validated against the official client's request type, every part read.

    pydantic checks the client's iterable fields (`messages`, `tool_calls`) lazily, so
    each is read to the end: a message or call of the wrong shape raises here.
    """

    def read(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: read(item) for key, item in value.items()}
        if isinstance(value, str | bytes | int | float | bool) or value is None:
            return value
        return [read(item) for item in value]

    return read(REQUEST_TYPE.validate_python(body))


def messages(**request: Any) -> list[dict[str, Any]]:
    """The messages of the body built for a request."""
    return list(build_body(make_request(**request), "m", {})["messages"])


class TestContextMessages:
    def test_messages_are_user_or_assistant_by_author(self) -> None:
        """Other authors speak as `user` (prefixed with their name), the persona as `assistant`."""
        context = (
            ContextItem(author="alice", content="hi Tomo"),
            ContextItem(author="Tomo", content="hi alice"),
        )
        assert messages(context=context) == [
            {"role": "user", "content": "alice: hi Tomo"},
            {"role": "assistant", "content": "hi alice"},
        ]

    def test_enrichment_items_and_directives_are_system_text(self) -> None:
        """Enrichment is a system message headed by its kind; directives follow the context."""
        context = (ContextItem(kind="youtube", content={"title": "Cats"}),)
        assert messages(context=context, tail_directives=("Do not reveal again.",)) == [
            {"role": "system", "content": '[youtube]\n{"title": "Cats"}'},
            {"role": "system", "content": "Do not reveal again."},
        ]

    def test_revealed_metadata_comes_before_the_text(self) -> None:
        """The reference lines of revealed metadata head the message they describe."""
        metadata = {"references": ["[alice at 10:00] message 7"], "reply_to": "6"}
        item = ContextItem(author="alice", content="hi", metadata=metadata)
        assert messages(context=(item,))[0]["content"] == (
            "[alice at 10:00] message 7\n(in reply to 6)\nalice: hi"
        )


class TestHistoryMessages:
    def test_pre_tool_text_is_the_content_of_the_tool_call_turn(self) -> None:
        """The text said before the call is merged into its assistant turn, not sent apart."""
        call = FunctionCall(name="get_weather", args={"city": "Paris"}, passthrough={"id": "c1"})
        history = (entry(call, {"temp": 21}, pre_text="Let me look."),)
        assert messages(context=(), history=history) == [
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
        ]

    def test_content_is_empty_not_null_without_pre_tool_text(self) -> None:
        """llama-cpp-python rejects `content: null`, so a silent call turn sends ""."""
        history = (entry(FunctionCall(name="get_weather"), {"status": "completed"}),)
        turn = messages(context=(), history=history)[0]
        assert turn["content"] == ""
        assert turn["tool_calls"][0]["function"]["arguments"] == "{}"

    def test_call_ids_are_generated_from_the_history_position(self) -> None:
        """A call without a provider id gets `call_N`, the same in its turn and its reply."""
        history = tuple(entry(FunctionCall(name="get_weather"), n) for n in range(2))
        sent = messages(context=(), history=history)
        ids = [(m.get("tool_calls") or [m])[0].get("id") or m["tool_call_id"] for m in sent]
        assert ids == ["call_0", "call_0", "call_1", "call_1"]

    def test_passthrough_fields_are_replayed(self) -> None:
        """Opaque call and message fields go back where they came from."""
        passthrough = {
            "id": "c1",
            "tool_call": {"extra_content": {"google": {"thought_signature": "c2ln"}}},
            "message": {"reasoning_details": [{"type": "reasoning.encrypted"}]},
        }
        call = FunctionCall(name="get_weather", passthrough=passthrough)
        turn = messages(context=(), history=(entry(call, 1),))[0]
        assert turn["reasoning_details"] == [{"type": "reasoning.encrypted"}]
        assert turn["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "c2ln"}}

    def test_a_batch_is_one_assistant_turn_then_one_tool_message_per_call(self) -> None:
        """Two calls of one reply: one turn with both calls, then each answer matched by id."""
        first = FunctionCall(name="get_weather", args={"city": "Lima"}, call_id="a")
        second = FunctionCall(name="get_time", args={}, call_id="b")
        later = FunctionCall(name="get_time", args={}, call_id="c")
        history = (
            entry(first, {"temp": 18}, pre_text="Both."),
            entry(second, {"time": "10:00"}, same_turn=True),
            entry(later, {"time": "10:01"}),
        )
        sent = messages(context=(), history=history)
        assert [(m["role"], [c["id"] for c in m.get("tool_calls", ())]) for m in sent] == [
            ("assistant", ["a", "b"]),
            ("tool", []),
            ("tool", []),
            ("assistant", ["c"]),
            ("tool", []),
        ]
        assert [m.get("tool_call_id") for m in sent] == [None, "a", "b", None, "c"]
        assert sent[0]["content"] == "Both."
        body = build_body(make_request(context=(), history=history), "m", {})
        typed = as_the_openai_client_types_it(body)
        assert [len(m.get("tool_calls", ())) for m in typed["messages"]] == [2, 0, 0, 1, 0]

    def test_the_client_types_refuse_a_tool_message_without_its_call_id(self) -> None:
        """The type check is real: a `tool` message lacking `tool_call_id` does not pass."""
        body = {"model": "m", "stream": True, "messages": [{"role": "tool", "content": "1"}]}
        with pytest.raises(ValidationError):
            as_the_openai_client_types_it(body)

    def test_parallel_tool_calls_is_sent_only_when_configured(self) -> None:
        """The adapter never adds `parallel_tool_calls`; a user's `extra_body` sends it."""
        request = make_request(tools=(WEATHER,))
        assert "parallel_tool_calls" not in build_body(request, "m", {})
        configured = build_body(request, "m", {"parallel_tool_calls": False})
        assert configured["parallel_tool_calls"] is False

    def test_model_parts_are_an_assistant_prefill(self) -> None:
        """The text of the accumulated model parts ends the messages as an assistant turn."""
        parts = ({"type": "text", "text": "So far "}, {"type": "text", "text": "I said"})
        assert messages(context=(), parts=parts) == [
            {"role": "assistant", "content": "So far I said"}
        ]


class TestBody:
    def test_tools_and_extra_body_are_sent(self) -> None:
        """Tools go in OpenAI's `tools` array; extra body parameters are merged in."""
        body = build_body(make_request(), "m", {"max_tokens": 64, "tool_choice": "auto"})
        assert (body["model"], body["stream"], body["max_tokens"], body["tool_choice"]) == (
            "m",
            True,
            64,
            "auto",
        )
        assert body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": WEATHER.description,
                    "parameters": WEATHER.parameters,
                },
            }
        ]

    def test_tool_only_parameters_are_dropped_without_tools(self) -> None:
        """`tool_choice` without `tools` is refused by servers, so it is not sent."""
        body = build_body(make_request(tools=()), "m", {"tool_choice": "auto"})
        assert "tools" not in body and "tool_choice" not in body

    def test_extra_body_may_not_set_the_messages(self) -> None:
        """The adapter owns `messages`, `stream` and `tools`; setting them is refused."""
        with pytest.raises(ValueError, match=r"^extra_body may not set messages, stream: "):
            OpenAICompatProvider(
                base_url="http://x", model="m", extra_body={"stream": 0, "messages": []}
            )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


class TestCompletePairs:
    def test_the_whole_keys_of_a_cut_object_are_kept(self) -> None:
        """Pairs closed before the cut are kept; the one cut short is not."""
        assert complete_pairs('{"a": "x", "b": [1, {"c": 2}], "d": "unfin') == {
            "a": "x",
            "b": [1, {"c": 2}],
        }

    def test_a_number_at_the_cut_is_not_whole(self) -> None:
        """`12` at the very end may be the start of `123`: it is not kept."""
        assert complete_pairs('{"a": true, "n": 12') == {"a": True}

    def test_a_number_followed_by_anything_is_whole(self) -> None:
        """A number that whitespace or a comma ended is kept."""
        assert complete_pairs('{"n": 12 ') == {"n": 12}

    def test_recovery_stops_before_a_value_the_json_policy_refuses(self) -> None:
        """NaN, or a value nested thousands deep, ends recovery: the pairs before it are kept."""
        assert complete_pairs('{"a": 1, "b": NaN, "c": 2') == {"a": 1}
        assert complete_pairs('{"a": 1, "b": ' + "[" * 5_000 + "]" * 5_000 + ', "c": 2') == {"a": 1}

    def test_a_non_object_yields_nothing(self) -> None:
        """A prefix that is not an object's recovers no keys."""
        assert complete_pairs('["a", "b"') == {}

    @given(st.dictionaries(st.text(), json_values, max_size=5))
    def test_a_complete_object_is_recovered_whole(self, obj: dict[str, Any]) -> None:
        """Invariant: on a complete object, recovery is json.loads."""
        assert complete_pairs(json.dumps(obj)) == obj

    @given(st.dictionaries(st.text(), json_values, max_size=5), st.data())
    def test_every_prefix_recovers_a_subset_of_the_pairs(
        self, obj: dict[str, Any], data: st.DataObject
    ) -> None:
        """Invariant: every recovered pair of any prefix is a pair of the whole object."""
        text = json.dumps(obj)
        cut = data.draw(st.integers(0, len(text)))
        recovered = complete_pairs(text[:cut])
        assert all(key in obj and obj[key] == value for key, value in recovered.items())


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
class TestOfficialClient:
    async def test_the_openai_client_reads_text_and_tool_calls(
        self, server: OpenAIServer, anyio_backend: str
    ) -> None:
        """The official `openai` client parses the server's text and fragmented tool calls."""
        server.script(text_reply("Hel", "lo"), tool_call_reply("get_weather", {"city": "Oslo"}))
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        text = await self._text(client)
        name, arguments, finish = await self._tool_call(client)
        await client.close()
        assert (text, name, json.loads(arguments), finish) == (
            "Hello",
            "get_weather",
            {"city": "Oslo"},
            "tool_calls",
        )
        assert server.requests[1].body["tools"][0]["function"]["name"] == "get_weather"

    async def _text(self, client: AsyncOpenAI) -> str:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def _tool_call(self, client: AsyncOpenAI) -> tuple[str, str, str | None]:
        tools: Any = [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": WEATHER.parameters},
            }
        ]
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "weather?"}], tools=tools, stream=True
        )
        name, arguments, finish = "", "", None
        async for chunk in stream:
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or ():
                name += (call.function and call.function.name) or ""
                arguments += (call.function and call.function.arguments) or ""
        return name, arguments, finish
