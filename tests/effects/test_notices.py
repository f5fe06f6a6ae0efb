"""The notice catalog (SPEC 9): every notice in English, other locales, English as fallback."""

from __future__ import annotations

import pytest

from toolloop.effects.notices import REQUIRED, NoticeCatalog
from toolloop.engine.commands import NoticeKey

TIPS = {"en": "refresh the context", "ja": "コンテキストを更新", "de": "Aktualisiere den Kontext"}
"""The refresh-context tip in each shipped locale."""


class TestShippedCatalog:
    """The catalog in `notices.json`."""

    def test_english_has_every_notice_of_spec_9(self) -> None:
        """Each NoticeKey has an English text."""
        assert NoticeCatalog.default().keys("en") == {key.value for key in NoticeKey}

    @pytest.mark.parametrize("locale", ["ja", "de"])
    def test_other_locales_are_complete(self, locale: str) -> None:
        """The shipped translations cover every notice too."""
        assert NoticeCatalog.default().keys(locale) == REQUIRED

    @pytest.mark.parametrize("locale", ["en", "ja", "de"])
    @pytest.mark.parametrize("key", ["max_iterations", "tool_error_loop"])
    def test_the_two_loop_limits_carry_the_refresh_context_tip(self, key: str, locale: str) -> None:
        """Max iterations and the tool error loop tell the user to refresh the context."""
        tips = {
            "en": "refresh the context",
            "ja": "コンテキストを更新",
            "de": "Aktualisiere den Kontext",
        }
        assert tips[locale] in NoticeCatalog.default().render(key, locale, {"iteration": 100})

    def test_texts_are_filled_from_the_details(self) -> None:
        """Names in a template take the details' values; structures are written as JSON."""
        text = NoticeCatalog.default().render(
            "tool_call_failed",
            "en",
            {"tool_name": "search", "reason": "HTTP 503", "args": {"q": "cats"}, "data": None},
        )
        assert text == 'Tool search failed: HTTP 503. Arguments: {"q": "cats"}. Data: null'

    def test_a_missing_detail_renders_empty(self) -> None:
        """A template name without a detail is left blank rather than failing the notice."""
        text = NoticeCatalog.default().render("deliberate_trigger", "en", {"tool_name": "search"})
        assert text == "Tool search was exposed by the trigger  ()."


class TestFallback:
    """A missing locale or key falls back to English."""

    CATALOG = NoticeCatalog(
        {
            "en": {key: f"en {key}" for key in REQUIRED},
            "fr": {"still_working": "fr still_working"},
        }
    )

    def test_a_missing_locale_falls_back_to_english(self) -> None:
        """A locale the catalog does not have gets the English text."""
        assert self.CATALOG.render("still_working", "pt-BR", {}) == "en still_working"

    def test_a_key_missing_in_a_locale_falls_back_to_english(self) -> None:
        """A partial translation is completed from English, key by key."""
        assert self.CATALOG.render("still_working", "fr", {}) == "fr still_working"
        assert self.CATALOG.render("max_iterations", "fr", {}) == "en max_iterations"

    def test_an_unknown_key_is_a_key_error_naming_it(self) -> None:
        """A key no locale has is a caller bug, named in the error."""
        with pytest.raises(KeyError, match="no notice 'teleported' in the catalog"):
            self.CATALOG.render("teleported", "en", {})

    def test_a_catalog_without_complete_english_is_refused(self) -> None:
        """English is the fallback, so it must have every notice; the missing ones are named."""
        with pytest.raises(ValueError, match=r"missing: \['deliberate_trigger', 'max_iterations"):
            NoticeCatalog({"en": {"still_working": "x"}, "ja": {}})
