"""Ports and checks for tests and demos: a scripted model, a recording channel, a real server.

`ScriptedProvider` plays a list of replies (text, tool calls, any stream
result) as the model; `RecordingChannel` keeps everything a turn sent (its
`text`, `notices`, `streams`), so a test asserts on it; `ModelServer` serves a
responder function as an OpenAI-compatible streaming endpoint on 127.0.0.1,
so a test or a demo runs the real `OpenAICompatProvider` over real HTTP with
no key; `GeminiServer` does the same for `toolloop.gemini.GeminiProvider`,
refusing a dropped thought signature as Gemini 3 does; `check_invariants(trace)`
lists the contract's loop invariants a recorded turn broke (`toolloop.specs.invariants.check`).
"""

from toolloop.effects.in_memory import RecordingChannel
from toolloop.specs.invariants import check as check_invariants
from toolloop.testing.gemini_server import GeminiError, GeminiRequest, GeminiServer
from toolloop.testing.model_server import LoopbackServer, ModelServer, Responder
from toolloop.testing.scripted import Reply, ScriptedProvider, ScriptExhausted

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    "ScriptedProvider",
    "Reply",
    "ScriptExhausted",
    "RecordingChannel",
    "ModelServer",
    "LoopbackServer",
    "Responder",
    "GeminiServer",
    "GeminiError",
    "GeminiRequest",
    "check_invariants",
]
