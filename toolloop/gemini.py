"""Google's Gemini API, natively (docs/providers.md, "Gemini").

`GeminiProvider` streams `streamGenerateContent` over httpx (no new
dependency) and keeps Gemini 3's thought signatures on exactly the parts they
came on, so a tool-calling turn is never refused for a missing one.
`GeminiServer` is a loopback Gemini API for tests and demos that refuses a
request the way Gemini does when a signature is dropped.
"""

from toolloop.effects.providers.gemini import DEFAULT_BASE_URL, GeminiProvider
from toolloop.effects.providers.gemini_body import SKIP_SIGNATURE
from toolloop.testing.gemini_server import GeminiError, GeminiRequest, GeminiServer

__all__ = [  # noqa: RUF022 (in meaning order, not alphabetical)
    "GeminiProvider",
    "DEFAULT_BASE_URL",
    "SKIP_SIGNATURE",
    "GeminiServer",
    "GeminiError",
    "GeminiRequest",
]
