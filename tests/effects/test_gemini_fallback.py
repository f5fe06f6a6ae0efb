"""The fallback chain Gemini then an OpenAI-compatible model (SPEC 10), over real HTTP.

Gemini makes a call, the tool runs, then Gemini fumbles its next call
(MALFORMED_FUNCTION_CALL, a retryable error): the OpenAI-compatible fallback
answers from the base context. The nudge is decided per attempt (the native
Gemini attempt never gets it), the superseded attempt's messages are deleted,
and none of Gemini's parts reach the other provider.
"""

from __future__ import annotations

import json

import pytest

from tests.openai_server import OpenAIServer, text_reply
from tests.providers import gemini_transcripts as t
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.turn import NUDGE, Attempt, run_generation_turn
from toolloop.gemini import GeminiProvider
from toolloop.states import (
    ApiFamily,
    ContextItem,
    JsonObject,
    TurnSettings,
    TurnStatus,
)
from toolloop.testing import GeminiServer

pytestmark = pytest.mark.anyio

BASE = (
    ContextItem(kind="system", content="You are Tomo."),
    ContextItem(author="alice", content="Weather in Paris?"),
)
#: The nudge as it appears inside a JSON body.
NUDGE_IN_JSON = json.dumps(NUDGE)[1:-1]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def weather_registry(ran: list[JsonObject]) -> ToolRegistry:
    registry = ToolRegistry()

    async def get_weather(args: JsonObject, call: ToolCall) -> JsonObject:
        ran.append(args)
        return {"city": args["city"], "sky": "clear"}

    registry.register(get_weather, parameters=WEATHER)
    return registry


async def test_a_malformed_gemini_call_falls_back_to_the_openai_compatible_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Gemini's MALFORMED_FUNCTION_CALL hands over; the fallback starts from the base context."""
    gemini_replies = [
        [t.chunk(t.text("Let me look.")), *t.one_call()],
        t.ended("MALFORMED_FUNCTION_CALL"),
    ]
    ran: list[JsonObject] = []
    channel = RecordingChannel()
    with GeminiServer(t.scripted(*gemini_replies)) as gemini_server, OpenAIServer() as fallback:
        fallback.script(text_reply("Clear skies in Paris."))
        gemini = GeminiProvider(base_url=gemini_server.base_url, model="m", api_key="")
        custom = OpenAICompatProvider(base_url=fallback.base_url, model="m")
        async with gemini, custom:
            result = await run_generation_turn(
                turn=TurnSettings(context=BASE),
                attempts=[
                    Attempt(provider=gemini, verbatim_enabled=True),
                    Attempt(provider=custom, verbatim_enabled=True),
                ],
                registry=weather_registry(ran),
                channel=channel,
                control=MemoryTurnControl(),
            )
        gemini_bodies = [json.dumps(r.body) for r in gemini_server.requests]
        fallback_body = fallback.requests[0].body
    assert result.status is TurnStatus.COMPLETED
    assert ran == [{"city": "Paris"}]
    (warning,) = [r.getMessage() for r in caplog.records if "provider google" in r.getMessage()]
    assert "malformed_function_call" in warning
    assert channel.deleted and channel.text.endswith("Clear skies in Paris.")
    assert len(gemini_bodies) == 2 and not any(NUDGE_IN_JSON in body for body in gemini_bodies)
    assert gemini.descriptor.api_family is ApiFamily.GOOGLE
    sent = json.dumps(fallback_body)
    assert NUDGE_IN_JSON in sent
    assert "thoughtSignature" not in sent and "Look it up." not in sent
    assert [m["role"] for m in fallback_body["messages"]] == ["system", "user", "system"]
