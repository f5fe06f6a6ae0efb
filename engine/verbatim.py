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

Modes (``_Mode``): in ``PLAIN`` nothing is held and the scan jumps with ``str.find`` from one
``(`` or backtick to the next; at a ``(`` it looks back for ``name[ \\t\\r\\n]*`` at a word
boundary, and at the end of a chunk it holds a trailing word that is still a prefix of a name
(or a full name and whitespace). Every other mode reads one piece of a candidate with an
anchored, possessive pattern (never a backtracking one), so each character is looked at a
bounded number of times and the cost is linear in the stream, however it is chunked:

* ``TICKS`` -> ``OPENED``: a run of backticks and the spaces after it. One or two backticks
  open an inline span, three or more may open a fence (its language tag is ``TAG``, then the
  end of the line, then any whitespace in ``FENCE_WS``).
* ``NAME`` -> ``NAME_WS``: an identifier that is still a prefix of an exposed name, then
  spaces, tabs and newlines.
* ``ARGS``: after ``(``, parentheses are counted outside JSON strings (escapes honoured) until
  they balance; then the span is a call or, whole, visible text.
* ``CLOSER``: a parsed call that a code opener wrapped waits for its closing backticks.

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
* The whitespace between a name and ``(`` is ``[ \\t\\r\\n]``. After a fence's tag that is a
  name, a newline, then ``(`` make the tag the call's name (the fence wraps the call).
* Once anchored, a candidate is held until its parentheses balance, whatever follows the
  ``(``: prose like ``search (see below)`` is held until its ``)``, then shown.
* Arguments are JSON under the project's JSON policy (``toolloop.states.json_policy``), as a
  native call's are: ``NaN``, ``Infinity``, nesting past its depth bound and lone surrogates
  (``"\\ud800"``) are refused. A call refused once its parentheses balance is released whole;
  scanning resumes after its ``)``.
* Inline wrapper: backticks, then spaces. Fence: three or more backticks, an optional language
  tag of (Unicode) word characters and ``+#.-``, the end of the line, then any whitespace. A
  fence with more on its first line is not a wrapper: the call inside is still found, bare,
  and the fence stays visible. The closer is as many backticks, after spaces (inline) or any
  whitespace (fence); when it does not follow, the call stands and the whitespace is visible
  after it.
* ``max_buffer_chars`` bounds one candidate's held text, wrapper and closer included; the
  character that would exceed it releases the candidate and is scanned afresh.
* A tool's sole required parameter is a string when its property schema says ``"type":
  "string"`` (or a list of types containing it).
"""

import enum
import re
import string
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from toolloop.states.errors import InvalidOption, UsageError
from toolloop.states.json_policy import JsonInputError, loads
from toolloop.states.loop_config import VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS

__all__ = ["Feed", "Flush", "VerbatimCall", "VerbatimToolCallParser"]


@attrs.frozen
class VerbatimCall:
    """A tool call recovered from the visible text."""

    name: str
    """The exposed tool name that anchored the call."""
    args: dict[str, Any]
    """The JSON object; ``{param: value}`` for a sole string; ``{}`` for ``()``."""
    raw: str
    """The exact text the call consumed, code wrappers included; it is never shown."""


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


class _Mode(enum.Enum):
    PLAIN = enum.auto()  #: nothing held; text is visible as it arrives
    TICKS = enum.auto()  #: a run of backticks that may open a code span or a fence
    OPENED = enum.auto()  #: spaces after the backticks, before a name, a tag or a newline
    TAG = enum.auto()  #: a fence's language tag, which may also be the name (```search(...)```)
    TAG_WS = enum.auto()  #: spaces after the tag: "(" calls, a newline opens the fence
    FENCE_WS = enum.auto()  #: whitespace between the fence's first line and the name
    NAME = enum.auto()  #: an identifier that is still a prefix of an exposed name
    NAME_WS = enum.auto()  #: a full name and spaces, awaiting "("
    ARGS = enum.auto()  #: the arguments, until the parentheses balance
    CLOSER = enum.auto()  #: a parsed call in code, awaiting its closing backticks

    # members are singletons: hashing by identity keeps the per-step dispatch in C (Enum's own
    # __hash__ is Python code, called on every step)
    __hash__ = object.__hash__


_TICK_RUN: Final = re.compile(r"`*+")
_SPACES: Final = re.compile(r"[ \t]*+")
_GAP: Final = " \t\r\n"  # what may stand between a name and "("
_GAP_RUN: Final = re.compile(r"[ \t\r\n]*+")
_WORD: Final = frozenset(string.ascii_letters + string.digits + "_")  # no name starts after one
_NOT_WORD: Final = re.compile(r"[^A-Za-z0-9_]")
_BLANKS: Final = re.compile(r"\s*+")
_STRING_STOP: Final = re.compile(r'["\\]')
_ARGS_STOP: Final = re.compile(r'[()"]')
_FENCE_MIN: Final = 3
_TAG_ONLY: Final = "+#.-"
_NOT_IN_NAMES: Final = frozenset(' \t\r\n\f\v`()"')


def _end_of(pattern: re.Pattern[str], s: str, i: int, end: int) -> int:
    """Where the run that ``pattern`` reads from ``i`` ends (it may read nothing)."""
    found = pattern.match(s, i, end)
    return found.end() if found else i


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
    {_Mode.TAG, _Mode.TAG_WS, _Mode.FENCE_WS, _Mode.NAME, _Mode.NAME_WS}
)  # modes whose held text ends in a word: a later name may start inside it
_PLAIN: Final = _Mode.PLAIN  # module-level aliases: enum attribute lookups cost on the hot path
_NAME: Final = _Mode.NAME
_NAME_WS: Final = _Mode.NAME_WS


def _sole_string_param(schema: Mapping[str, Any]) -> str | None:
    """The parameter a bare JSON string fills: the only required one, typed as a string."""
    required = list(schema.get("required") or ())
    if len(required) != 1:
        return None
    prop = (schema.get("properties") or {}).get(required[0]) or {}
    kind = prop.get("type") if isinstance(prop, Mapping) else None
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    return str(required[0]) if is_string else None


def _check_name(name: str) -> str:
    """Refuse a name that could never anchor, rather than silently never finding its calls."""
    if not name or not _NOT_IN_NAMES.isdisjoint(name):
        raise InvalidOption(
            f"tool name {name!r} cannot anchor a verbatim call: "
            "it must be non-empty, without whitespace, backticks, parentheses or quotes"
        )
    return name


class VerbatimToolCallParser:
    """Split one stream's visible text into visible text and tool calls; see the module doc."""

    __slots__ = (
        "_after_word",
        "_args_at",
        "_breaks",
        "_call",
        "_cap",
        "_closer_ticks",
        "_depth",
        "_ended",
        "_escape",
        "_fenced",
        "_held",
        "_held_len",
        "_id_run",
        "_in_string",
        "_lengths",
        "_longest",
        "_mode",
        "_name_alive",
        "_name_chars",
        "_names",
        "_no_args",
        "_out",
        "_paren_at",
        "_prefixes",
        "_steps",
        "_string_param",
        "_tag_run",
        "_tick_at",
        "_ticks",
        "_word",
        "_word_at",
    )

    _mode: _Mode
    _held: list[str]
    _held_len: int
    _word: str
    _call: VerbatimCall | None

    def __init__(
        self,
        *,
        tools: Mapping[str, Mapping[str, Any]],
        max_buffer_chars: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    ) -> None:
        if max_buffer_chars < 1:
            raise InvalidOption(f"max_buffer_chars must be >= 1 (got {max_buffer_chars!r})")
        self._names = frozenset(_check_name(name) for name in tools)
        self._no_args = frozenset(n for n, s in tools.items() if not s.get("required"))
        self._string_param = {
            n: p for n, s in tools.items() if (p := _sole_string_param(s)) is not None
        }
        self._prefixes = frozenset(n[:k] for n in self._names for k in range(1, len(n) + 1))
        self._lengths = sorted({len(n) for n in self._names}, reverse=True)
        self._longest = max(self._lengths, default=0)
        # characters of names that are not word characters ("-" in "web-search"): a name may
        # start right after one, inside what is read as one identifier
        self._breaks = "".join(sorted({c for n in self._names for c in n} - _WORD))
        self._name_chars = _WORD | frozenset(self._breaks)
        self._id_run = re.compile(f"[A-Za-z0-9_{re.escape(self._breaks)}]*+")
        self._tag_run = re.compile(f"[\\w{re.escape(self._breaks + _TAG_ONLY)}]*+")
        self._cap = max_buffer_chars
        self._steps: dict[_Mode, Callable[[str, int, int], int]] = {
            _Mode.TICKS: self._ticks_run,
            _Mode.OPENED: self._opened,
            _Mode.TAG: self._tag,
            _Mode.TAG_WS: self._tag_ws,
            _Mode.FENCE_WS: self._fence_ws,
            _Mode.NAME: self._name,
            _Mode.NAME_WS: self._name_ws,
            _Mode.ARGS: self._args,
            _Mode.CLOSER: self._closer,
        }
        self._out: deque[str | VerbatimCall] = deque()  # results not yet handed out
        self._ended = False
        self._after_word = False  # the last character fed so far is a word character
        self._tick_at = self._paren_at = -1  # next "`" / "(" in the chunk at hand, or len
        self._reset()

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
            if self._mode is _Mode.CLOSER:
                self._no_closer()
            if self._mode is not _Mode.PLAIN:
                self._release()
        pending, call = self._next()
        return Flush(pending_text=pending, function_call=call)

    # -- the hot path: plain text, nothing held or queued ------------------------------------

    # ``feed`` first tries these, which decide as ``_scan`` would for the states most chunks
    # meet (nothing held, or a word held at the end of the last chunk), without its overhead.

    def _one_char(self, c: str) -> Feed | None:
        """The result of a one-character chunk in plain text or a word, else None."""
        is_word = c in _WORD
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
            self._after_word = text[-1] in _WORD
        if start < n:
            self._hold_word(text, start)
        return held + text[:start]

    def _held_dies(self, text: str) -> int:
        """Where ``text`` shows the held word (and spaces) is no anchor, as _scan would; or -1."""
        n, j, room = len(text), 0, self._cap - self._held_len
        if self._mode is _NAME:
            if self._breaks:
                return -1  # a name may start inside the word: _scan decides
            j = _end_of(self._id_run, text, 0, n)
            word = self._word + text[:j] if j <= self._longest else ""
            if j > room:
                return -1
            if word not in self._prefixes:
                return j
            if j == n:
                return -1
            if word not in self._names:
                return j
        k = _end_of(_GAP_RUN, text, j, n)
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

    def _emit(self, item: str | VerbatimCall) -> None:
        if item:
            self._out.append(item)

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

    # -- the candidate ----------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget the candidate; back to plain text."""
        self._mode = _Mode.PLAIN
        self._held = []  # the candidate's text; invariant: _held_len <= _cap
        self._held_len = 0
        self._ticks = 0  # backticks of the code opener; 0 for a bare call
        self._fenced = False  # the opener ended its line: a fence, not an inline span
        self._word = ""  # the identifier read so far, while it may be a name
        self._name_alive = True  # TAG only: the tag may still be the tool name
        self._args_at = 0  # held length at the end of "name("
        self._depth = 0  # open parentheses outside JSON strings
        self._in_string = self._escape = False
        self._call = None  # CLOSER only: the parsed call
        self._closer_ticks = 0  # CLOSER only: closing backticks seen
        self._word_at = 0  # held length where the name or the tag starts

    def _keep(self, s: str, i: int, j: int) -> None:
        if j > i:
            self._held.append(s[i:j])
            self._held_len += j - i

    def _release(self) -> None:
        """Fail the candidate: its text becomes visible."""
        self._emit("".join(self._held))
        self._reset()

    def _to(self, mode: _Mode, at: int) -> int:
        self._mode = mode
        return at

    def _fail(self, at: int) -> int:
        """Release the candidate; the character at ``at`` is scanned afresh."""
        self._release()
        return at

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
        return not (s[a - 1] in _WORD if a else self._after_word)

    # -- scanning ---------------------------------------------------------------------------

    def _scan(self, s: str) -> None:
        i, n = 0, len(s)
        steps = self._steps
        while i < n:
            if self._mode is _PLAIN:
                i = self._plain(s, i)
            elif self._held_len < self._cap:
                i = steps[self._mode](s, i, min(n, i + self._cap - self._held_len))
            elif self._mode is _Mode.CLOSER:
                self._no_closer()
            elif self._mode in _WORD_MODES:
                self._fail_word(i)
            else:
                self._release()
        if n:
            self._after_word = s[-1] in _WORD

    def _plain(self, s: str, i: int) -> int:
        """Emit prose up to the next candidate and enter the mode that reads it."""
        start, self._mode = self._prose_end(s, i)
        self._emit(s[i:start])
        return start

    def _prose_end(self, s: str, lo: int) -> tuple[int, _Mode]:
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
                return start, _Mode.NAME
            k = self._paren_at + 1
        if stop < n:
            return stop, _Mode.TICKS
        start = self._tail_start(s, lo)
        return (start, _Mode.NAME) if start < n else (n, _Mode.PLAIN)

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
        n, u = len(s), _end_of(_TICK_RUN, s, tick, len(s))
        v = _end_of(_SPACES, s, u, n)
        if u - tick >= _FENCE_MIN or v == n:
            return -1
        w = _end_of(self._id_run, s, v, n)
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
        a = j - _end_of(self._id_run, back, 0, len(back))
        if self._at_boundary(s, a) and s[a:j] in viable:
            return a
        if self._breaks:  # a name may also start after a non-word character inside the word
            for found in _NOT_WORD.finditer(s, a, j):
                if s[found.end() : j] in viable:
                    return found.end()
        return n

    # Each step reads from ``i`` up to ``end`` (the chunk's end, or where the cap is reached),
    # keeps what it read, and returns where the next step starts; it either consumes a
    # character or changes mode, so the scan always progresses.

    def _ticks_run(self, s: str, i: int, end: int) -> int:
        j = _end_of(_TICK_RUN, s, i, end)
        self._keep(s, i, j)
        self._ticks += j - i
        return self._to(_Mode.OPENED, j) if j < end else j

    def _opened(self, s: str, i: int, end: int) -> int:
        j = _end_of(_SPACES, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        c, fence = s[j], self._ticks >= _FENCE_MIN
        self._word_at = self._held_len
        if fence and _end_of(self._tag_run, s, j, j + 1) > j:
            return self._to(_Mode.TAG, j)
        if not fence and c in self._name_chars:
            return self._to(_Mode.NAME, j)
        return self._line_end(s, j) if fence else self._fail(j)

    def _line_end(self, s: str, j: int) -> int:
        """A newline ends a fence's first line; anything else fails it."""
        if s[j] not in "\r\n":
            return self._fail(j)
        self._keep(s, j, j + 1)
        self._fenced = True
        if not self._name_alive:
            self._word = ""  # what stays is a tag that is a name: "(" may still follow it
        return self._to(_Mode.FENCE_WS, j + 1)

    def _tag(self, s: str, i: int, end: int) -> int:
        j = _end_of(self._tag_run, s, i, end)
        if self._name_alive:
            word = self._word + s[i:j] if j - i <= self._longest else ""
            self._name_alive = word in self._prefixes
            self._word = word if self._name_alive else ""
        self._keep(s, i, j)
        if j == end:
            return j
        self._name_alive = self._name_alive and self._word in self._names
        if s[j] == "(":
            return self._anchor(s, j) if self._name_alive else self._fail_word(j)
        return self._to(_Mode.TAG_WS, j) if s[j] in " \t" else self._line_end(s, j)

    def _tag_ws(self, s: str, i: int, end: int) -> int:
        j = _end_of(_SPACES, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        if s[j] == "(":
            return self._anchor(s, j) if self._name_alive else self._fail_word(j)
        return self._line_end(s, j)

    def _fence_ws(self, s: str, i: int, end: int) -> int:
        j = _end_of(_BLANKS, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        c = s[j]
        if c == "(":
            return self._anchor(s, j) if self._word in self._names else self._fail_word(j)
        if c not in self._name_chars:
            return self._fail(j)
        self._word, self._word_at = "", self._held_len
        return self._to(_Mode.NAME, j)

    def _name(self, s: str, i: int, end: int) -> int:
        j = _end_of(self._id_run, s, i, end)
        word = self._word + s[i:j] if j - i <= self._longest else ""
        self._keep(s, i, j)
        if word not in self._prefixes:
            return self._no_name(j)
        self._word = word
        if j == end:
            return j
        return self._to(_Mode.NAME_WS, j) if word in self._names else self._no_name(j)

    def _no_name(self, at: int) -> int:
        """The word is no name; only a name with a non-word character can start inside it."""
        return self._fail_word(at) if self._breaks else self._fail(at)

    def _name_ws(self, s: str, i: int, end: int) -> int:
        j = _end_of(_GAP_RUN, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        return self._anchor(s, j) if s[j] == "(" else self._fail(j)

    def _anchor(self, s: str, j: int) -> int:
        """``name(`` is complete: the arguments start after ``j``."""
        self._keep(s, j, j + 1)
        self._args_at, self._depth = self._held_len, 1
        return self._to(_Mode.ARGS, j + 1)

    def _args(self, s: str, i: int, end: int) -> int:
        """Count parentheses outside JSON strings, jumping between the characters that matter."""
        pos = i
        while pos < end:
            if self._escape:
                self._escape, pos = False, pos + 1
                continue
            found = (_STRING_STOP if self._in_string else _ARGS_STOP).search(s, pos, end)
            if found is None:
                pos = end
                break
            c, pos = found.group(), found.end()
            if c == "\\":
                self._escape = True
            elif c == '"':
                self._in_string = not self._in_string
            elif c == "(":
                self._depth += 1
            elif self._depth == 1:
                self._keep(s, i, pos)
                self._complete()
                return pos
            else:
                self._depth -= 1
        self._keep(s, i, pos)
        return pos

    def _complete(self) -> None:
        """The parentheses balance: a valid call is queued (or awaits its closer), else released."""
        raw = "".join(self._held)
        args = self._parse_args(self._word, raw[self._args_at : -1])
        if args is None:
            self._release()
            return
        call = VerbatimCall(name=self._word, args=args, raw=raw)
        if not self._ticks:
            self._emit(call)
            self._reset()
            return
        self._call, self._held = call, []
        self._mode = _Mode.CLOSER

    def _parse_args(self, name: str, text: str) -> dict[str, Any] | None:
        """The arguments the text between the parentheses stands for, or None if refused."""
        body = text.strip()
        if not body:
            return {} if name in self._no_args else None
        try:
            value = loads(body, where=f"the arguments of {name}")
        except JsonInputError:
            return None
        if isinstance(value, dict):
            return value
        if isinstance(value, str) and name in self._string_param:
            return {self._string_param[name]: value}
        return None

    def _closer(self, s: str, i: int, end: int) -> int:
        j = i if self._closer_ticks else _end_of(_BLANKS if self._fenced else _SPACES, s, i, end)
        k = _end_of(_TICK_RUN, s, j, min(end, j + self._ticks - self._closer_ticks))
        self._keep(s, i, k)
        self._closer_ticks += k - j
        if self._closer_ticks == self._ticks:
            call = self._parsed()
            self._emit(attrs.evolve(call, raw=call.raw + "".join(self._held)))
            self._reset()
            return k
        if k < end:
            self._no_closer()
        return k

    def _no_closer(self) -> None:
        """The closer did not follow: the call stands; what was held after it is text again."""
        call, ticks, text = self._parsed(), self._closer_ticks, "".join(self._held)
        self._emit(call)
        self._reset()
        self._emit(text[: len(text) - ticks])
        if ticks:  # a shorter run of backticks may open code of its own
            self._held, self._held_len, self._ticks = [text[-ticks:]], ticks, ticks
            self._mode = _Mode.TICKS

    def _parsed(self) -> VerbatimCall:
        assert self._call is not None, "CLOSER always holds the parsed call"
        return self._call
