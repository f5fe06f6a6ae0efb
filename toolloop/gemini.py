"""Google's Gemini API, natively (docs/providers.md, "Gemini, natively").

`GeminiProvider` streams `streamGenerateContent` over httpx (no new
dependency) and keeps Gemini 3's thought signatures on exactly the parts they
came on, so a tool-calling turn is never refused for a missing one. Its
loopback server for tests and demos is `toolloop.testing.GeminiServer`.
"""

from toolloop.effects.providers.gemini import DEFAULT_BASE_URL, GeminiProvider
from toolloop.effects.providers.gemini_body import SKIP_SIGNATURE

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    "GeminiProvider",
    "DEFAULT_BASE_URL",
    "SKIP_SIGNATURE",
]
