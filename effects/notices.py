"""The notice catalog (SPEC 9): texts by key and locale, English complete, English as fallback."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from toolloop.effects.ports import Notice
from toolloop.engine.commands import Level, NoticeKey, SendNotice
from toolloop.states import JsonObject, TurnSettings
from toolloop.states.errors import InvalidOption, ToolloopError

REQUIRED = frozenset(key.value for key in NoticeKey)
"""Every notice of SPEC 9, which the English texts must all have."""
NOTICE_LIMIT = 1800
"""The failed-tool notice is cut to this many characters."""


class UnknownNotice(ToolloopError, KeyError):
    """A notice key that no locale of the catalog has, English included."""


class NoticeCatalog:
    """Localized notice texts; a missing locale or key falls back to English."""

    def __init__(self, texts: Mapping[str, Mapping[str, str]]) -> None:
        missing = sorted(REQUIRED - set(texts.get("en", {})))
        if missing:
            raise InvalidOption(
                f"a notice catalog needs every notice in English (locale 'en'); missing: {missing}"
            )
        self._texts = texts

    @classmethod
    def default(cls) -> NoticeCatalog:
        """The catalog shipped with toolloop (`notices.json`), read once per process."""
        return _shipped()

    def render(self, key: str, locale: str, details: Mapping[str, Any]) -> str:
        """The text of `key` in `locale` (or English), filled from `details`."""
        template = self._texts.get(locale, {}).get(key) or self._texts["en"].get(key)
        if template is None:
            raise UnknownNotice(
                f"no notice {key!r} in the catalog (known: {sorted(self._texts['en'])})"
            )
        return template.format_map(_Fill(details))

    def locales(self) -> frozenset[str]:
        return frozenset(self._texts)

    def keys(self, locale: str) -> frozenset[str]:
        return frozenset(self._texts.get(locale, {}))


def render_notice(
    effect: SendNotice,
    turn: TurnSettings,
    catalog: NoticeCatalog,
    redact: Callable[[str, JsonObject | None], JsonObject | None],
) -> Notice:
    """The notice a `SendNotice` shows: its text in the turn's locale, a failed call's
    arguments redacted (`redact` is the registry's) and its text cut to `NOTICE_LIMIT`,
    under the persona's identity (None, the bot's own, under user impersonation)."""
    details = dict(effect.details)
    failed = effect.key is NoticeKey.TOOL_CALL_FAILED
    if failed:
        details["args"] = redact(str(details.get("tool_name")), details.get("args"))
    details.setdefault("iteration", effect.iteration)
    text = catalog.render(effect.key.value, turn.locale, details)
    return Notice(
        key=effect.key.value,
        level=effect.level.value,
        text=text[:NOTICE_LIMIT] if failed else text,
        hidden=effect.hidden,
        iteration=effect.iteration,
        identity=identity(turn),
    )


def progress_notice(text: str, iteration: int, turn: TurnSettings) -> Notice:
    """A tool's progress line (`report_progress`), shown under the turn's identity."""
    return Notice(
        key="tool_progress",
        level=Level.INFO.value,
        text=text,
        hidden=False,
        iteration=iteration,
        identity=identity(turn),
    )


def identity(turn: TurnSettings) -> str | None:
    """The persona's webhook identity; None (the bot's own) under user impersonation."""
    return None if turn.user_impersonation else turn.persona.name


@functools.cache
def _shipped() -> NoticeCatalog:
    source = resources.files("toolloop.effects").joinpath("notices.json").read_text("utf-8")
    return NoticeCatalog(json.loads(source))


class _Fill(dict[str, Any]):
    """Template values: JSON for structures, an empty string for a missing name."""

    def __init__(self, details: Mapping[str, Any]) -> None:
        super().__init__(
            (k, v if isinstance(v, str | int | float) else json.dumps(v, ensure_ascii=False))
            for k, v in details.items()
        )

    def __missing__(self, key: str) -> str:
        return ""
