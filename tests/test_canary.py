"""Canaries: a secret argument and an API key, grepped for in every byte toolloop produces.

One run of each surface we can reach: `toolloop simulate --trace`, `replay`,
`demo`, the real interpreter and HTTP provider against the loopback server
(results, notices, the registry's ring, reprs), typed tools, a trace written
as docs/diagrams.md shows, and every log record at DEBUG. The secret is a
`writeOnly` argument that breaks its schema's rules and also one that passes
them, or a typed tool's `Secret` (optional, nested, defaulted); the key is the
provider's bearer token, an `api-key` header or the base URL's password.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import attrs
import httpx
import pytest

from tests.openai_server import OpenAIServer, error_reply, text_reply, tool_call_reply
from toolloop.effects.in_memory import MemoryTurnControl, RecordingChannel
from toolloop.effects.interpreter import run_tool_loop
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.effects.registry.signature import Secret
from toolloop.engine.trace import Trace, TraceStep, dump_lines, load_lines, replay
from toolloop.states import JsonObject, LoopConfig, ToolResult, TurnSettings
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


def login_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(name="login", parameters=LOGIN)
    async def login(args: JsonObject, call: ToolCall) -> JsonObject:
        await call.notify("logging in")
        return {"ok": True}

    return registry


async def login_turn(
    server: OpenAIServer,
    api_key: str | None,
    registry: ToolRegistry | None = None,
    **options: Any,
) -> tuple[str, list[str]]:
    """One turn of the real interpreter and provider: the result's repr, and every other text.

    The other texts are the tool results the model was sent, the tools schema
    sent to it, each stream's data (a call, or an error in full), the channel's
    texts and notices, the registry's ring, the tool events and the provider's
    repr. `options` go to the provider (`base_url`, `headers`, `client`).
    """
    registry = login_registry() if registry is None else registry
    channel, events = RecordingChannel(), []
    options = {"base_url": server.base_url, **options}
    async with OpenAICompatProvider(model="canary", api_key=api_key, **options) as provider:
        result = await run_tool_loop(
            turn=TurnSettings(),
            config=LoopConfig(),
            provider=provider,
            registry=registry,
            channel=channel,
            control=MemoryTurnControl(),
            on_event=events.append,
        )
    sent_back = [
        message.get("content") or ""
        for request in server.requests
        for message in request.body["messages"]
        if message.get("role") == "tool"
    ]
    return repr(result), [
        *sent_back,
        *(json.dumps(request.body.get("tools")) for request in server.requests),
        *(repr(stream.data) for stream in result.stream_results),  # errors in full
        repr(events),
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


@attrs.frozen
class Account:
    user: str
    token: Annotated[str, Secret]


def typed_registry() -> ToolRegistry:
    """A typed tool whose secrets are optional, nested in a list, and defaulted to a canary."""
    registry = ToolRegistry()

    @registry.tool
    async def vault(
        account: Account | None = None,
        backups: list[Account] | None = None,
        key: Annotated[str, Secret] = SECRET,
        *,
        call: ToolCall,
    ) -> ToolResult:
        await call.notify("opening")
        return ToolResult(success=False, error="vault is locked")  # a failed-tool notice

    return registry


@pytest.mark.anyio
async def test_typed_tool_secrets_carry_no_canary(debug_logs: pytest.LogCaptureFixture) -> None:
    """Optional, nested and defaulted `Secret`s of a typed tool: not in the schema sent to the
    provider, the results, notices, events, the ring or the logs; the tool still ran."""
    account = {"user": "u", "token": SECRET}
    with OpenAIServer() as server:
        server.script(
            tool_call_reply("vault", {"account": account, "backups": [account], "key": SECRET}),
            tool_call_reply("vault", {"account": {"user": "u", "token": 1}, SECRET: 1}),
            text_reply("ok"),
        )
        registry = typed_registry()
        result, produced = await login_turn(server, KEY, registry)
    assert [entry.ran for entry in registry.recent()] == [True, False]
    assert canaries_in(result, *produced, logged(debug_logs)) == []


@pytest.mark.anyio
async def test_api_key_header_is_masked_in_errors(debug_logs: pytest.LogCaptureFixture) -> None:
    """A key given as `headers={"api-key": ...}` (Azure), echoed by a 401, is masked."""
    with OpenAIServer() as server:
        server.script(error_reply(401, f"Access denied: invalid key {KEY}"))
        result, produced = await login_turn(server, None, headers={"api-key": KEY})
        assert server.requests[0].headers["api-key"] == KEY  # it was sent
    assert "Access denied: invalid key ***" in result
    assert canaries_in(result, *produced, logged(debug_logs)) == []


@pytest.mark.anyio
async def test_url_password_is_in_no_repr_error_or_log(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """`http://user:KEY@host/v1`: the retry log line (a pooled connection hung up), the
    server's echo and a refused connection show no password; the request still carries it."""
    texts: list[str] = []
    async with httpx.AsyncClient() as client:  # one pool: the second turn reuses a connection
        with OpenAIServer() as server:
            base_url = server.base_url.replace("http://", f"http://canary:{KEY}@")
            server.script(
                text_reply("one").then_hang_up(),
                text_reply("two"),
                error_reply(500, f"no user canary:{KEY}"),
            )
            for _ in range(3):
                result, produced = await login_turn(server, None, base_url=base_url, client=client)
                texts += [result, *produced]
            assert server.requests[0].headers["Authorization"].startswith("Basic ")
    refused, produced = await login_turn(server, None, base_url=base_url)  # a fresh pool
    assert any("sending it again" in record.getMessage() for record in debug_logs.records)
    assert any("no user canary:***" in text for text in texts)  # the 500, masked
    assert any("could not connect" in text for text in produced)
    assert canaries_in(*texts, refused, *produced, logged(debug_logs)) == []


@pytest.mark.anyio
async def test_a_trace_written_as_the_diagrams_guide_shows_carries_no_secret(
    tmp_path: Path,
) -> None:
    """The recipe of docs/diagrams.md (observer, `dump_lines(trace, registry.redact)`) over a
    turn with a secret: the file has none and replays; without `redact` it would."""
    steps: list[TraceStep] = []

    def record(before: Any, event: Any, out: Any) -> None:
        steps.append(
            TraceStep(
                event=event,
                effects=out.effects,
                move=out.move,
                source=before.phase,
                dest=out.state.phase,
            )
        )

    registry = typed_registry()
    with OpenAIServer() as server:
        server.script(
            tool_call_reply("vault", {"account": {"user": "u", "token": SECRET}}),
            text_reply("ok"),
        )
        async with OpenAICompatProvider(base_url=server.base_url, model="canary") as provider:
            await run_tool_loop(
                turn=TurnSettings(),
                config=LoopConfig(),
                provider=provider,
                registry=registry,
                channel=RecordingChannel(),
                control=MemoryTurnControl(),
                observer=record,
            )
    trace = Trace(config=LoopConfig(), turn=TurnSettings(), steps=tuple(steps))
    path = tmp_path / "turn.jsonl"
    path.write_text("".join(f"{line}\n" for line in dump_lines(trace, registry.redact)))
    assert canaries_in(path.read_text()) == []
    assert canaries_in(*dump_lines(trace)) == [SECRET]  # the redact is what keeps it out
    assert replay(load_lines(path.read_text().splitlines())) == []
