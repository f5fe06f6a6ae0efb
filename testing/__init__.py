"""Ports and checks for tests and demos: a channel that records, a real model server on loopback.

`RecordingChannel` keeps everything a turn sent (its `text`, `notices`,
`streams`), so a test asserts on it; `ModelServer` serves a responder
function as an OpenAI-compatible streaming endpoint on 127.0.0.1, so a test
or a demo runs the real `OpenAICompatProvider` over real HTTP with no key;
`check_invariants(trace)` lists the contract's loop invariants a recorded
turn broke (`toolloop.specs.invariants.check`).
"""

from toolloop.effects.in_memory import RecordingChannel
from toolloop.specs.invariants import check as check_invariants
from toolloop.testing.model_server import LoopbackServer, ModelServer, Responder

__all__ = ["LoopbackServer", "ModelServer", "RecordingChannel", "Responder", "check_invariants"]
