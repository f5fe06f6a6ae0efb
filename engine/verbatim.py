"""Recover tool calls that a model wrote as text (SPEC section 10), incrementally and sans-IO.

Theory of operation
-------------------
The parser is fed the visible text of one stream, chunk by chunk, and sorts it into *visible
text* and *calls*. It keeps one candidate at a time: the text from the earliest point where a
call could still start. Everything before that point is visible at once; the candidate is
*held* until it becomes a call, fails (its text is released as visible, and the character that
failed it is scanned afresh), or outgrows the cap. A name may start inside a failed word only
after a character that is not an ASCII word character (``web-sear-search(``): only then is
the held rest of that word, shorter than the cap, scanned again.

This module is the scan: what is prose and where a candidate starts. Reading a candidate,
from its code opener or name to its arguments and closer, is `toolloop.engine.verbatim_calls`
(every mode but ``PLAIN`` is a step of its `CallReader`). In ``PLAIN`` nothing is held and
the scan jumps with ``str.find`` from one ``(`` or backtick to the next; at a ``(`` it looks
back for ``name[ \\t\\r\\n]*`` at a word boundary, and at the end of a chunk it holds a trailing
word that is still a prefix of a name (or a full name and whitespace). The steps read with
anchored, possessive patterns, so each character is looked at a bounded number of times and
the cost is linear in the stream, however it is chunked.

Most chunks are prose, or a word held at the end of the last chunk that the next one shows
is no name; ``feed`` decides those without entering the mode loop (``_one_char``,
``_shortcut``), exactly as the loop would, because per-chunk overhead dominates there.

Output contract
---------------
Results queue up in stream order, and each :meth:`VerbatimToolCallParser.feed` or
:meth:`~VerbatimToolCallParser.flush` hands out exactly one of: all the visible text up to the
next call, or that call. Prose and a call never come out of the same result, so when one chunk
holds prose and a complete call, that feed returns the prose and the call waits for the next
``feed`` (``feed("")`` will do) or ``flush``. ``flush`` ends the stream: it releases whatever is
held, then hands out the next item; call it until it returns ``Flush(pending_text="",
function_call=None)`` to drain everything. Feeding after ``flush`` is a ``RuntimeError``.

Choices where SPEC 10 is silent
-------------------------------
* The word boundary is ASCII, as SPEC 10 says, whatever characters the names contain: ``-``
  and ``.`` are boundaries, so ``my-web-search(`` anchors ``web-search`` (and ``x-search(``
  anchors ``search``), and a name after a non-word character inside a fence's language tag
  (a tag ``c.search`` followed by ``(``) anchors a bare call.
* ``max_buffer_chars`` bounds one candidate's held text, wrapper and closer included; the
  character that would exceed it releases the candidate and is scanned afresh. The other
  choices, about wrappers, arguments and closers, are `toolloop.engine.verbatim_calls`'.
"""

import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from toolloop.engine.verbatim_calls import (
    FENCE_MIN,
    GAP_RUN,
    SPACES,
    TICK_RUN,
    WORD,
    CallReader,
    Mode,
    VerbatimCall,
    end_of,
)
from toolloop.states.errors import InvalidOption, UsageError
from toolloop.states.loop_config import VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS

__all__ = ["Feed", "Flush", "VerbatimCall", "VerbatimToolCallParser"]


@attrs.frozen(kw_only=True)
class Feed:
    """What one :meth:`VerbatimToolCallParser.feed` hands out: text or a call, never both."""

    visible_text: str
    """Text to show now, in stream order; empty when a call is handed out or text is held."""
    function_call: VerbatimCall | None
    """The next recovered call, once the text before it has been handed out."""


@attrs.frozen(kw_only=True)
class Flush:
    """What one :meth:`VerbatimToolCallParser.flush` hands out: text or a call, never both."""

    pending_text: str
    """Text that was held or queued, to show at the end of the stream."""
    function_call: VerbatimCall | None
    """The next recovered call still queued at the end of the stream."""


_GAP: Final = " \t\r\n"  # what may stand between a name and "("
_NOT_WORD: Final = re.compile(r"[^A-Za-z0-9_]")
_SET_VISIBLE_TEXT: Final = Feed.__dict__["visible_text"].__set__
_SET_FUNCTION_CALL: Final = Feed.__dict__["function_call"].__set__


def _text_feed(text: str) -> Feed:
    """``Feed(visible_text=text, function_call=None)``, built through the slots' descriptors.

    attrs' frozen ``__init__`` sets each field through ``object.__setattr__``, which costs as
    much as deciding a whole chunk of prose; the result is the same object.
    """
    feed = object.__new__(Feed)
    _SET_VISIBLE_TEXT(feed, text)
    _SET_FUNCTION_CALL(feed, None)
    return feed


_ONE_CHAR_FEEDS: Final[dict[str, Feed]] = {}  # shared text-only results of one character
_ONE_CHAR_FEEDS_MAX: Final = 4096
_NOTHING: Final = Feed(visible_text="", function_call=None)
_WORD_MODES: Final = frozenset(
    {Mode.TAG, Mode.TAG_WS, Mode.FENCE_WS, Mode.NAME, Mode.NAME_WS}
)  # modes whose held text ends in a word: a later name may start inside it
_PLAIN: Final = Mode.PLAIN  # module-level aliases: enum attribute lookups cost on the hot path
_NAME: Final = Mode.NAME
_NAME_WS: Final = Mode.NAME_WS


class VerbatimToolCallParser(CallReader):
    """Split one stream's visible text into visible text and tool calls; see the module doc."""

    __slots__ = ("_after_word", "_cap", "_ended", "_paren_at", "_tick_at")

    def __init__(
        self,
        *,
        tools: Mapping[str, Mapping[str, Any]],
        max_buffer_chars: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    ) -> None:
        if max_buffer_chars < 1:
            raise InvalidOption(f"max_buffer_chars must be >= 1 (got {max_buffer_chars!r})")
        self._cap = max_buffer_chars
        self._ended = False
        self._after_word = False  # the last character fed so far is a word character
        self._tick_at = self._paren_at = -1  # next "`" / "(" in the chunk at hand, or len
        super().__init__(tools)

    # -- public API -------------------------------------------------------------------------

    def feed(self, text: str) -> Feed:
        """Scan ``text`` and hand out the next result: visible text up to a call, or the call."""
        if self._ended:
            raise UsageError("feed() after flush(): the stream has already ended")
        if not self._out and len(text) == 1 and (feed := self._one_char(text)) is not None:
            return feed
        self._tick_at = self._paren_at = -1
        if not self._out and (visible := self._shortcut(text)) is not None:
            return _text_feed(visible)
        self._scan(text)
        visible, call = self._next()
        return self._visible(visible) if call is None else Feed(visible_text="", function_call=call)

    def flush(self) -> Flush:
        """End the stream (release what is held) and hand out the next result; repeat to drain."""
        if not self._ended:
            self._ended = True
            if self._mode is Mode.CLOSER:
                self._no_closer()
            if self._mode is not Mode.PLAIN:
                self._release()
        pending, call = self._next()
        return Flush(pending_text=pending, function_call=call)

    # -- the hot path: plain text, nothing held or queued ------------------------------------

    # ``feed`` first tries these, which decide as ``_scan`` would for the states most chunks
    # meet (nothing held, or a word held at the end of the last chunk), without its overhead.

    def _one_char(self, c: str) -> Feed | None:
        """The result of a one-character chunk in plain text or a word, else None."""
        is_word = c in WORD
        if self._mode is _NAME:
            if self._breaks:
                return None  # a name may start inside the word: _scan decides
            if is_word:
                if self._held_len >= self._cap:
                    return None
                if (word := self._word + c) in self._prefixes:
                    self._word = word
                    self._held.append(c)
                    self._held_len += 1
                    return _NOTHING
            elif c == "`" or ((c == "(" or c in _GAP) and self._word in self._names):
                return None
            visible = "".join(self._held) + c  # the word is no name: all of it is prose
            self._reset()
        elif self._mode is not _PLAIN or c == "`":
            return None
        elif not self._after_word and c in self._prefixes:
            self._mode, self._word, self._held, self._held_len = _NAME, c, [c], 1
            visible = ""
        else:
            visible = c
        self._after_word = is_word
        return self._visible(visible)

    def _shortcut(self, text: str) -> str | None:
        """The chunk's visible text when it leaves at most a trailing word held, else None."""
        if self._mode is _PLAIN:
            lo, held = 0, ""
        elif (self._mode is _NAME or self._mode is _NAME_WS) and (lo := self._held_dies(text)) >= 0:
            held = "".join(self._held)
        else:
            return None
        n = start = len(text)
        if lo < n:
            if "(" in text or "`" in text:
                start, mode = self._prose_end(text, lo)
                if start < n and (mode is not _NAME or "(" in text[start:]):
                    return None  # a call or code may start here: let _scan read it
            else:  # what _prose_end finds without a backtick or a parenthesis to look at
                start = self._tail_start(text, lo)
            if n - start > self._cap:
                return None
        if held:
            self._reset()
        if n:
            self._after_word = text[-1] in WORD
        if start < n:
            self._hold_word(text, start)
        return held + text[:start]

    def _held_dies(self, text: str) -> int:
        """Where ``text`` shows the held word (and spaces) is no anchor, as _scan would; or -1."""
        n, j, room = len(text), 0, self._cap - self._held_len
        if self._mode is _NAME:
            if self._breaks:
                return -1  # a name may start inside the word: _scan decides
            j = end_of(self._id_run, text, 0, n)
            word = self._word + text[:j] if j <= self._longest else ""
            if j > room:
                return -1
            if word not in self._prefixes:
                return j
            if j == n:
                return -1
            if word not in self._names:
                return j
        k = end_of(GAP_RUN, text, j, n)
        return -1 if k == n or k > room or text[k] == "(" else k

    def _hold_word(self, text: str, start: int) -> None:
        """Hold the chunk's tail: a prefix of a name, or a full name and spaces."""
        tail = text[start:]
        self._held, self._held_len = [tail], len(tail)
        if tail[-1] in _GAP:
            self._word, self._mode = tail.rstrip(_GAP), _NAME_WS
        else:
            self._word, self._mode = tail, _NAME

    def _visible(self, text: str) -> Feed:
        """A text-only result; those of one character are shared, being immutable."""
        if len(text) > 1:
            return _text_feed(text)
        feed = _ONE_CHAR_FEEDS.get(text)
        if feed is None:
            feed = _text_feed(text)
            if len(_ONE_CHAR_FEEDS) < _ONE_CHAR_FEEDS_MAX:
                _ONE_CHAR_FEEDS[text] = feed
        return feed

    # -- output queue -----------------------------------------------------------------------

    def _next(self) -> tuple[str, VerbatimCall | None]:
        """Pop the next call, or all the text queued before it (merged)."""
        out = self._out
        if not out:
            return "", None
        parts = list[str]()
        while out:
            item = out[0]
            if isinstance(item, VerbatimCall):
                if not parts:
                    out.popleft()
                    return "", item
                break
            parts.append(item)
            out.popleft()
        return "".join(parts), None

    # -- a failed word, the boundary --------------------------------------------------------

    def _fail_word(self, at: int) -> int:
        """Fail a candidate whose name or tag did not anchor, as :meth:`_fail` does, except that
        another name may start inside that word, right after a character that is not a word
        character (``x-search(``, a fence tag ``c.search(``): the held text from there is scanned
        again, as if it were a chunk. It is shorter than the cap, and each rescan releases at
        least one character for good, so the cost stays linear.
        """
        text = "".join(self._held)
        found = _NOT_WORD.search(text, self._word_at)
        if found is None:
            return self._fail(at)
        self._emit(text[: found.end()])
        self._reset()
        marks = self._tick_at, self._paren_at
        self._tick_at = self._paren_at = -1
        self._after_word = False
        self._scan(text[found.end() :])
        self._tick_at, self._paren_at = marks
        return at

    def _at_boundary(self, s: str, a: int) -> bool:
        """No ASCII word character right before position ``a`` of the stream."""
        return not (s[a - 1] in WORD if a else self._after_word)

    # -- scanning ---------------------------------------------------------------------------

    def _scan(self, s: str) -> None:
        i, n = 0, len(s)
        steps = self._steps
        while i < n:
            if self._mode is _PLAIN:
                i = self._plain(s, i)
            elif self._held_len < self._cap:
                i = steps[self._mode](s, i, min(n, i + self._cap - self._held_len))
            elif self._mode is Mode.CLOSER:
                self._no_closer()
            elif self._mode in _WORD_MODES:
                self._fail_word(i)
            else:
                self._release()
        if n:
            self._after_word = s[-1] in WORD

    def _plain(self, s: str, i: int) -> int:
        """Emit prose up to the next candidate and enter the mode that reads it."""
        start, self._mode = self._prose_end(s, i)
        self._emit(s[i:start])
        return start

    def _prose_end(self, s: str, lo: int) -> tuple[int, Mode]:
        """The first candidate from ``lo`` on: a backtick, ``name(``, a viable tail; or len.

        ``_tick_at`` and ``_paren_at`` remember, within one chunk, the next backtick worth a
        look and the next parenthesis, so no stretch of a chunk is searched twice.
        """
        n = len(s)
        if self._tick_at < lo:
            self._tick_at = self._live_tick(s, lo)
        stop, k = self._tick_at, lo
        while True:
            if self._paren_at < k:
                self._paren_at = p if (p := s.find("(", k)) >= 0 else n
            if self._paren_at >= stop:
                break
            start = self._name_before(s, lo, self._paren_at)
            if start >= 0:
                return start, Mode.NAME
            k = self._paren_at + 1
        if stop < n:
            return stop, Mode.TICKS
        start = self._tail_start(s, lo)
        return (start, Mode.NAME) if start < n else (n, Mode.PLAIN)

    def _live_tick(self, s: str, lo: int) -> int:
        """The first backtick from ``lo`` on whose code opener this chunk does not rule out."""
        n = len(s)
        tick = s.find("`", lo) if self._names else -1
        while tick >= 0:
            dead_at = self._dead_inline_opener(s, tick)
            if dead_at < 0:
                return tick
            tick = s.find("`", dead_at)
        return n

    def _dead_inline_opener(self, s: str, tick: int) -> int:
        """Where ``_scan`` would fail the inline opener at ``tick`` within this chunk, or -1.

        Most backticks in prose open ordinary code (```ls```), which fails at the first word.
        """
        n, u = len(s), end_of(TICK_RUN, s, tick, len(s))
        v = end_of(SPACES, s, u, n)
        if u - tick >= FENCE_MIN or v == n:
            return -1
        w = end_of(self._id_run, s, v, n)
        word = s[v:w]
        dies = v == w or word not in self._prefixes or (w < n and word not in self._names)
        return w if dies and w - tick <= self._cap else -1

    def _name_before(self, s: str, lo: int, paren: int) -> int:
        """Where ``name[ \\t\\r\\n]*`` ending at ``paren`` starts (not before ``lo``), or -1."""
        j = paren
        while j > lo and s[j - 1] in _GAP:
            j -= 1
        for length in self._lengths:
            a = j - length
            if a >= lo and s[a:j] in self._names and self._at_boundary(s, a):
                return a
        return -1

    def _tail_start(self, s: str, lo: int) -> int:
        """Where a tail that may still grow into an anchor starts (not before ``lo``), or len.

        The tail is a word at a boundary, still a prefix of a name, or a full name and
        whitespace. Most chunks end in the middle of a word after a space, which is decided by
        one ``rfind``; other endings read the last word backwards.
        """
        n = j = len(s)
        c = s[-1]
        if c in _GAP:
            j = max(lo, len(s.rstrip(_GAP)))
            viable = self._names
        elif c in self._name_chars:
            viable = self._prefixes
        else:
            return n
        a = s.rfind(" ", lo, j) + 1
        word = s[a:j] if a else ""
        if word in viable:
            return a
        if word.isascii() and word.isalnum():
            return n  # a plain word after a space, and no name
        back = s[max(lo, j - self._longest - 1) : j][::-1]
        a = j - end_of(self._id_run, back, 0, len(back))
        if self._at_boundary(s, a) and s[a:j] in viable:
            return a
        if self._breaks:  # a name may also start after a non-word character inside the word
            for found in _NOT_WORD.finditer(s, a, j):
                if s[found.end() : j] in viable:
                    return found.end()
        return n
