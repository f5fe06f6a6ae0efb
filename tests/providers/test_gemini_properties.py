"""Properties of the Gemini adapter's part folding, over real HTTP (hypothesis).

Whatever parts a reply carries and however its chunks split them, the model
turn the adapter keeps is the reply's parts in order, each signed part exactly
as sent, and the calls of the batch together hold that whole turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.conftest import RecordingSink, make_request
from toolloop.gemini import GeminiProvider
from toolloop.states import StreamStatus
from toolloop.testing import GeminiServer

Part = dict[str, Any]

words = st.text(alphabet="ab ", max_size=4)
signatures = st.none() | st.binary(min_size=1, max_size=6).map(lambda b: b.hex())


@st.composite
def parts(draw: st.DrawFn) -> Part:
    signature = draw(signatures)
    kind = draw(st.sampled_from(["text", "thought", "call"]))
    part: Part
    if kind == "call":
        part = {"functionCall": {"name": "get_weather", "args": {"city": draw(words)}}}
    else:
        part = {"text": draw(words), **({"thought": True} if kind == "thought" else {})}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


@st.composite
def replies(draw: st.DrawFn) -> tuple[list[Part], list[int]]:
    """A reply's parts (distinct signatures) and the sizes of the chunks that carry them."""
    sent = draw(st.lists(parts(), min_size=1, max_size=8))
    seen: set[str] = set()
    for part in sent:
        if part.get("thoughtSignature") in seen:
            del part["thoughtSignature"]
        seen.add(part.get("thoughtSignature", ""))
    sizes = draw(st.lists(st.integers(1, 3), min_size=len(sent), max_size=len(sent)))
    return sent, sizes


def chunks(sent: list[Part], sizes: list[int]) -> Iterator[dict[str, Any]]:
    at = 0
    for size in sizes:
        if at >= len(sent):
            break
        batch = sent[at : at + size]
        at += size
        yield {"candidates": [{"content": {"role": "model", "parts": batch}}]}
    yield {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]}


def merged(sent: list[Part]) -> list[Part]:
    """The parts with adjacent unsigned text of the same kind joined: what the adapter keeps."""
    kept: list[Part] = []
    for part in sent:
        last = kept[-1] if kept else None
        plain = "text" in part and part.keys() <= {"text", "thought"}
        if plain and last is not None and last.keys() == part.keys():
            last["text"] += part["text"]
        else:
            kept.append(dict(part))
    return kept


@pytest.fixture(scope="module")
def server() -> Iterator[GeminiServer]:
    with GeminiServer(lambda body: []) as running:
        yield running


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reply=replies())
def test_the_kept_turn_is_the_parts_in_order_with_every_signed_part_unchanged(
    server: GeminiServer, reply: tuple[list[Part], list[int]]
) -> None:
    """Signed parts stay as sent and alone; unsigned text joins; calls hold the whole turn."""
    sent, sizes = reply
    frames = list(chunks(json.loads(json.dumps(sent)), sizes))
    server.responder = lambda body: frames
    sink = RecordingSink()

    async def run() -> Any:
        async with GeminiProvider(base_url=server.base_url, model="m", api_key="") as gemini:
            return await gemini.stream(make_request(), sink)

    result = anyio.run(run)
    assert list(result.model_parts) == merged(sent)
    signed = [p for p in sent if "thoughtSignature" in p]
    assert [p for p in result.model_parts if "thoughtSignature" in p] == signed
    visible = "".join(p["text"] for p in sent if "text" in p and not p.get("thought"))
    assert "".join(sink.delivered) == visible == result.accumulated_text
    calls = result.batch
    if calls:
        assert result.status is StreamStatus.FUNCTION_CALL
        held = [p for call in calls for p in call.passthrough["gemini"]["parts"]]
        assert held == list(result.model_parts)
        assert len({call.call_id for call in calls}) == len(calls)
