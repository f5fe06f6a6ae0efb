"""Canaries: a secret argument and an API key, grepped for in every byte toolloop produces.

One run of each surface we can reach: `toolloop simulate --trace`, `replay`,
`demo`, the real interpreter and HTTP provider against the loopback server
(results, notices, the registry's ring, reprs) and every log record at DEBUG.
The secret is a `writeOnly` argument that breaks its schema's rules and also
one that passes them; the key is the provider's bearer token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.openai_server import OpenAIServer, error_reply, text_reply, tool_call_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import JsonObject, LoopConfig, TurnSettings
from toolloop.tools.cli import main

SECRET = "CANARY-secret-3b9d"
KEY = "sk-CANARY-key-8e21"
GOOD_SECRET = SECRET * 4  # passes minLength and the pattern: the tool runs with it
LOGIN: JsonObject = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "password": {
            "type": "string",
            "writeOnly": True,
            "minLength": 40,
            "pattern": "^[A-Za-z0-9-]+$",
        },
    },
    "required": ["user", "password"],
    "additionalProperties": False,
}


def canaries_in(*texts: str) -> list[str]:
    """The canaries found in any of `texts` (empty: none leaked)."""
    return sorted({c for c in (SECRET, KEY) for text in texts if c in text})


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every logger at DEBUG, as a bot that logs everything would run."""
    with caplog.at_level(logging.DEBUG):
        yield caplog


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record as a handler would write it: message, arguments and exception text."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) for record in caplog.records)


def test_simulate_trace_and_replay_carry_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], debug_logs: pytest.LogCaptureFixture
) -> None:
    """A failing and a passing secret: not in simulate's output, its trace, replay or the logs."""
    scenario, trace = tmp_path / "canary.json", tmp_path / "canary.jsonl"
    scenario.write_text(
        json.dumps(
            {
                "tools": [{"name": "login", "parameters": LOGIN, "results": [{"data": {}}]}],
                "streams": [
                    {"call": {"name": "login", "args": {"user": "u", "password": SECRET}}},
                    {"call": {"name": "login", "args": {"password": [SECRET], "x": 1}}},
                    {"call": {"name": "login", "args": {"user": "u", "password": GOOD_SECRET}}},
                    {"status": "completed", "text": "done"},
                ],
            }
        ),
        "utf-8",
    )
    assert main(["simulate", str(scenario), "--trace", str(trace)]) == 0
    simulated = capsys.readouterr()
    assert main(["replay", "--check", str(trace)]) == 0
    replayed = capsys.readouterr()
    assert "$.password: must be at least 40 characters long (rule: minLength)" in simulated.out
    outputs = (simulated.out, simulated.err, trace.read_text(), replayed.out, replayed.err)
    assert canaries_in(*outputs, logged(debug_logs)) == []


def test_demo_prints_no_api_key(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """`toolloop demo` with the key in OPENAI_API_KEY never prints or logs it."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert main(["demo"]) == 0
    shown = capsys.readouterr()
    assert canaries_in(shown.out, shown.err, logged(debug_logs)) == []


async def login_turn(server: OpenAIServer, api_key: str) -> tuple[str, list[str]]:
    """One turn of the real interpreter and provider: the result's repr, and every other text.

    The other texts are the tool results the model was sent, the channel's
    texts and notices, the registry's ring and the provider's repr.
    """
    registry = ToolRegistry()

    @registry.tool(name="login", parameters=LOGIN)
    async def login(args: JsonObject, call: ToolCall) -> JsonObject:
        await call.notify("logging in")
        return {"ok": True}

    channel = RecordingChannel()
    async with OpenAICompatProvider(
        base_url=server.base_url, model="canary", api_key=api_key
    ) as provider:
        result = await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=provider,
            registry=registry,
            channel=channel,
            control=MemoryTurnControl(),
        )
    sent_back = [
        message.get("content") or ""
        for request in server.requests
        for message in request.body["messages"]
        if message.get("role") == "tool"
    ]
    return repr(result), [
        *sent_back,
        repr(channel),
        repr(registry.recent()),
        repr(provider),
        *(notice.text for notice in channel.every_notice),
    ]


@pytest.mark.anyio
async def test_interpreter_and_provider_carry_no_canary(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """Validation failure, a run with the secret, a provider error echoing the key: no canary."""
    with OpenAIServer() as server:
        server.script(
            tool_call_reply("login", {"user": "u", "password": SECRET}),
            tool_call_reply("login", {"user": "u", "password": GOOD_SECRET}),
            error_reply(401, f"Incorrect API key provided: {KEY}"),
        )
        _, produced = await login_turn(server, KEY)
    assert any("must be at least 40 characters long" in text for text in produced)
    assert canaries_in(*produced, logged(debug_logs)) == []


@pytest.mark.anyio
async def test_turn_result_repr_carries_no_secret() -> None:
    """The repr of the turn result shows no writeOnly argument."""
    with OpenAIServer() as server:
        server.script(
            tool_call_reply("login", {"user": "u", "password": GOOD_SECRET}), text_reply("ok")
        )
        result, _ = await login_turn(server, KEY)
    assert canaries_in(result) == []


@pytest.mark.anyio
async def test_key_with_trailing_newline_is_not_echoed(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """A key with a trailing newline (which h11 refuses in a header) appears in no output."""
    with OpenAIServer() as server:
        server.script(text_reply("hello"))
        result, produced = await login_turn(server, KEY + "\n")
    assert canaries_in(result, *produced, logged(debug_logs)) == []
