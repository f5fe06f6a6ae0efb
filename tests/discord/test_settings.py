"""The bot's configuration from the environment, and `toolloop discord` without a token."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolloop.effects.discord import Access, BadSetting, BotSettings, DiscordPersona, MissingSetting
from toolloop.tools.cli import main
from toolloop.tools.discord_bot import model_provider


class TestFromEnv:
    """`BotSettings.from_env`: what each variable sets, and a clear error naming a bad one."""

    def test_every_variable_is_read(self) -> None:
        """Token, endpoint, persona, stop phrase, thought log, stale timeout, shutdown grace
        time, vision and the reply-chain conversation."""
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
                "TOOLLOOP_SHUTDOWN_GRACE_SECONDS": "25",
                "TOOLLOOP_PING_REPLIED_USER": " Off ",
                "TOOLLOOP_LOCALE": "de",
                "TOOLLOOP_VISION": "yes",
                "TOOLLOOP_CONVERSATION": " Reply_Chain ",
                "TOOLLOOP_REPLY_CHAIN_MESSAGES": "10",
                "TOOLLOOP_JOURNAL": " /var/lib/bot/turns.db ",
            }
        )
        assert settings == BotSettings(
            token="abc",
            base_url="http://127.0.0.1:8080/v1",
            model="qwen",
            api_key="sk-x",
            persona=DiscordPersona(name="Tomo", avatar_url="https://cdn.example.org/t.png"),
            stop_phrase="stop",
            thought_log_channel=123456789012345678,
            stale_turn_seconds=90.0,
            shutdown_grace_seconds=25.0,
            ping_replied_user=False,
            locale="de",
            vision=True,
            conversation="reply_chain",
            reply_chain_messages=10,
            journal=Path("/var/lib/bot/turns.db"),
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
                "must be a whole number written with the digits 0-9, got '#thoughts'",
            ),
            (
                "TOOLLOOP_THOUGHT_LOG_CHANNEL",
                "0",
                "must be from 1 to 18446744073709551615, got '0'",
            ),
            (
                "TOOLLOOP_THOUGHT_LOG_CHANNEL",
                "18446744073709551616",
                "must be from 1 to 18446744073709551615, got '18446744073709551616'",
            ),
            ("TOOLLOOP_STALE_TURN_SECONDS", "0.5", "must be from 1 to 86400, got '0.5'"),
            ("TOOLLOOP_STALE_TURN_SECONDS", "86401", "must be from 1 to 86400, got '86401'"),
            ("TOOLLOOP_SHUTDOWN_GRACE_SECONDS", "3601", "must be from 0 to 3600, got '3601'"),
            ("TOOLLOOP_REPLY_CHAIN_MESSAGES", "0", "must be from 1 to 100, got '0'"),
            ("TOOLLOOP_REPLY_CHAIN_MESSAGES", "101", "must be from 1 to 100, got '101'"),
        ],
    )
    def test_a_number_out_of_range_names_its_variable(
        self, name: str, value: str, message: str
    ) -> None:
        """Not a number, or outside its range: an error naming the variable and the value."""
        with pytest.raises(BadSetting, match=f"^{re.escape(name + ' ' + message)}$"):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", name: value})

    @pytest.mark.parametrize(
        "value",
        ["nan", "inf", "-inf", "1e309", "1e-320", "-5", "1_000", "٩٠", "９０", "\u200390", "9\n0"],
    )
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("TOOLLOOP_STALE_TURN_SECONDS", "a number written with the digits 0-9 and at most "),
            ("TOOLLOOP_SHUTDOWN_GRACE_SECONDS", "a number written with the digits 0-9 and at "),
            ("TOOLLOOP_THOUGHT_LOG_CHANNEL", "a whole number written with the digits 0-9, got "),
        ],
    )
    def test_what_python_reads_as_a_number_is_refused_by_name(
        self, name: str, expected: str, value: str
    ) -> None:
        """Issue 20: `float` and `int` take nan, inf, 1e309 (inf), 1e-320 (a subnormal),
        underscores and other scripts' digits; the settings take ASCII decimals only, and
        the error quotes the value as a Python literal (a newline cannot forge a log line)."""
        with pytest.raises(BadSetting) as raised:
            BotSettings.from_env({"DISCORD_TOKEN": "abc", name: value})
        message = str(raised.value)
        assert message.startswith(f"{name} must be {expected}")
        assert message.endswith(f"got {value!r}") and "\n" not in message

    def test_a_switch_is_true_or_false_by_name(self) -> None:
        """A yes/no setting takes true/false, yes/no, on/off, 1/0; anything else is named."""
        with pytest.raises(
            BadSetting, match=r"^TOOLLOOP_PING_REPLIED_USER must be true or false, got 'maybe'$"
        ):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", "TOOLLOOP_PING_REPLIED_USER": "maybe"})

    def test_a_conversation_is_one_of_its_sources_by_name(self) -> None:
        """`TOOLLOOP_CONVERSATION` is transcript or reply_chain; anything else is named."""
        with pytest.raises(
            BadSetting,
            match=r"^TOOLLOOP_CONVERSATION must be one of transcript, reply_chain, got 'chain'$",
        ):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", "TOOLLOOP_CONVERSATION": "chain"})

    def test_a_locale_is_a_language_tag_by_name(self) -> None:
        """Something that is not a language tag is refused, naming the variable."""
        with pytest.raises(
            BadSetting,
            match=r"^TOOLLOOP_LOCALE must be a language tag such as en, de or ja, got '../x'$",
        ):
            BotSettings.from_env({"DISCORD_TOKEN": "abc", "TOOLLOOP_LOCALE": "../x"})

    def test_ascii_blanks_around_a_number_are_trimmed(self) -> None:
        """Spaces and a trailing newline from a shell or a file are not part of the value."""
        settings = BotSettings.from_env(
            {"DISCORD_TOKEN": "abc", "TOOLLOOP_STALE_TURN_SECONDS": " 2.5 "}
        )
        assert settings.stale_turn_seconds == 2.5


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


@pytest.mark.parametrize("value", ["ten", "nan"])
def test_toolloop_discord_with_a_bad_number_exits_2_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """A malformed stale timeout is one line naming the variable and the value."""
    monkeypatch.setenv("DISCORD_TOKEN", "abc")
    monkeypatch.setenv("TOOLLOOP_STALE_TURN_SECONDS", value)
    assert main(["discord"]) == 2
    assert capsys.readouterr().err == (
        "toolloop discord: bad setting: TOOLLOOP_STALE_TURN_SECONDS must be a number written "
        f"with the digits 0-9 and at most one decimal point, got '{value}'\n"
    )


class TestFromFile:
    """A TOML file beside the environment: keys named like the variables, errors by key."""

    def test_every_key_is_read_and_the_environment_wins(self, tmp_path: Path) -> None:
        """Numbers, switches and id lists as TOML values; a set variable overrides its key."""
        config = tmp_path / "bot.toml"
        config.write_text(
            'token = "from-file"\n'
            'persona_name = "Tomo"\n'
            "stale_turn_seconds = 90\n"
            "ping_replied_user = false\n"
            'locale = "ja"\n'
            "allow_roles = [11, 22]\n"
            'moderator_roles = ["33"]\n'
            "direct_messages = false\n",
            "utf-8",
        )
        settings = BotSettings.from_file(config, {"TOOLLOOP_LOCALE": "de", "OTHER": "x"})
        assert settings == BotSettings(
            token="from-file",
            persona=DiscordPersona(name="Tomo"),
            stale_turn_seconds=90.0,
            ping_replied_user=False,
            locale="de",
            access=Access(
                allow_roles=frozenset({11, 22}),
                moderator_roles=frozenset({33}),
                direct_messages=False,
            ),
        )

    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ("stale_turn_seconds = nan", "stale_turn_seconds must be a number written with"),
            ("stale_turn_seconds = 1e309", "stale_turn_seconds must be a number written with"),
            ("thought_log_channel = 0", "thought_log_channel must be from 1 to "),
            ("allow_users = [1, true]", "allow_users must be text, a number, true or false, or "),
            ("ping_replied_user = 'sometimes'", "ping_replied_user must be true or false, got "),
            ("conversation = 'memory'", "conversation must be one of transcript, reply_chain, "),
            ("reply_chain_messages = 500", "reply_chain_messages must be from 1 to 100, got "),
            ("stale_seconds = 5", "unknown key 'stale_seconds' (the keys are: allow_channels, "),
            ("[bot]", "unknown key 'bot' (the keys are: "),
            ("token = ", "not valid TOML: "),
        ],
    )
    def test_a_bad_value_names_the_file_and_the_key(
        self, tmp_path: Path, line: str, message: str
    ) -> None:
        """The error starts with the file's path and the key, as the admin wrote them."""
        config = tmp_path / "bot.toml"
        config.write_text(f'token = "t"\n{line}\n' if "token" not in line else line, "utf-8")
        with pytest.raises(BadSetting) as raised:
            BotSettings.from_file(config, {})
        assert str(raised.value).startswith(f"{config}: {message}")

    def test_toolloop_discord_reads_the_file_and_names_a_bad_key_in_one_line(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`toolloop discord --config bot.toml` with a bad key: one line, exit 2."""
        monkeypatch.delenv("DISCORD_TOKEN", raising=False)
        config = tmp_path / "bot.toml"
        config.write_text('token = "t"\nlocale = "../x"\n', "utf-8")
        assert main(["discord", "--config", str(config)]) == 2
        assert capsys.readouterr().err == (
            f"toolloop discord: bad setting: {config}: locale must be a language tag such as "
            "en, de or ja, got '../x'\n"
        )

    def test_the_guides_sample_file_is_valid(self, tmp_path: Path) -> None:
        """docs/discord.md's TOML sample reads as the settings it shows."""
        guide = (Path(__file__).parents[2] / "docs" / "discord.md").read_text("utf-8")
        (sample,) = re.findall(r"^```toml\n(.*?)^```$", guide, re.MULTILINE | re.DOTALL)
        config = tmp_path / "bot.toml"
        config.write_text(sample, "utf-8")
        settings = BotSettings.from_file(config, {"DISCORD_TOKEN": "t"})
        assert (settings.persona, settings.stale_turn_seconds, settings.locale) == (
            DiscordPersona(name="Tomo"),
            300.0,
            "de",
        )
        assert settings.access.answer_channels == frozenset({123456789012345678})


def test_toolloop_discord_sends_images_only_with_vision() -> None:
    """`TOOLLOOP_VISION=true` makes the endpoint's provider accept images; the default, and
    the embedded demo model (which reads no images), do not."""
    url = "http://127.0.0.1:8080/v1"
    seen = {}
    for label, env in {
        "vision": {"TOOLLOOP_BASE_URL": url, "TOOLLOOP_VISION": "true"},
        "default": {"TOOLLOOP_BASE_URL": url},
        "demo": {"TOOLLOOP_VISION": "true"},
    }.items():
        settings = BotSettings.from_env({"DISCORD_TOKEN": "abc", **env})
        seen[label] = model_provider(settings, url).descriptor.accepts_images
    assert seen == {"vision": True, "default": False, "demo": False}
