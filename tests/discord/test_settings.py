"""The bot's configuration from the environment, and `toolloop discord` without a token."""

from __future__ import annotations

import pytest

from toolloop.effects.discord import BotSettings, MissingSetting, Persona
from toolloop.tools.cli import main


class TestFromEnv:
    """`BotSettings.from_env`: what each variable sets, and a clear error naming a bad one."""

    def test_every_variable_is_read(self) -> None:
        """Token, endpoint, persona, stop phrase, thought log and stale timeout."""
        settings = BotSettings.from_env(
            {
                "DISCORD_TOKEN": " abc ",
                "TOOLLOOP_BASE_URL": "http://127.0.0.1:8080/v1",
                "TOOLLOOP_MODEL": "qwen",
                "OPENAI_API_KEY": "sk-x",
                "TOOLLOOP_PERSONA_NAME": "Tomo",
                "TOOLLOOP_PERSONA_AVATAR_URL": "https://cdn.example.org/t.png",
                "TOOLLOOP_STOP_PHRASE": "stop",
                "TOOLLOOP_THOUGHT_LOG_CHANNEL": "123456789012345678",
                "TOOLLOOP_STALE_TURN_SECONDS": "90",
            }
        )
        assert settings == BotSettings(
            token="abc",
            base_url="http://127.0.0.1:8080/v1",
            model="qwen",
            api_key="sk-x",
            persona=Persona(name="Tomo", avatar_url="https://cdn.example.org/t.png"),
            stop_phrase="stop",
            thought_log_channel=123456789012345678,
            stale_turn_seconds=90.0,
        )

    def test_a_blank_token_is_missing(self) -> None:
        """The error names DISCORD_TOKEN and says where a token comes from."""
        with pytest.raises(MissingSetting, match=r"^DISCORD_TOKEN is not set: put your bot"):
            BotSettings.from_env({"DISCORD_TOKEN": "  "})

    @pytest.mark.parametrize(
        ("name", "value", "message"),
        [
            (
                "TOOLLOOP_THOUGHT_LOG_CHANNEL",
                "#thoughts",
                "must be a whole number, got '#thoughts'",
            ),
            ("TOOLLOOP_STALE_TURN_SECONDS", "-5", "must be above 0, got '-5'"),
        ],
    )
    def test_a_malformed_number_names_its_variable(
        self, name: str, value: str, message: str
    ) -> None:
        """Not a number, or not above zero: a ValueError naming the variable and the value."""
        with pytest.raises(ValueError, match=f"^{name} {message}$"):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", name: value})


def test_toolloop_discord_without_a_token_exits_2_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr names DISCORD_TOKEN; nothing is started."""
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    assert main(["discord"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "toolloop discord: missing setting: DISCORD_TOKEN is not set: put your bot's token "
        "there (Discord Developer Portal > your application > Bot > Reset Token)\n"
    )


def test_toolloop_discord_with_a_bad_number_exits_2_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed stale timeout is one line naming the variable and the value."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("TOOLLOOP_STALE_TURN_SECONDS", "ten")
    assert main(["discord"]) == 2
    assert capsys.readouterr().err == (
        "toolloop discord: bad setting: TOOLLOOP_STALE_TURN_SECONDS must be a number, got 'ten'\n"
    )
