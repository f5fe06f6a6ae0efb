"""What the model reads of a message: text and attachments, and no empty prompt ever."""

from __future__ import annotations

from pathlib import Path

import discord
import discord.ext.test as dpytest
import pytest
from discord.ext.test import backend
from discord.ext.test import factories as facts

from tests.discord.conftest import EVERY_MESSAGE, configured, run, thread_from
from tests.effects.harness import ScriptProvider, completed
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.discord.messages import read_attachment
from toolloop.effects.registry import ToolRegistry


def asked(content: str, files: list[Path]) -> list[str]:
    """The last context item of each model request after one message with `files`."""
    provider = ScriptProvider(completed("Read."))

    async def main() -> None:
        bot = ToolloopBot(
            BotSettings(token="test", access=EVERY_MESSAGE),
            provider=provider,
            registry=ToolRegistry(),
            intents=discord.Intents.all(),
        )
        await configured(bot)
        await dpytest.message(content, channel=0, attachments=[str(f) for f in files])
        await bot.turns.wait_idle()

    run(main)
    return [request.once.context[-1].content for request in provider.requests]


class TestAttachments:
    """Text attachments are read, anything else is named."""

    def test_a_text_attachment_is_inlined_under_its_name(self, tmp_path: Path) -> None:
        """A .txt file's text follows the message's, under its file name."""
        notes = tmp_path / "notes.txt"
        notes.write_text("line one\nline two\n", "utf-8")
        assert asked("Summarize this", [notes]) == [
            "Summarize this\n\n[attachment: notes.txt]\nline one\nline two\n"
        ]

    def test_an_attachment_only_message_is_answered_with_what_it_holds(
        self, tmp_path: Path
    ) -> None:
        """No text, a PDF: the model is told of the file, not sent an empty prompt."""
        report = tmp_path / "report.pdf"
        report.write_bytes(b"%PDF-1.7")
        assert asked("", [report]) == ["[attachment: report.pdf, 0 B, not read]"]

    def test_an_empty_message_is_not_answered(self) -> None:
        """Nothing to read (a sticker or an embed only): no turn at all."""
        assert asked("", []) == []

    @pytest.mark.parametrize(
        ("name", "kind", "size", "expected"),
        [
            (
                "report.pdf",
                "application/pdf",
                2_000_000,
                "[attachment: report.pdf, 2 MB, not read]",
            ),
            ("cat.png", "image/png", 48_000, "[attachment: cat.png, 48 KB, not read]"),
            ("huge.log", "text/plain", 5_000_000, "[attachment: huge.log, 5 MB, not read]"),
        ],
    )
    def test_what_is_not_read_is_named_with_its_size(
        self, name: str, kind: str, size: int, expected: str
    ) -> None:
        """Not text, or text over the size bound: named, its size said, never downloaded."""

        async def main() -> str:
            await configured()
            data = {"id": 1, "filename": name, "size": size, "url": "/nowhere", "proxy_url": ""}
            attachment = discord.Attachment(
                data={**data, "content_type": kind},  # type: ignore[typeddict-item]
                state=backend.get_state(),
            )
            return await read_attachment(attachment)

        assert run(main) == expected


class TestThreads:
    """A thread's first turn knows what the thread is about."""

    def test_a_threads_first_turn_reads_the_message_it_was_started_from(self) -> None:
        """A thread on "Plan the trip to Kyoto": the model reads that message, then the
        question asked in the thread."""
        provider = ScriptProvider(completed("Here are three."))

        async def main() -> list[str]:
            bot = ToolloopBot(
                BotSettings(token="test", access=EVERY_MESSAGE),
                provider=provider,
                registry=ToolRegistry(),
                intents=discord.Intents.all(),
            )
            await configured(bot)
            config = dpytest.get_config()
            opener = await dpytest.message("Plan the trip to Kyoto", channel=0)
            await bot.turns.wait_idle()
            provider.requests.clear()
            thread = thread_from(opener, "Kyoto")
            data = facts.make_message_dict(thread, config.members[1], content="And hotels?")
            data["guild_id"] = opener.guild.id  # type: ignore[union-attr]
            backend.get_state().parse_message_create(data)
            await dpytest.run_all_events()
            await bot.turns.wait_idle()
            (request,) = provider.requests
            return [item.content for item in request.once.context if item.kind != "system"]

        assert run(main) == ["Plan the trip to Kyoto", "And hotels?"]
