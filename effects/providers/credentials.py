"""Credentials of an HTTP provider: the API key, a base URL's user and password, and masking.

A key is read once (from a value or an environment variable) and checked fit
for a header; a base URL's userinfo becomes a Basic `Authorization` header and
leaves the URL, so no log line shows it. Every secret is then masked wherever a
provider quotes a server's words in an error (`Quoter`): a server that echoes
the request, or a proxy's error page, never puts a key into a message.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping

import attrs
import httpx

from toolloop.states.errors import InvalidOption
from toolloop.states.json_policy import JsonInputError, loads

#: How much of an offending payload or error body a message quotes.
EXCERPT_CHARS = 300
#: What stands in an error message where the API key was.
KEY_MASK = "***"
#: A message cut inside an echoed key ends in a prefix of it: one this long or longer is masked.
MIN_KEY_PREFIX = 4
#: Header names whose values are credentials: masked wherever server text is quoted.
SECRET_HEADER = re.compile(r"auth|key|token|secret|password|cookie|session|signature", re.I)


def resolve_key(api_key: str | None, api_key_env: str | None) -> str | None:
    """The API key from its value or its environment variable (never both), fit for a header."""
    if api_key is not None and api_key_env is not None:
        raise InvalidOption("give api_key or api_key_env, not both")
    if api_key_env is None:
        return None if api_key is None else header_value(api_key, "the API key")
    value = os.environ.get(api_key_env, "").strip()
    if not value:
        raise InvalidOption(f"environment variable {api_key_env} (the API key) is not set")
    return header_value(value, f"the API key in environment variable {api_key_env}")


def header_value(value: str, what: str) -> str:
    """`value` without surrounding whitespace, refused when an HTTP header cannot carry the rest.

    Whitespace around a key is never part of it (a key read from a file ends in a
    newline). Anything else outside printable ASCII would fail later, in httpx or
    h11, with an error that quotes the whole header, key and all; the refusal
    here names the position and never the value.
    """
    value = value.strip()
    for position, char in enumerate(value):
        if not " " <= char <= "~":
            raise InvalidOption(
                f"{what} has a character an HTTP header cannot carry at position {position} "
                f"(U+{ord(char):04X}; only printable ASCII is allowed); the value is not shown"
            )
    return value


def checked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers a caller gave, each value checked fit for a header (named by its header)."""
    return {name: header_value(value, f"header {name!r}") for name, value in headers.items()}


def basic_auth(url: httpx.URL) -> dict[str, str]:
    """The URL's user and password as a Basic `Authorization` header (as httpx would send
    them, but with a URL that httpx's own log line then shows without them)."""
    if not url.userinfo:
        return {}
    token = base64.b64encode(f"{url.username}:{url.password or ''}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}


def secrets_of(api_key: str | None, headers: Mapping[str, str], url: httpx.URL) -> tuple[str, ...]:
    """What `Quoter` masks, longest first (a secret containing another is masked whole).

    The key; each credential header's value (`api-key`), and what follows its
    scheme (`Authorization: Basic ...`); the base URL's password, or its user
    when it has no password (a token given as the user), as written and decoded.
    One shorter than MIN_KEY_PREFIX characters would mask ordinary words: it is left.
    """
    found = {api_key or ""}
    for name, value in headers.items():
        if SECRET_HEADER.search(name):
            found |= {value, value.partition(" ")[2]}
    user, _, password = url.userinfo.decode("ascii").partition(":")
    found |= {password, url.password or ""} if url.password else {user, url.username}
    return tuple(sorted((one for one in found if len(one) >= MIN_KEY_PREFIX), key=len)[::-1])


def without_credentials(url: str) -> str:
    """`url` as logs may show it: no user, password or query (where keys may ride)."""
    return str(httpx.URL(url).copy_with(username=None, password=None, query=None))


@attrs.frozen
class Quoter:
    """Quotes server text in error messages with the secrets masked, even where a cut fell.

    The secrets are the API key, credential headers and the base URL's
    userinfo (`secrets_of`). Each is masked whole before the text is cut to its
    excerpt, and a prefix of one left at the end of a message (a cut fell
    inside an echoed secret) is masked too, when MIN_KEY_PREFIX characters or longer.
    """

    secrets: tuple[str, ...]

    def mask(self, text: str) -> str:
        """`text` with every occurrence of a secret, and a prefix of one at the end, masked."""
        for secret in self.secrets:
            text = text.replace(secret, KEY_MASK)
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(text)), MIN_KEY_PREFIX - 1, -1):
                if text.endswith(secret[:size]):
                    return text[:-size] + KEY_MASK
        return text

    def quote(self, text: str, limit: int = EXCERPT_CHARS) -> str:
        """`text` masked, then cut to `limit` characters (and masked again at the cut)."""
        text = self.mask(text)
        return text if len(text) <= limit else self.mask(text[:limit]) + "..."

    def error_detail(self, body: str) -> str:
        """An error body's `error.message` (with Google's `error.status` before it), else an
        excerpt of the body; OpenAI-style and Google-style bodies differ only there."""
        try:
            error = loads(body, where="the error body").get("error")
        except (JsonInputError, AttributeError):
            return self.quote(body) or "(empty body)"
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            status = error.get("status")
            detail = (
                f"{status}: {error['message']}" if isinstance(status, str) else error["message"]
            )
            return self.quote(detail)
        return self.quote(body)
