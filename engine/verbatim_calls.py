"""Read one candidate verbatim call, from its code opener or name to its closer (SPEC 10).

`toolloop.engine.verbatim` scans the stream for where a call may start; from there this
module's `CallReader` reads the candidate, one piece at a time, until it is a call
(`VerbatimCall`) or fails and its text is released as visible. Two concerns, two modules:
the scanner decides what is prose and what may be a call, the reader what a candidate is.

Each mode reads one piece with an anchored, possessive pattern (never a backtracking one), so
each character is looked at a bounded number of times:

* ``TICKS`` -> ``OPENED``: a run of backticks and the spaces after it. One or two backticks
  open an inline span, three or more may open a fence (its language tag is ``TAG``, then the
  end of the line, then any whitespace in ``FENCE_WS``).
* ``NAME`` -> ``NAME_WS``: an identifier that is still a prefix of an exposed name, then
  spaces, tabs and newlines.
* ``ARGS``: after ``(``, parentheses are counted outside JSON strings (escapes honoured) until
  they balance; then the span is a call or, whole, visible text.
* ``CLOSER``: a parsed call that a code opener wrapped waits for its closing backticks.

Choices where SPEC 10 is silent
-------------------------------
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
* A tool's sole required parameter is a string when its property schema says ``"type":
  "string"`` (or a list of types containing it).
"""

import enum
import re
import string
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from toolloop.states.errors import InvalidOption
from toolloop.states.json_policy import JsonInputError, loads

__all__ = ["CallReader", "Mode", "VerbatimCall"]


@attrs.frozen
class VerbatimCall:
    """A tool call recovered from the visible text."""

    name: str
    """The exposed tool name that anchored the call."""
    args: dict[str, Any]
    """The JSON object; ``{param: value}`` for a sole string; ``{}`` for ``()``."""
    raw: str
    """The exact text the call consumed, code wrappers included; it is never shown."""


class Mode(enum.Enum):
    """What the scan is reading: plain text, or one piece of a candidate (a step each)."""

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


TICK_RUN: Final = re.compile(r"`*+")
SPACES: Final = re.compile(r"[ \t]*+")
GAP_RUN: Final = re.compile(r"[ \t\r\n]*+")  # what may stand between a name and "("
WORD: Final = frozenset(string.ascii_letters + string.digits + "_")  # no name starts after one
FENCE_MIN: Final = 3
_BLANKS: Final = re.compile(r"\s*+")
_STRING_STOP: Final = re.compile(r'["\\]')
_ARGS_STOP: Final = re.compile(r'[()"]')
_TAG_ONLY: Final = "+#.-"
_NOT_IN_NAMES: Final = frozenset(' \t\r\n\f\v`()"')


def end_of(pattern: re.Pattern[str], s: str, i: int, end: int) -> int:
    """Where the run that ``pattern`` reads from ``i`` ends (it may read nothing)."""
    found = pattern.match(s, i, end)
    return found.end() if found else i


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


class CallReader:
    """The exposed tools and the candidate call being read; the parser scans around it.

    The parser (`VerbatimToolCallParser`) subclasses it: they share the candidate's state,
    so the scan's hot path reads it without a hop, and the reader's steps are the parser's
    `_steps`. What the reader needs of its scanner is `_fail_word`, declared below.
    """

    __slots__ = (
        "_args_at",
        "_breaks",
        "_call",
        "_closer_ticks",
        "_depth",
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
        "_prefixes",
        "_steps",
        "_string_param",
        "_tag_run",
        "_ticks",
        "_word",
        "_word_at",
    )

    _mode: Mode
    _held: list[str]
    _held_len: int
    _word: str
    _call: VerbatimCall | None

    def __init__(self, tools: Mapping[str, Mapping[str, Any]]) -> None:
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
        self._breaks = "".join(sorted({c for n in self._names for c in n} - WORD))
        self._name_chars = WORD | frozenset(self._breaks)
        self._id_run = re.compile(f"[A-Za-z0-9_{re.escape(self._breaks)}]*+")
        self._tag_run = re.compile(f"[\\w{re.escape(self._breaks + _TAG_ONLY)}]*+")
        self._steps: dict[Mode, Callable[[str, int, int], int]] = {
            Mode.TICKS: self._ticks_run,
            Mode.OPENED: self._opened,
            Mode.TAG: self._tag,
            Mode.TAG_WS: self._tag_ws,
            Mode.FENCE_WS: self._fence_ws,
            Mode.NAME: self._name,
            Mode.NAME_WS: self._name_ws,
            Mode.ARGS: self._args,
            Mode.CLOSER: self._closer,
        }
        self._out: deque[str | VerbatimCall] = deque()  # results not yet handed out
        self._reset()

    if TYPE_CHECKING:

        def _fail_word(self, at: int) -> int:
            """The scanner's: fail a word that did not anchor; a name may start inside it."""

    # -- the candidate ----------------------------------------------------------------------

    def _emit(self, item: str | VerbatimCall) -> None:
        """Queue a result: released text, or a call."""
        if item:
            self._out.append(item)

    def _reset(self) -> None:
        """Forget the candidate; back to plain text."""
        self._mode = Mode.PLAIN
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

    def _to(self, mode: Mode, at: int) -> int:
        self._mode = mode
        return at

    def _fail(self, at: int) -> int:
        """Release the candidate; the character at ``at`` is scanned afresh."""
        self._release()
        return at

    # Each step reads from ``i`` up to ``end`` (the chunk's end, or where the cap is reached),
    # keeps what it read, and returns where the next step starts; it either consumes a
    # character or changes mode, so the scan always progresses.

    def _ticks_run(self, s: str, i: int, end: int) -> int:
        j = end_of(TICK_RUN, s, i, end)
        self._keep(s, i, j)
        self._ticks += j - i
        return self._to(Mode.OPENED, j) if j < end else j

    def _opened(self, s: str, i: int, end: int) -> int:
        j = end_of(SPACES, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        c, fence = s[j], self._ticks >= FENCE_MIN
        self._word_at = self._held_len
        if fence and end_of(self._tag_run, s, j, j + 1) > j:
            return self._to(Mode.TAG, j)
        if not fence and c in self._name_chars:
            return self._to(Mode.NAME, j)
        return self._line_end(s, j) if fence else self._fail(j)

    def _line_end(self, s: str, j: int) -> int:
        """A newline ends a fence's first line; anything else fails it."""
        if s[j] not in "\r\n":
            return self._fail(j)
        self._keep(s, j, j + 1)
        self._fenced = True
        if not self._name_alive:
            self._word = ""  # what stays is a tag that is a name: "(" may still follow it
        return self._to(Mode.FENCE_WS, j + 1)

    def _tag(self, s: str, i: int, end: int) -> int:
        j = end_of(self._tag_run, s, i, end)
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
        return self._to(Mode.TAG_WS, j) if s[j] in " \t" else self._line_end(s, j)

    def _tag_ws(self, s: str, i: int, end: int) -> int:
        j = end_of(SPACES, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        if s[j] == "(":
            return self._anchor(s, j) if self._name_alive else self._fail_word(j)
        return self._line_end(s, j)

    def _fence_ws(self, s: str, i: int, end: int) -> int:
        j = end_of(_BLANKS, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        c = s[j]
        if c == "(":
            return self._anchor(s, j) if self._word in self._names else self._fail_word(j)
        if c not in self._name_chars:
            return self._fail(j)
        self._word, self._word_at = "", self._held_len
        return self._to(Mode.NAME, j)

    def _name(self, s: str, i: int, end: int) -> int:
        j = end_of(self._id_run, s, i, end)
        word = self._word + s[i:j] if j - i <= self._longest else ""
        self._keep(s, i, j)
        if word not in self._prefixes:
            return self._no_name(j)
        self._word = word
        if j == end:
            return j
        return self._to(Mode.NAME_WS, j) if word in self._names else self._no_name(j)

    def _no_name(self, at: int) -> int:
        """The word is no name; only a name with a non-word character can start inside it."""
        return self._fail_word(at) if self._breaks else self._fail(at)

    def _name_ws(self, s: str, i: int, end: int) -> int:
        j = end_of(GAP_RUN, s, i, end)
        self._keep(s, i, j)
        if j == end:
            return j
        return self._anchor(s, j) if s[j] == "(" else self._fail(j)

    def _anchor(self, s: str, j: int) -> int:
        """``name(`` is complete: the arguments start after ``j``."""
        self._keep(s, j, j + 1)
        self._args_at, self._depth = self._held_len, 1
        return self._to(Mode.ARGS, j + 1)

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
        self._mode = Mode.CLOSER

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
        j = i if self._closer_ticks else end_of(_BLANKS if self._fenced else SPACES, s, i, end)
        k = end_of(TICK_RUN, s, j, min(end, j + self._ticks - self._closer_ticks))
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
            self._mode = Mode.TICKS

    def _parsed(self) -> VerbatimCall:
        assert self._call is not None, "CLOSER always holds the parsed call"
        return self._call
