"""Discord's 2000-character limit: where a growing stream's message is cut into the next one.

A page is cut once, when the text outgrows it, so a sent page never changes. The
cut falls on the last paragraph break, else line break, else sentence end, else
space in the page's second half (a hard cut only when there is none). A code
fence open at the cut is closed at the end of the page and reopened, with its
language, at the start of the next.
"""

from __future__ import annotations

import re

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


def open_fence(text: str) -> tuple[str, str] | None:
    """The marker and info string (language) of a fence still open at the end of `text`."""
    opened: tuple[str, str] | None = None
    for match in FENCE.finditer(text):
        marker, info = match.group(1), match.group(2).strip()
        if opened is None:
            opened = (marker, info)
        elif marker[0] == opened[0][0] and len(marker) >= len(opened[0]) and not info:
            opened = None
    return opened


def cut_page(text: str, limit: int = LIMIT) -> tuple[str, str] | None:
    """`(page, rest)` when `text` is over `limit`, else None; `rest` continues `page`."""
    if len(text) <= limit:
        return None
    room = limit
    while True:
        cut = _boundary(text, room)
        fence = open_fence(text[:cut])
        if fence is None:
            return text[:cut].rstrip(), text[cut:].lstrip("\n")
        marker, info = fence
        page = text[:cut].rstrip("\n") + "\n" + marker
        if len(page) <= limit:
            return page, f"{marker}{info}\n{text[cut:].lstrip(chr(10))}"
        room -= len(page) - limit  # the closer did not fit: cut earlier by the excess


def _boundary(text: str, room: int) -> int:
    """Where to cut `text` at or before `room`: just after the best boundary, else at `room`."""
    half = room // 2
    for pattern in BOUNDARIES:
        ends = [m.end() for m in pattern.finditer(text, half, room)]
        if ends:
            return ends[-1]
    return room
