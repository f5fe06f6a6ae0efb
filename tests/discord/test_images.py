"""Image attachments reach a provider that accepts images as image parts, and are named to
one that does not: dpytest's Discord, the real OpenAI-compatible provider, a loopback server."""

from __future__ import annotations

from typing import Any

import discord
import discord.ext.test as dpytest
import pydantic
from discord.ext.test import backend
from openai.types.chat import ChatCompletionMessageParam

from tests.discord.conftest import EVERY_MESSAGE, configured, run
from tests.openai_server import OpenAIServer, text_reply
from toolloop.effects.discord import BotSettings, ToolloopBot
from toolloop.effects.discord.messages import IMAGES
from toolloop.effects.providers.openai_compat import OpenAICompatProvider
from toolloop.effects.registry import ToolRegistry

CAT = "https://cdn.discordapp.com/attachments/1/2/cat.png"
MESSAGES = pydantic.TypeAdapter(list[ChatCompletionMessageParam])
"""The official `openai` client's types of a request's messages."""


def attachment(number: int, name: str, kind: str, size: int, url: str) -> discord.Attachment:
    data = {"id": number, "filename": name, "size": size, "url": url, "proxy_url": url}
    return discord.Attachment(
        data={**data, "content_type": kind},  # type: ignore[typeddict-item]
        state=backend.get_state(),
    )


def user_message(accepts_images: bool, *files: tuple[str, str, int, str]) -> Any:
    """The last message of the request the loopback server got after "What is this?" with
    `files` (name, content type, size, URL) attached."""

    async def main() -> Any:
        with OpenAIServer() as server:
            server.script(text_reply("A cat."))
            async with OpenAICompatProvider(
                base_url=server.base_url, model="m", accepts_images=accepts_images
            ) as provider:
                bot = ToolloopBot(
                    BotSettings(token="test", access=EVERY_MESSAGE),
                    provider=provider,
                    registry=ToolRegistry(),
                    intents=discord.Intents.all(),
                )
                await configured(bot)
                config = dpytest.get_config()
                attached = [attachment(n, *file) for n, file in enumerate(files, 1)]
                backend.make_message(
                    "What is this?", config.members[0], config.channels[0], attachments=attached
                )
                await dpytest.run_all_events()
                await bot.turns.wait_idle()
            (request,) = server.requests
            MESSAGES.validate_python(request.body["messages"])  # the openai client's shape
            return request.body["messages"][-1]

    return run(main)


class TestImages:
    """The provider descriptor's `accepts_images` decides how an image reaches the model."""

    def test_an_image_reaches_the_request_as_an_image_part(self) -> None:
        """A provider that accepts images gets the user message in the content-part form:
        the text, then the image's URL, and the image is not also named in the text."""
        message = user_message(True, ("cat.png", "image/png", 48_000, CAT))
        assert message == {
            "role": "user",
            "content": [
                {"type": "text", "text": "TestUser0_0_nick: What is this?"},
                {"type": "image_url", "image_url": {"url": CAT}},
            ],
        }

    def test_an_image_is_named_when_the_provider_does_not_accept_images(self) -> None:
        """The flag off: plain text content naming the image, no image part."""
        message = user_message(False, ("cat.png", "image/png", 48_000, CAT))
        assert isinstance(message["content"], str)
        assert message["content"].endswith(
            "What is this?\n\n[attachment: cat.png, 48 KB, not read]"
        )

    def test_images_past_the_count_and_size_bounds_are_named(self) -> None:
        """At most `IMAGES` images of `IMAGE_BYTES` each are sent; a larger one and the
        ones past the count are named, so the model still knows they are there."""
        small = [(f"{n}.jpg", "image/jpeg", 1_000, f"{CAT}?n={n}") for n in range(IMAGES + 1)]
        huge = ("huge.png", "image/png", 30_000_000, f"{CAT}?huge")
        message = user_message(True, huge, *small)
        text, *images = message["content"]
        sent = [part["image_url"]["url"] for part in images]
        assert sent == [f"{CAT}?n={n}" for n in range(IMAGES)]
        assert "[attachment: huge.png, 30 MB, not read]" in text["text"]
        assert f"[attachment: {IMAGES}.jpg, 1 KB, not read]" in text["text"]
        assert "[attachment: 0.jpg" not in text["text"]

    def test_an_image_only_message_is_answered(self) -> None:
        """No text, one image: the model gets the image, not an empty prompt."""

        async def main() -> list[Any]:
            with OpenAIServer() as server:
                server.script(text_reply("A cat."))
                async with OpenAICompatProvider(
                    base_url=server.base_url, model="m", accepts_images=True
                ) as provider:
                    bot = ToolloopBot(
                        BotSettings(token="test", access=EVERY_MESSAGE),
                        provider=provider,
                        registry=ToolRegistry(),
                        intents=discord.Intents.all(),
                    )
                    await configured(bot)
                    config = dpytest.get_config()
                    cat = attachment(1, "cat.png", "image/png", 48_000, CAT)
                    backend.make_message(
                        "", config.members[0], config.channels[0], attachments=[cat]
                    )
                    await dpytest.run_all_events()
                    await bot.turns.wait_idle()
                return [r.body["messages"][-1]["content"][-1] for r in server.requests]

        assert run(main) == [{"type": "image_url", "image_url": {"url": CAT}}]
