"""Traces: what one attempt did, step by step, as JSON lines that replay exactly.

A trace (format 2) opens with the attempt's configuration and turn, records
each step as one `event` line, one `effect` line per effect and one `step` line
naming the move taken and the phases on both sides, and closes with an `end`
line counting the steps:

    {"kind": "start", "version": 2, "config": {...}, "turn": {...}}
    {"kind": "event", "event": {"_type": "TurnStarted"}}
    {"kind": "effect", "effect": {"_type": "StreamOnce", "function_history": [...], ...},
     "reuse": {"function_history": 3}}
    {"kind": "step", "move": "started", "source": "idle", "dest": "streaming"}
    {"kind": "end", "steps": 1}

The file grows linearly with the attempt: a tuple field of an event or effect
that starts with the items of the same field of the previous event or effect of
its type (the history every provider call repeats, its context, its model
parts) is written as the items after them, and `reuse` says how many to take
from before; a field holding an attrs value is cut the same way, its counts
nested under its name (`"reuse": {"context": {"context_items": 4}}`). A file
without its `end` line was cut off (a crash, a full disk) and is refused, as
is a blank line, a line twice, an unknown field, a field of the wrong shape or
a trace of another format version (format 1, written before `end` and `reuse`
existed, cannot be told complete: record it again).

`replay` runs the events again through `step` alone: the same effects and
moves must come out, or it says where they differ. This module does no I/O:
`TraceEncoder` turns steps into lines as they happen and `load_bytes` reads a
file's bytes; `toolloop.effects.observe.trace_file` writes a running turn's trace.
"""

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import cattrs

from toolloop.engine.commands import Effect
from toolloop.engine.events import Event
from toolloop.engine.step import InvalidEvent, initial_state, step
from toolloop.states import LoopConfig, Phase, TurnSettings, json_policy
from toolloop.states.convert import from_json, to_json
from toolloop.states.errors import ToolloopError

#: The format this module writes and the only one it reads.
VERSION = 3


@attrs.frozen(kw_only=True)
class TraceStep:
    """One call of `step`: the event in, the effects out, the move between two phases."""

    event: Event
    effects: tuple[Effect, ...]
    move: str
    source: Phase
    dest: Phase


@attrs.frozen(kw_only=True)
class Trace:
    """A whole attempt: where it started and every step it took."""

    config: LoopConfig
    turn: TurnSettings
    steps: tuple[TraceStep, ...] = ()


class TraceError(ToolloopError, ValueError):
    """A trace file that cannot be read: names the line and what was wrong."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


class TraceMismatch(ToolloopError, ValueError):
    """A well-formed trace whose events do not replay to its recorded effects and moves."""


Redact = Callable[[str, Any], Any]
"""(tool name, arguments) -> the arguments with the tool's secrets replaced."""


class TraceEncoder:
    """Turns an attempt into trace lines one step at a time, without newlines.

    It keeps only the last event and effect of each type, the base of the next
    one's `reuse` (values the turn holds anyway), so a turn's trace can be
    written as it runs without keeping its steps. `redact` hides tool secrets
    in every call's arguments and in the failed-tool notice's; since the engine
    only copies arguments, a redacted trace still replays to its own (redacted)
    effects.
    """

    def __init__(self, redact: Redact | None = None) -> None:
        self._redact = redact
        self._last: dict[type, Any] = {}
        self._steps = 0

    def start(self, config: LoopConfig, turn: TurnSettings) -> str:
        """The first line: the format version, the configuration and the turn."""
        start = {"kind": "start", "version": VERSION, "config": to_json(config)}
        return json.dumps({**start, "turn": to_json(turn)})

    def step(self, record: TraceStep) -> Iterator[str]:
        """The lines of one step: its event, each effect, the move."""
        self._steps += 1
        yield self._line("event", record.event, Event)
        for effect in record.effects:
            yield self._line("effect", effect, Effect)
        move = {"move": record.move, "source": record.source.value, "dest": record.dest.value}
        yield json.dumps({"kind": "step", **move})

    def end(self) -> str:
        """The last line: how many steps came before it."""
        return json.dumps({"kind": "end", "steps": self._steps})

    def _line(self, kind: str, value: Any, union: Any) -> str:
        shorter, reuse = _after_shared(self._last.get(type(value)), value)
        self._last[type(value)] = value
        line = {"kind": kind, kind: self._hide(to_json(shorter, union))}
        return json.dumps({**line, "reuse": reuse} if reuse else line)

    def _hide(self, data: Any) -> Any:
        return data if self._redact is None else redacted(data, self._redact)


def _after_shared(last: Any, value: Any) -> tuple[Any, dict[str, Any]]:
    """`value` with each tuple field cut after what it shares with `last`'s; the counts cut.

    A field holding an attrs value of the same class as `last`'s is cut the
    same way, its counts nested under its name (a dispatched call's tool
    context carries the turn's context items, again on every call).
    """
    if last is None or type(last) is not type(value):
        return value, {}
    reuse: dict[str, Any] = {}
    cut: dict[str, Any] = {}
    for field in attrs.fields(type(value)):
        new, old = getattr(value, field.name), getattr(last, field.name)
        if not field.init:
            continue
        if isinstance(new, tuple) and isinstance(old, tuple):
            if shared := _shared_prefix(old, new):
                reuse[field.name], cut[field.alias] = shared, new[shared:]
        elif attrs.has(type(new)):
            inner, inner_reuse = _after_shared(old, new)
            if inner_reuse:
                reuse[field.name], cut[field.alias] = inner_reuse, inner
    return (attrs.evolve(value, **cut) if cut else value), reuse


def _shared_prefix(old: tuple[Any, ...], new: tuple[Any, ...]) -> int:
    """How many leading items `new` shares with `old`.

    The engine extends a tuple by concatenation, so the usual case, `old` whole,
    is one C-level comparison that meets the very same objects.
    """
    if new[: len(old)] == old:
        return len(old)
    count = 0
    for before, now in zip(old, new, strict=False):
        if before != now:
            break
        count += 1
    return count


def dump_lines(trace: Trace, redact: Redact | None = None) -> Iterator[str]:
    """The whole trace as JSON lines, without newlines; `redact` hides tool secrets."""
    encoder = TraceEncoder(redact)
    yield encoder.start(trace.config, trace.turn)
    for record in trace.steps:
        yield from encoder.step(record)
    yield encoder.end()


def load_bytes(data: bytes) -> Trace:
    """Read a trace file's bytes: UTF-8 text, lines ended by `\\n` (and only by it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise TraceError(line, f"not UTF-8 text (byte {error.start}: {error.reason})") from None
    return load_lines(text.removesuffix("\n").split("\n") if text else [])


def load_lines(lines: Iterable[str]) -> Trace:
    """Read a trace back from its lines; all but a whole, well-formed trace raises `TraceError`.

    A line is split from the next at `\\n` only (`load_bytes` does so): a raw
    U+2028 or form feed inside a JSON string belongs to its line, which
    `str.splitlines` would break.
    """
    reader = _Reader()
    for number, line in enumerate(lines, start=1):
        reader.read(number, line)
    return reader.finished()


#: Every field of each kind of line; the ones after the first set may be left out.
_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "start": (frozenset({"kind", "version", "config", "turn"}), frozenset()),
    "event": (frozenset({"kind", "event"}), frozenset({"reuse"})),
    "effect": (frozenset({"kind", "effect"}), frozenset({"reuse"})),
    "step": (frozenset({"kind", "move", "source", "dest"}), frozenset()),
    "end": (frozenset({"kind", "steps"}), frozenset()),
}


class _Reader:
    """The loader's state between lines: what is open, and the last value of each type."""

    def __init__(self) -> None:
        self.trace: Trace | None = None
        self.steps: list[TraceStep] = []
        self.event: Event | None = None
        self.event_line = 0
        self.effects: list[Effect] = []
        self.last: dict[type, Any] = {}
        self.ended = 0
        self.number = 0

    def read(self, number: int, line: str) -> None:
        self.number = number
        if self.ended:
            raise TraceError(number, f"a line after the end line (line {self.ended})")
        if not line.strip():
            raise TraceError(number, "a blank line (a trace has one JSON object a line)")
        record = _record(number, line)
        kind = record.get("kind")
        if self.trace is None:
            if kind != "start":
                raise TraceError(number, f"expected the start line, got kind {kind!r}")
            self.trace = _start(number, record)
        elif kind == "event":
            self.read_event(number, record)
        elif kind == "effect" and self.event is not None:
            self.effects.append(self.value(number, record, "effect", Effect))
        elif kind == "step" and self.event is not None:
            self.steps.append(_step(number, record, self.event, self.effects))
            self.event, self.effects = None, []
        elif kind == "end" and self.event is None:
            self.read_end(number, record)
        else:
            raise TraceError(number, f"unexpected line of kind {kind!r} here")

    def read_event(self, number: int, record: dict[str, Any]) -> None:
        if self.event is not None:
            raise TraceError(
                number,
                f"an event line before the step line of the event on line {self.event_line} "
                "(a line written twice?)",
            )
        self.event, self.event_line = self.value(number, record, "event", Event), number

    def read_end(self, number: int, record: dict[str, Any]) -> None:
        _check_fields(number, record, "end")
        if not self.steps:
            raise TraceError(number, "the end line comes before any step")
        count = record["steps"]
        if count != len(self.steps) or isinstance(count, bool):
            raise TraceError(
                number, f"the end line counts {count!r} steps, the trace has {len(self.steps)}"
            )
        self.ended = number

    def value(self, number: int, record: dict[str, Any], kind: str, union: Any) -> Any:
        """The event or effect of a line, its reused items put back in front."""
        _check_fields(number, record, kind)
        value = _structure(number, record[kind], union, kind.title())
        reuse = record.get("reuse", {})
        last = self.last.get(type(value))
        value = _with_reused(number, value, reuse, last)
        self.last[type(value)] = value
        return value

    def finished(self) -> Trace:
        if self.trace is None:
            raise TraceError(self.number, "the trace is empty")
        if self.event is not None:
            raise TraceError(
                self.number,
                f"the trace ends inside a step: the event on line {self.event_line} has no "
                "step line (cut off: a crash or a full disk?)",
            )
        if not self.ended:
            where = f"{len(self.steps)} steps" if self.steps else "its start line"
            raise TraceError(
                self.number,
                f"the trace ends after {where} without its end line "
                "(cut off: a crash or a full disk?)",
            )
        return attrs.evolve(self.trace, steps=tuple(self.steps))


def _with_reused(number: int, value: Any, reuse: Any, last: Any, path: str = "") -> Any:
    """`value` with each field named in `reuse` prefixed by that many items of `last`'s."""
    if not isinstance(reuse, dict):
        raise TraceError(number, f"reuse must be an object of counts, got {reuse!r}")
    if not reuse:
        return value
    name = type(value).__name__
    if type(last) is not type(value):
        raise TraceError(number, f"reuse{path}, but no {name} came before")
    fields = {field.name: field for field in attrs.fields(type(value)) if field.init}
    prefixed = {}
    for key, count in reuse.items():
        field, where = fields.get(key), f"{path}.{key}"
        before, now = getattr(last, key, None), getattr(value, key, None)
        if field is not None and isinstance(count, dict) and attrs.has(type(now)):
            prefixed[field.alias] = _with_reused(number, now, count, before, where)
            continue
        if field is None or not isinstance(before, tuple) or not isinstance(now, tuple):
            raise TraceError(number, f"reuse names {where[1:]!r}, which is no list field of {name}")
        if not isinstance(count, int) or isinstance(count, bool) or not 0 < count <= len(before):
            raise TraceError(
                number, f"reuse of {where[1:]!r} must count 1 to {len(before)} items, got {count!r}"
            )
        prefixed[field.alias] = before[:count] + now
    return attrs.evolve(value, **prefixed)


def replay(trace: Trace) -> list[str]:
    """Run the trace's events through `step` alone; every difference, as a sentence."""
    state = initial_state(trace.config, trace.turn)
    differences: list[str] = []
    same = _SameEffects()
    for index, record in enumerate(trace.steps):
        try:
            out = step(state, record.event)
        except InvalidEvent as error:
            return [*differences, f"step {index}: {error}"]
        if not same(out.effects, record.effects):
            differences.append(f"step {index} ({type(record.event).__name__}): effects differ")
        if (out.move, state.phase, out.state.phase) != (record.move, record.source, record.dest):
            differences.append(
                f"step {index}: recorded {record.source.value} -{record.move}-> "
                f"{record.dest.value}, replayed {state.phase.value} -{out.move}-> "
                f"{out.state.phase.value}"
            )
        state = out.state
    return differences


class _SameEffects:
    """Compares replayed effects with recorded ones in time linear in the trace.

    While every pair so far was equal, two effects are equal when each reuses as
    many items of the previous effect of its type and the rest is equal (the
    previous two being equal, the wholes are): each provider call's history is
    compared by its new entries, where comparing it whole would make a replay
    quadratic. After a difference, whole effects are compared.
    """

    def __init__(self) -> None:
        self._replayed: dict[type, Any] = {}
        self._recorded: dict[type, Any] = {}
        self._equal_so_far = True

    def __call__(self, replayed: tuple[Effect, ...], recorded: tuple[Effect, ...]) -> bool:
        same = len(replayed) == len(recorded) and all(map(self._same, replayed, recorded))
        self._equal_so_far &= same
        return same

    def _same(self, replayed: Effect, recorded: Effect) -> bool:
        if not self._equal_so_far or type(replayed) is not type(recorded):
            return replayed == recorded
        kind = type(recorded)
        ours = _after_shared(self._replayed.get(kind), replayed)
        theirs = _after_shared(self._recorded.get(kind), recorded)
        self._replayed[kind], self._recorded[kind] = replayed, recorded
        return ours == theirs


def replayed(trace: Trace) -> Trace:
    """`trace` when it replays exactly; otherwise `TraceMismatch` naming the first difference."""
    differences = replay(trace)
    if differences:
        more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
        raise TraceMismatch(f"does not replay: {differences[0]}{more}")
    return trace


_CALL_KEYS = frozenset({"name", "args"})


def redacted(data: Any, redact: Redact) -> Any:
    """`data` (unstructured JSON) with the arguments of every call and failure notice redacted.

    A call is any object with a `name` and `args` (a FunctionCall, a history
    entry, a dispatched call, tagged or not); a failure notice names its tool
    in `tool_name`.
    """
    if isinstance(data, list):
        return [redacted(item, redact) for item in data]
    if not isinstance(data, dict):
        return data
    data = {key: redacted(value, redact) for key, value in data.items()}
    name = data.get("name") if data.keys() >= _CALL_KEYS else data.get("tool_name")
    if isinstance(name, str) and "args" in data:
        data["args"] = redact(name.strip(), data["args"])
    return data


def _record(number: int, line: str) -> dict[str, Any]:
    """One line under the JSON policy: bounded in size and depth, so never a RecursionError."""
    try:
        record = json_policy.loads(line, where=f"line {number}")
    except json_policy.JsonInputError as error:
        problem = f"not JSON ({error.reason} at column {error.column})" if error.column else None
        raise TraceError(number, problem or error.problem) from None
    if not isinstance(record, dict):
        raise TraceError(number, f"expected an object, got {type(record).__name__}")
    return record


def _check_fields(number: int, record: dict[str, Any], kind: str) -> None:
    """A line of `kind` has every field it needs and no other."""
    needed, optional = _FIELDS[kind]
    if unknown := sorted(record.keys() - needed - optional):
        raise TraceError(number, f"unknown field {unknown[0]!r} in the {kind} line")
    if missing := sorted(needed - record.keys()):
        raise TraceError(number, f"the {kind} line needs {missing[0]!r}")


def _start(number: int, record: dict[str, Any]) -> Trace:
    version = record.get("version")
    if version != VERSION:
        written = "an older toolloop (format 1)" if version is None else f"format {version!r}"
        raise TraceError(
            number,
            f"a trace written by {written}; this toolloop reads format {VERSION} only: "
            "record the turn again",
        )
    _check_fields(number, record, "start")
    config = _structure(number, record["config"], LoopConfig, "LoopConfig")
    turn = _structure(number, record["turn"], TurnSettings, "TurnSettings")
    return Trace(config=config, turn=turn)


def _structure(number: int, data: Any, cls: Any, name: str) -> Any:
    try:
        return from_json(data, cls)
    except Exception as error:  # cattrs raises several types; all mean "not this shape"
        raise TraceError(number, f"not a valid {name}: {_why(error)}") from None


def _why(error: Exception) -> str:
    """cattrs' error as its path-and-reason sentences (`invalid value for type ... @ $.x`)."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error, path="$"))
    return str(error)


def _step(number: int, record: dict[str, Any], event: Event, effects: list[Effect]) -> TraceStep:
    _check_fields(number, record, "step")
    try:
        source, dest = Phase(record["source"]), Phase(record["dest"])
    except ValueError as error:
        raise TraceError(number, str(error)) from None
    move = record["move"]
    if not isinstance(move, str):
        raise TraceError(number, f"expected the move's name, got {move!r}")
    return TraceStep(event=event, effects=tuple(effects), move=move, source=source, dest=dest)
