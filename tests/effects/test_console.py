"""The console channel and `run_turn`: a first program's terminal and its one call."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.openai_server import OpenAIServer, text_reply, tool_call_reply
from toolloop import (
    ConsoleChannel,
    ContextItem,
    OpenAICompatProvider,
    ToolRegistry,
    TurnSettings,
    TurnStatus,
    run_turn,
)
from toolloop.ports import Notice, StreamSpan

SPAN = StreamSpan(attempt=0, iteration=0)


def notice(text: str, *, hidden: bool = False, level: str = "warning") -> Notice:
    return Notice(key="k", level=level, text=text, hidden=hidden, iteration=0)


class TestConsoleChannel:
    @pytest.mark.anyio
    async def test_text_streams_onto_one_line_that_the_stream_ends(self) -> None:
        """Chunks are written as they come, with no newline of their own; a stream ends its line."""
        out = io.StringIO()
        channel = ConsoleChannel(out)
        channel.stream_started(SPAN)
        await channel.send_text("Let me ", reply_to=None)
        assert out.getvalue() == "Let me "
        await channel.send_text("look.", reply_to=None)
        channel.stream_ended(SPAN)
        assert out.getvalue() == "Let me look.\n"
        assert channel.delivered_message_ids() == ("console-1", "console-2")

    @pytest.mark.anyio
    async def test_a_notice_gets_a_line_of_its_own_even_mid_stream(self) -> None:
        """A notice never runs into streamed text: it starts a new line, marked with its level."""
        out = io.StringIO()
        channel = ConsoleChannel(out)
        await channel.send_text("Half a sen", reply_to=None)
        await channel.send_notice(notice("Still working."))
        channel.stream_ended(SPAN)
        assert out.getvalue() == "Half a sen\n[warning] Still working.\n"

    @pytest.mark.anyio
    async def test_hidden_notices_are_shown_only_when_asked_for(self) -> None:
        """The thought log stays out of the terminal unless `show_hidden=True`."""
        quiet, shown = io.StringIO(), io.StringIO()
        await ConsoleChannel(quiet).send_hidden_notice(notice("used a tool", level="info"))
        await ConsoleChannel(shown, show_hidden=True).send_hidden_notice(
            notice("used a tool", level="info")
        )
        assert (quiet.getvalue(), shown.getvalue()) == ("", "[info] (hidden) used a tool\n")

    @pytest.mark.anyio
    async def test_a_deletion_is_noted_since_a_terminal_cannot_take_text_back(self) -> None:
        """A superseded attempt's text stays printed; the channel says it was superseded."""
        out = io.StringIO()
        await ConsoleChannel(out).delete_messages(["console-1", "console-2"])
        assert out.getvalue() == "[info] (the 2 chunks above were superseded by the next attempt)\n"


@pytest.mark.anyio
class TestRunTurn:
    async def test_the_prompt_is_the_users_message_and_the_reply_is_printed(
        self, server: OpenAIServer, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Defaults: a console channel on stdout; the prompt follows the turn's context."""
        server.script(text_reply("Hello ", "there."))
        turn = TurnSettings(context=(ContextItem(kind="system", content="Be brief."),))
        async with OpenAICompatProvider(base_url=server.base_url, model="m") as provider:
            result = await run_turn("Hi!", provider=provider, registry=ToolRegistry(), turn=turn)
        assert (result.status, result.ended_by) == (TurnStatus.COMPLETED, "completed")
        assert capsys.readouterr().out == "Hello there.\n"
        assert server.requests[0].body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi!"},
        ]

    async def test_the_configuration_comes_from_the_environment(
        self, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, capsys: Any
    ) -> None:
        """Without `config`, the environment's `BOT_MAX_FUNCTION_CALL_ITERATIONS` caps the turn."""
        monkeypatch.setenv("BOT_MAX_FUNCTION_CALL_ITERATIONS", "1")
        registry = ToolRegistry()

        @registry.tool(parameters={"type": "object", "properties": {}})
        async def look(args: dict[str, Any], call: Any) -> dict[str, Any]:
            """Look."""
            return {}

        server.script(*(tool_call_reply("look", {}) for _ in range(3)))
        async with OpenAICompatProvider(base_url=server.base_url, model="m") as provider:
            result = await run_turn("Look twice.", provider=provider, registry=registry)
        assert (result.status, result.ended_by) == (TurnStatus.TIMEOUT, "ceiling_reached")
        assert len(server.requests) == 1
