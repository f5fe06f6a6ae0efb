"""Discord's 2000-character limit: where a growing stream's message is cut into the next one.

A page is cut once, when the text outgrows it, so a sent page never changes. The
cut falls on the last paragraph break, else line break, else sentence end, else
space in the page's second half (a hard cut only when there is none). A code
fence open at the cut is closed at the end of the page and reopened, with its
language, at the start of the next.

Every page takes at least a quarter of the limit from the text (one character
under a limit of 4), so any text ends in a bounded number of pages: the added
fence lines are never part of the text that is left. A page is read as Discord
renders a message, a document of its own: a fence opens only on a finished
line, and one whose lines would take more than a quarter of the limit is
neither closed nor reopened (nor its language kept, when only that is long).
"""

from __future__ import annotations

import re

import attrs

from toolloop.states.errors import InvalidOption

LIMIT = 2000
"""Discord's limit on a message's content, in characters."""
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^`\n]*)$", re.MULTILINE)
BOUNDARIES = (
    re.compile(r"\n\n"),
    re.compile(r"\n"),
    re.compile(r"[.!?。！？][)\"'”’]*\s"),
    re.compile(r"\s"),
)
"""Paragraph, line, sentence, word: the cut takes the first kind found in the page's second half."""

Fence = tuple[str, str]
"""An open code fence: its marker (```` ``` ````, `~~~~`) and its info string (the language)."""


@attrs.frozen(kw_only=True)
class Page:
    """One message's worth of a text: a slice of it, with the fence lines the cut added."""

    body: str
    """The text's slice this page holds; the pages' bodies join back to the whole text."""
    reopen: str = ""
    """The fence line put before the body: the fence the previous page closed, reopened."""
    close: str = ""
    """The fence line put after the body: the fence open at the cut, closed."""
    carried: Fence | None = None
    """The fence the next page reopens."""

    @property
    def content(self) -> str:
        """What the message says: blank lines at the cut and trailing spaces trimmed."""
        return self.reopen + self.body.lstrip("\n").rstrip() + self.close


def open_fence(text: str, fence: Fence | None = None) -> Fence | None:
    """The fence still open at the end of `text`, given `fence` open at its start."""
    for match in FENCE.finditer(text):
        marker, info = match.group(1), match.group(2).strip()
        if fence is None:
            fence = (marker, info)
        elif marker[0] == fence[0][0] and len(marker) >= len(fence[0]) and not info:
            fence = None
    return fence


def cut_page(text: str, limit: int = LIMIT, fence: Fence | None = None) -> Page | None:
    """The first page of `text` (which continues inside `fence`) when all of it does not fit
    on one, else None; the text left is `text[len(page.body):]`."""
    if limit < 1:
        raise InvalidOption(f"a page limit must be at least 1 character (got {limit})")
    reopen = _reopener(fence, limit)
    if len(reopen) + len(text) <= limit:
        return None
    room, reserved = limit - len(reopen), 0
    while True:  # at most three passes: no closer, this closer, the longest closer allowed
        head = text[: _boundary(text, room - reserved)]
        after = open_fence(head[: head.rfind("\n") + 1], fence)  # finished lines only
        close = _closer(after, limit)
        if len(close) <= reserved:
            return Page(body=head, reopen=reopen, close=close, carried=after if close else None)
        reserved = len(close) if reserved == 0 else limit // 4


def last_page(text: str, limit: int = LIMIT, fence: Fence | None = None) -> Page:
    """`text` as one page (it fits: `cut_page` said None), reopening `fence`."""
    return Page(body=text, reopen=_reopener(fence, limit))


def paginate(text: str, limit: int = LIMIT) -> list[Page]:
    """The whole of `text` as the pages a stream of it is cut into."""
    pages, fence = [], None
    while (page := cut_page(text, limit, fence)) is not None:
        pages.append(page)
        text, fence = text[len(page.body) :], page.carried
    return [*pages, last_page(text, limit, fence)]


def _reopener(fence: Fence | None, limit: int) -> str:
    """The line reopening `fence`: with its language if that fits in a quarter of the limit."""
    if fence is None:
        return ""
    marker, info = fence
    return next((f for f in (f"{marker}{info}\n", f"{marker}\n") if len(f) <= limit // 4), "")


def _closer(fence: Fence | None, limit: int) -> str:
    """The line closing `fence`, when it fits in a quarter of the limit (its reopener does too)."""
    if fence is None or len(fence[0]) + 1 > limit // 4:
        return ""
    return "\n" + fence[0]


def _boundary(text: str, room: int) -> int:
    """Where to cut `text` at or before `room`: just after the best boundary, else at `room`."""
    half = room // 2
    for pattern in BOUNDARIES:
        ends = [m.end() for m in pattern.finditer(text, half, room)]
        if ends:
            return ends[-1]
    return room
