"""The notice catalog (SPEC 9): texts by key and locale, English complete, English as fallback."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from toolloop.engine.commands import NoticeKey
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
