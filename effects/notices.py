"""The notice catalog (SPEC 9): texts by key and locale, English complete, English as fallback."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

NOTICE_LIMIT = 1800
"""The failed-tool notice is cut to this many characters."""


class NoticeCatalog:
    """Localized notice texts; a missing locale or key falls back to English."""

    def __init__(self, texts: Mapping[str, Mapping[str, str]]) -> None:
        if "en" not in texts:
            raise ValueError("a notice catalog needs the English texts (locale 'en')")
        self._texts = texts

    @classmethod
    def default(cls) -> NoticeCatalog:
        """The catalog shipped with toolloop (`notices.json`)."""
        source = resources.files("toolloop.effects").joinpath("notices.json").read_text("utf-8")
        return cls(json.loads(source))

    def render(self, key: str, locale: str, details: Mapping[str, Any]) -> str:
        """The text of `key` in `locale` (or English), filled from `details`."""
        texts = self._texts.get(locale, {})
        template = texts.get(key) or self._texts["en"][key]
        return template.format_map(_Fill(details))

    def locales(self) -> frozenset[str]:
        return frozenset(self._texts)

    def keys(self, locale: str) -> frozenset[str]:
        return frozenset(self._texts.get(locale, {}))


class _Fill(dict[str, Any]):
    """Template values: JSON for structures, an empty string for a missing name."""

    def __init__(self, details: Mapping[str, Any]) -> None:
        super().__init__(
            (k, v if isinstance(v, str | int | float) else json.dumps(v, ensure_ascii=False))
            for k, v in details.items()
        )

    def __missing__(self, key: str) -> str:
        return ""
