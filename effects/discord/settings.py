"""The Discord host's settings: what `toolloop discord` reads, checked where it is read.

A value a server admin typed is refused with an error naming its variable and
quoting the value: numbers are plain ASCII decimals within a documented range
(no `nan`, `inf`, exponents or other scripts' digits, which Python's `float`
and `int` would take).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from toolloop.effects.discord.access import Access
from toolloop.effects.discord.adapter import Persona
from toolloop.states.errors import ToolloopError

TOKEN = "DISCORD_TOKEN"
BASE_URL, MODEL, API_KEY = "TOOLLOOP_BASE_URL", "TOOLLOOP_MODEL", "OPENAI_API_KEY"
PERSONA, AVATAR = "TOOLLOOP_PERSONA_NAME", "TOOLLOOP_PERSONA_AVATAR_URL"
STOP_PHRASE, THOUGHT_LOG = "TOOLLOOP_STOP_PHRASE", "TOOLLOOP_THOUGHT_LOG_CHANNEL"
STALE = "TOOLLOOP_STALE_TURN_SECONDS"
PING_REPLIED = "TOOLLOOP_PING_REPLIED_USER"
LOCALE = "TOOLLOOP_LOCALE"
ANSWER_ALL, DIRECT_MESSAGES = "TOOLLOOP_ANSWER_ALL", "TOOLLOOP_DIRECT_MESSAGES"
ID_LISTS = {
    "answer_channels": "TOOLLOOP_ANSWER_CHANNELS",
    "allow_users": "TOOLLOOP_ALLOW_USERS",
    "block_users": "TOOLLOOP_BLOCK_USERS",
    "allow_roles": "TOOLLOOP_ALLOW_ROLES",
    "block_roles": "TOOLLOOP_BLOCK_ROLES",
    "allow_channels": "TOOLLOOP_ALLOW_CHANNELS",
    "block_channels": "TOOLLOOP_BLOCK_CHANNELS",
    "moderator_roles": "TOOLLOOP_MODERATOR_ROLES",
}
"""Each list of `Access` and its variable: Discord ids separated by commas or spaces."""
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*")
SWITCH = {"true": True, "yes": True, "on": True, "1": True}
SWITCH |= {"false": False, "no": False, "off": False, "0": False}
"""The words a yes/no setting takes (any case)."""
STALE_RANGE = (1, 86_400)
"""A stale-turn timeout from a second to a day."""
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
    persona: Persona | None = None
    """Speak as this webhook identity; None speaks as the bot."""
    stop_phrase: str | None = None
    thought_log_channel: int | None = None
    stale_turn_seconds: float = 600.0
    ping_replied_user: bool = True
    """A reply pings the author of the message it answers (nothing else ever pings)."""
    locale: str = "en"
    """The language of the loop's notices, failure notices and cut markers."""
    access: Access = attrs.field(factory=Access)
    """Whom the bot answers, where, and who may stop a reply."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BotSettings:
        """The settings in `env`; a missing token or a malformed number names its variable."""
        token = env.get(TOKEN, "").strip()
        if not token:
            raise MissingSetting(
                f"{TOKEN} is not set: put your bot's token there "
                "(Discord Developer Portal > your application > Bot > Reset Token)"
            )
        name = env.get(PERSONA, "").strip()
        stale = _decimal(env, STALE, *STALE_RANGE)
        return cls(
            token=token,
            base_url=env.get(BASE_URL) or None,
            model=env.get(MODEL) or None,
            api_key=env.get(API_KEY) or None,
            persona=Persona(name=name, avatar_url=env.get(AVATAR) or None) if name else None,
            stop_phrase=env.get(STOP_PHRASE) or None,
            thought_log_channel=_whole(env, THOUGHT_LOG, 1, SNOWFLAKE_MAX),
            stale_turn_seconds=600.0 if stale is None else stale,
            ping_replied_user=_switch(env, PING_REPLIED, default=True),
            locale=_locale(env),
            access=Access(
                answer_all=_switch(env, ANSWER_ALL, default=False),
                direct_messages=_switch(env, DIRECT_MESSAGES, default=True),
                **{field: _ids(env, name) for field, name in ID_LISTS.items()},
            ),
        )


def _ids(env: Mapping[str, str], name: str) -> frozenset[int]:
    """`name`'s Discord ids, separated by commas or blanks; each one checked like a number."""
    items = [item for item in re.split(r"[,\s]+", env.get(name, "")) if item]
    return frozenset(_whole({name: item}, name, 1, SNOWFLAKE_MAX) or 0 for item in items)


def _locale(env: Mapping[str, str]) -> str:
    raw = env.get(LOCALE, "")
    text = raw.strip(BLANK)
    if not text:
        return "en"
    if not LANGUAGE_TAG.fullmatch(text):
        raise BadSetting(f"{LOCALE} must be a language tag such as en, de or ja, got {raw!r}")
    return text


def _switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    """`name`'s yes or no (`SWITCH`), `default` when unset or blank."""
    raw = env.get(name, "")
    text = raw.strip(BLANK).lower()
    if not text:
        return default
    if text not in SWITCH:
        raise BadSetting(f"{name} must be true or false, got {raw!r}")
    return SWITCH[text]


def _whole(env: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    """`name`'s whole number from `low` to `high`, None when unset or blank."""
    raw = env.get(name, "")
    text = raw.strip(BLANK)
    if not text:
        return None
    if not WHOLE.fullmatch(text):
        raise BadSetting(f"{name} must be a whole number written with the digits 0-9, got {raw!r}")
    _check_range(name, raw, int(text), low, high)
    return int(text)


def _decimal(env: Mapping[str, str], name: str, low: float, high: float) -> float | None:
    """`name`'s decimal number from `low` to `high`, None when unset or blank."""
    raw = env.get(name, "")
    text = raw.strip(BLANK)
    if not text:
        return None
    if not DECIMAL.fullmatch(text):
        raise BadSetting(
            f"{name} must be a number written with the digits 0-9 and at most one decimal "
            f"point, got {raw!r}"
        )
    _check_range(name, raw, float(text), low, high)
    return float(text)


def _check_range(name: str, raw: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise BadSetting(f"{name} must be from {low} to {high}, got {raw!r}")
