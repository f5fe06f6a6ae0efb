"""The Discord host's settings: what `toolloop discord` reads, checked where it is read.

They come from environment variables, or from a TOML file whose keys are the
variables' names in lower case without their prefix (`KEYS`), each overridden
by its variable when that is set.

A value a server admin typed is refused with an error naming its variable and
quoting the value: numbers are plain ASCII decimals within a documented range
(no `nan`, `inf`, exponents or other scripts' digits, which Python's `float`
and `int` would take).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

from toolloop.effects.discord.access import Access
from toolloop.effects.discord.turns import SHUTDOWN_GRACE
from toolloop.effects.discord.voices import DiscordPersona
from toolloop.states.errors import ToolloopError

TOKEN = "DISCORD_TOKEN"
BASE_URL, MODEL, API_KEY = "TOOLLOOP_BASE_URL", "TOOLLOOP_MODEL", "OPENAI_API_KEY"
PERSONA, AVATAR = "TOOLLOOP_PERSONA_NAME", "TOOLLOOP_PERSONA_AVATAR_URL"
STOP_PHRASE, THOUGHT_LOG = "TOOLLOOP_STOP_PHRASE", "TOOLLOOP_THOUGHT_LOG_CHANNEL"
STALE = "TOOLLOOP_STALE_TURN_SECONDS"
GRACE = "TOOLLOOP_SHUTDOWN_GRACE_SECONDS"
PING_REPLIED = "TOOLLOOP_PING_REPLIED_USER"
LOCALE = "TOOLLOOP_LOCALE"
ANSWER_ALL, DIRECT_MESSAGES = "TOOLLOOP_ANSWER_ALL", "TOOLLOOP_DIRECT_MESSAGES"
VISION = "TOOLLOOP_VISION"
CONVERSATION, CHAIN_MESSAGES = "TOOLLOOP_CONVERSATION", "TOOLLOOP_REPLY_CHAIN_MESSAGES"
JOURNAL = "TOOLLOOP_JOURNAL"
ID_LISTS = {
    "answer_channels": "TOOLLOOP_ANSWER_CHANNELS",
    "allow_users": "TOOLLOOP_ALLOW_USERS",
    "block_users": "TOOLLOOP_BLOCK_USERS",
    "allow_roles": "TOOLLOOP_ALLOW_ROLES",
    "block_roles": "TOOLLOOP_BLOCK_ROLES",
    "allow_channels": "TOOLLOOP_ALLOW_CHANNELS",
    "block_channels": "TOOLLOOP_BLOCK_CHANNELS",
    "moderator_roles": "TOOLLOOP_MODERATOR_ROLES",
    "approver_roles": "TOOLLOOP_APPROVER_ROLES",
}
"""Each list of `Access` and its variable: Discord ids separated by commas or spaces."""
KEYS = {
    "token": TOKEN,
    "base_url": BASE_URL,
    "model": MODEL,
    "api_key": API_KEY,
    "persona_name": PERSONA,
    "persona_avatar_url": AVATAR,
    "stop_phrase": STOP_PHRASE,
    "thought_log_channel": THOUGHT_LOG,
    "stale_turn_seconds": STALE,
    "shutdown_grace_seconds": GRACE,
    "ping_replied_user": PING_REPLIED,
    "locale": LOCALE,
    "answer_all": ANSWER_ALL,
    "direct_messages": DIRECT_MESSAGES,
    "vision": VISION,
    "conversation": CONVERSATION,
    "reply_chain_messages": CHAIN_MESSAGES,
    "journal": JOURNAL,
    **ID_LISTS,
}
"""The keys of a configuration file and the environment variable each one stands for."""
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")
SWITCH = {"true": True, "yes": True, "on": True, "1": True}
SWITCH |= {"false": False, "no": False, "off": False, "0": False}
"""The words a yes/no setting takes (any case)."""
STALE_RANGE = (1, 86_400)
"""A stale-turn timeout from a second to a day."""
GRACE_RANGE = (0, 3_600)
"""A shutdown's grace time from none to an hour."""
CONVERSATIONS = ("transcript", "reply_chain")
"""Where the model's conversation comes from: the bot's memory, or Discord's reply chain."""
CHAIN_RANGE = (1, 100)
"""How many messages of a reply chain the model may read (Discord's fetches are one each)."""
SNOWFLAKE_MAX = 2**64 - 1
"""Discord's ids are unsigned 64-bit integers."""
WHOLE = re.compile(r"[0-9]+")
DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
BLANK = " \t\r\n"
"""The whitespace trimmed around a value (ASCII only, like the digits)."""


class MissingSetting(ToolloopError, ValueError):
    """A required environment variable is not set; the message names it."""


class BadSetting(ToolloopError, ValueError):
    """A setting's value is malformed or out of range; the message names it and quotes it."""


@attrs.frozen(kw_only=True)
class BotSettings:
    """The bot's configuration (`from_env` reads it from the environment)."""

    token: str
    base_url: str | None = None
    """An OpenAI-compatible endpoint; None serves the embedded demo model on loopback."""
    model: str | None = None
    api_key: str | None = None
    persona: DiscordPersona | None = None
    """Speak as this webhook identity; None speaks as the bot."""
    stop_phrase: str | None = None
    thought_log_channel: int | None = None
    stale_turn_seconds: float = 600.0
    shutdown_grace_seconds: float = SHUTDOWN_GRACE
    """On SIGTERM or `close()` without a journal, how long the stopped turns get to end (their
    replies marked) before they are cancelled where they stand."""
    ping_replied_user: bool = True
    """A reply pings the author of the message it answers (nothing else ever pings)."""
    locale: str = "en"
    """The language of the loop's notices, failure notices and cut markers."""
    access: Access = attrs.field(factory=Access)
    """Whom the bot answers, where, and who may stop a reply."""
    vision: bool = False
    """The model at `base_url` reads images: image attachments are sent to it as images."""
    conversation: str = "transcript"
    """`transcript`: the channel's recent messages the bot remembers (lost on a restart);
    `reply_chain`: the messages the trigger replies to, read from Discord (`chain`)."""
    reply_chain_messages: int = 25
    """The most messages of a reply chain the model reads, the trigger included."""
    journal: Path | None = None
    """A SQLite journal file (`toolloop.durable`): every turn is journaled, and the turns a
    dead process left unfinished are resumed on start. None: turns die with the process."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BotSettings:
        """The settings in `env`; a missing token or a malformed value names its variable."""
        return _Source(env, {}).settings()

    @classmethod
    def from_file(cls, path: Path, env: Mapping[str, str]) -> BotSettings:
        """The settings in the TOML file at `path` (keys in `KEYS`), each overridden by its
        environment variable when that is set; an error names the file and the key."""
        try:
            table = tomllib.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError) as error:
            raise BadSetting(f"{path}: cannot read the configuration: {error}") from None
        except tomllib.TOMLDecodeError as error:
            raise BadSetting(f"{path}: not valid TOML: {error}") from None
        values, labels = {}, {}
        for key, value in table.items():
            if key not in KEYS:
                known = ", ".join(sorted(KEYS))
                raise BadSetting(f"{path}: unknown key {key!r} (the keys are: {known})")
            values[KEYS[key]], labels[KEYS[key]] = _plain(value, f"{path}: {key}"), f"{path}: {key}"
        for name, value in env.items():
            if name in values and value.strip(BLANK):
                values[name] = value
                del labels[name]
        return _Source({**env, **values}, labels).settings()


class _Source:
    """Where the settings are read: values by variable name, and how an error names each."""

    def __init__(self, values: Mapping[str, str], labels: Mapping[str, str]) -> None:
        self.values, self.labels = values, labels

    def settings(self) -> BotSettings:
        token = self.text(TOKEN)
        if not token:
            raise MissingSetting(
                f"{TOKEN} is not set: put your bot's token there "
                "(Discord Developer Portal > your application > Bot > Reset Token)"
            )
        name, stale = self.text(PERSONA), self.decimal(STALE, *STALE_RANGE)
        grace = self.decimal(GRACE, *GRACE_RANGE)
        avatar = self.text(AVATAR) or None
        return BotSettings(
            token=token,
            base_url=self.text(BASE_URL) or None,
            model=self.text(MODEL) or None,
            api_key=self.text(API_KEY) or None,
            persona=DiscordPersona(name=name, avatar_url=avatar) if name else None,
            stop_phrase=self.text(STOP_PHRASE) or None,
            thought_log_channel=self.whole(THOUGHT_LOG, 1, SNOWFLAKE_MAX),
            stale_turn_seconds=600.0 if stale is None else stale,
            shutdown_grace_seconds=SHUTDOWN_GRACE if grace is None else grace,
            ping_replied_user=self.switch(PING_REPLIED, default=True),
            locale=self.locale(),
            access=Access(
                answer_all=self.switch(ANSWER_ALL, default=False),
                direct_messages=self.switch(DIRECT_MESSAGES, default=True),
                **{field: self.ids(name) for field, name in ID_LISTS.items()},
            ),
            vision=self.switch(VISION, default=False),
            conversation=self.choice(CONVERSATION, CONVERSATIONS),
            reply_chain_messages=self.whole(CHAIN_MESSAGES, *CHAIN_RANGE) or 25,
            journal=Path(self.text(JOURNAL)) if self.text(JOURNAL) else None,
        )

    def label(self, name: str) -> str:
        return self.labels.get(name, name)

    def text(self, name: str) -> str:
        return self.values.get(name, "").strip()

    def ids(self, name: str) -> frozenset[int]:
        """`name`'s Discord ids, separated by commas or blanks; each checked like a number."""
        items = [item for item in re.split(r"[,\s]+", self.values.get(name, "")) if item]
        return frozenset(self._whole(name, item, 1, SNOWFLAKE_MAX) or 0 for item in items)

    def locale(self) -> str:
        raw = self.values.get(LOCALE, "")
        text = raw.strip(BLANK)
        if not text:
            return "en"
        if not LANGUAGE_TAG.fullmatch(text):
            raise BadSetting(
                f"{self.label(LOCALE)} must be a language tag such as en, de or ja, got {raw!r}"
            )
        return text

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        """`name`'s value, one of `choices` (any case), the first when unset or blank."""
        raw = self.values.get(name, "")
        text = raw.strip(BLANK).lower()
        if not text:
            return choices[0]
        if text not in choices:
            raise BadSetting(f"{self.label(name)} must be one of {', '.join(choices)}, got {raw!r}")
        return text

    def switch(self, name: str, *, default: bool) -> bool:
        """`name`'s yes or no (`SWITCH`), `default` when unset or blank."""
        raw = self.values.get(name, "")
        text = raw.strip(BLANK).lower()
        if not text:
            return default
        if text not in SWITCH:
            raise BadSetting(f"{self.label(name)} must be true or false, got {raw!r}")
        return SWITCH[text]

    def whole(self, name: str, low: int, high: int) -> int | None:
        """`name`'s whole number from `low` to `high`, None when unset or blank."""
        return self._whole(name, self.values.get(name, ""), low, high)

    def _whole(self, name: str, raw: str, low: int, high: int) -> int | None:
        text = raw.strip(BLANK)
        if not text:
            return None
        if not WHOLE.fullmatch(text):
            raise BadSetting(
                f"{self.label(name)} must be a whole number written with the digits 0-9, "
                f"got {raw!r}"
            )
        self._check_range(name, raw, int(text), low, high)
        return int(text)

    def decimal(self, name: str, low: float, high: float) -> float | None:
        """`name`'s decimal number from `low` to `high`, None when unset or blank."""
        raw = self.values.get(name, "")
        text = raw.strip(BLANK)
        if not text:
            return None
        if not DECIMAL.fullmatch(text):
            raise BadSetting(
                f"{self.label(name)} must be a number written with the digits 0-9 and at most "
                f"one decimal point, got {raw!r}"
            )
        self._check_range(name, raw, float(text), low, high)
        return float(text)

    def _check_range(self, name: str, raw: str, value: float, low: float, high: float) -> None:
        if not low <= value <= high:
            raise BadSetting(f"{self.label(name)} must be from {low} to {high}, got {raw!r}")


def _plain(value: object, where: str) -> str:
    """A TOML value as its variable would hold it; a table or a date is refused by key."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(
        isinstance(v, str | int) and not isinstance(v, bool) for v in value
    ):
        return ",".join(str(v) for v in value)
    raise BadSetting(f"{where} must be text, a number, true or false, or a list of ids")
