"""Failures are seen: a failed turn says so in the channel and the log; a cut reply is marked.

The model is the real OpenAI-compatible provider against the loopback
chat-completions server (`tests/openai_server.py`): a 401, a refused
connection and a stream broken mid-reply are what a user's bot meets.
"""

from __future__ import annotations

import logging
import socket

import anyio
import discord
import discord.ext.test as dpytest
import pytest

from tests.discord.conftest import EVERY_MESSAGE, channel, configured, contents, embeds, run
from tests.effects.harness import ScriptProvider, completed, silent
from tests.openai_server import OpenAIServer, error_reply, text_reply
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.discord.failures import TEXTS, cut_marker, failure_notice
from toolloop.effects.ports import Provider
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolRegistry
from toolloop.states import StreamError, TurnStatus

RED = discord.Colour.red()


def bot(provider: Provider, **settings: object) -> ToolloopBot:
    return ToolloopBot(
        BotSettings(token="test", access=EVERY_MESSAGE, **settings),  # type: ignore[arg-type]
        provider=provider,
        registry=ToolRegistry(),
        intents=discord.Intents.all(),
    )


async def ask(base_url: str, **settings: object) -> tuple[list[str], list[discord.Embed], int]:
    """One message to a bot on the real provider at `base_url`: the channel afterwards."""
    async with OpenAICompatProvider(base_url=base_url, model="m", api_key="sk-wrong") as provider:
        client = bot(provider, **settings)
        await configured(client)
        await dpytest.message("hello?", channel=0)
        await client.turns.wait_idle()
    return contents(channel(0)), embeds(channel(0)), channel(0).id


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "toolloop.discord" and r.levelno == logging.WARNING
    ]


class TestFailedTurns:
    """A turn that ends `error` shows what failed in words, and logs the stream error."""

    def test_a_refused_key_is_shown_and_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        """HTTP 401: the channel says the model refused the key; the log has the channel and
        the provider's message (with the key masked by the provider)."""

        async def main() -> tuple[list[str], list[discord.Embed], int]:
            with OpenAIServer() as server:
                server.script(error_reply(401, "Incorrect API key provided"))
                return await ask(server.base_url)

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            texts, notices, place = run(main)
        assert texts == ["hello?", ""]  # the user's message, the notice's embed
        assert [(e.description, e.colour) for e in notices] == [(TEXTS["en"]["key_refused"], RED)]
        (logged,) = warnings(caplog)
        assert logged.startswith(f"the turn in channel {place} ended error: http_status: HTTP 401")
        assert "Incorrect API key provided" in logged

    def test_a_refused_connection_is_shown_and_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Nothing listens on the port: the channel says the model could not be reached."""
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]  # closed again: connecting is refused

        with caplog.at_level(logging.WARNING, logger="toolloop.discord"):
            _, notices, place = run(lambda: ask(f"http://127.0.0.1:{port}/v1"))
        assert [e.description for e in notices] == [TEXTS["en"]["unreachable"]]
        (logged,) = warnings(caplog)
        assert logged.startswith(f"the turn in channel {place} ended error: ConnectError: POST ")

    def test_a_reply_broken_mid_stream_is_marked_and_explained_in_the_locale(self) -> None:
        """The connection breaks after some text: the text stays, marked as cut off by an
        error, and the notice follows, in German with `locale="de"`."""

        async def main() -> tuple[list[str], list[discord.Embed], int]:
            with OpenAIServer() as server:
                server.script(text_reply("Das ist ", "der Anfang ", "und").disconnected_after(3))
                return await ask(server.base_url, locale="de")

        texts, notices, _ = run(main)
        assert texts[1] == "Das ist der Anfang\n-# durch einen Fehler abgebrochen"
        assert [e.description for e in notices] == [TEXTS["de"]["unreachable"]]


class TestCutReplies:
    """A follow-up interrupt and a stale-turn cancel leave a marker on the message they cut."""

    def test_a_follow_up_interrupt_marks_the_message_it_cut(self) -> None:
        """A message during the first stream interrupts it; its message says so."""
        point = anyio.Event()

        async def main() -> list[str]:
            client = bot(ScriptProvider(silent("Thinking", started=point), completed("Both.")))
            await configured(client)
            await dpytest.message("first", channel=0)
            await point.wait()
            await dpytest.message("second", channel=0)
            await client.turns.wait_idle()
            return contents(channel(0))

        assert run(main) == [
            "first",
            "Thinking\n-# interrupted by a new message",
            "second",
            "Both.",
        ]

    def test_no_marker_or_notice_for_a_completed_turn(self) -> None:
        """A whole reply is left as it is."""
        assert cut_marker(TurnStatus.COMPLETED, "en") is None
        assert cut_marker(None, "ja") == TEXTS["ja"]["cut_stale"]

    def test_a_stop_by_the_shutdown_says_so_and_nothing_else_changes(self) -> None:
        """A turn the bot's shutdown stopped is marked as such; one that failed meanwhile
        keeps its own marker."""
        stopped = cut_marker(TurnStatus.STOPPED_BY_USER, "de", shutdown=True)
        assert stopped == TEXTS["de"]["cut_shutdown"]
        assert cut_marker(TurnStatus.ERROR, "en", shutdown=True) == TEXTS["en"]["cut_failed"]


class TestFailureNotice:
    """Which words a stream error gets."""

    @pytest.mark.parametrize(
        ("kind", "message", "key"),
        [
            ("http_status", "HTTP 403 from http://x/v1: no access", "key_refused"),
            ("http_status", "HTTP 500 from http://x/v1: oops", "failed"),
            ("ReadTimeout", "POST http://x/v1: timed out", "too_slow"),
            ("RemoteProtocolError", "POST http://x/v1: the connection broke", "unreachable"),
            ("provider_error", "the model said no", "failed"),
        ],
    )
    def test_each_kind_of_error_has_its_words(self, kind: str, message: str, key: str) -> None:
        """The notice's key and text follow the error's kind, an unknown locale in English."""
        notice = failure_notice(StreamError(type=kind, message=message), "fr")
        assert notice is not None and (notice.key, notice.text) == (key, TEXTS["en"][key])

    @pytest.mark.parametrize("kind", ["timeout", "channel_send_failed"])
    def test_no_second_notice_where_the_loop_has_one_or_discord_refused(self, kind: str) -> None:
        """The inactivity timeout has the loop's notice; a refused channel takes no notice."""
        assert failure_notice(StreamError(type=kind, message="x"), "en") is None

    def test_every_locale_has_every_text(self) -> None:
        """German and Japanese are complete, like English."""
        assert {locale: set(texts) for locale, texts in TEXTS.items()} == {
            locale: set(TEXTS["en"]) for locale in TEXTS
        }
