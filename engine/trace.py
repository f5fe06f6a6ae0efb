"""Traces: what one attempt did, step by step, as JSON lines that replay exactly.

A trace opens with the attempt's configuration and turn, then records each step
as one `event` line, one `effect` line per effect, and one `step` line naming
the move taken and the phases on both sides:

    {"kind": "start", "config": {...}, "turn": {...}}
    {"kind": "event", "event": {"_type": "TurnStarted"}}
    {"kind": "effect", "effect": {"_type": "StreamOnce", ...}}
    {"kind": "step", "move": "started", "source": "idle", "dest": "streaming"}

`replay` runs the events again through `step` alone: the same effects and
moves must come out, or it says where they differ.
"""

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from toolloop.engine.commands import Effect
from toolloop.engine.events import Event
from toolloop.engine.step import InvalidEvent, initial_state, step
from toolloop.states import LoopConfig, Phase, TurnSettings, json_policy
from toolloop.states.convert import from_json, to_json
from toolloop.states.errors import ToolloopError


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


Redact = Callable[[str, Any], Any]
"""(tool name, arguments) -> the arguments with the tool's secrets replaced."""


def dump_lines(trace: Trace, redact: Redact | None = None) -> Iterator[str]:
    """The trace as JSON lines, without newlines; `redact` hides tool secrets.

    Redaction applies to every call's arguments and to the failed-tool notice's
    arguments alike; since the engine only copies arguments, the redacted trace
    still replays to its own (redacted) effects.
    """
    start = {"kind": "start", "config": to_json(trace.config), "turn": to_json(trace.turn)}
    yield json.dumps(start)

    def hide(data: Any) -> Any:
        return data if redact is None else redacted(data, redact)

    for record in trace.steps:
        yield json.dumps({"kind": "event", "event": hide(to_json(record.event, Event))})
        for effect in record.effects:
            yield json.dumps({"kind": "effect", "effect": hide(to_json(effect, Effect))})
        move = {"move": record.move, "source": record.source.value, "dest": record.dest.value}
        yield json.dumps({"kind": "step", **move})


def load_lines(lines: Iterable[str]) -> Trace:
    """Read a trace back; a malformed line raises `TraceError` naming it."""
    trace: Trace | None = None
    steps: list[TraceStep] = []
    event: Event | None = None
    effects: list[Effect] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(number, line)
        kind = record.get("kind")
        if trace is None:
            if kind != "start":
                raise TraceError(number, f"expected the start line, got kind {kind!r}")
            config = _structure(number, record.get("config"), LoopConfig)
            trace = Trace(config=config, turn=_structure(number, record.get("turn"), TurnSettings))
        elif kind == "event":
            event, effects = _structure(number, record.get("event"), Event), []
        elif kind == "effect" and event is not None:
            effects.append(_structure(number, record.get("effect"), Effect))
        elif kind == "step" and event is not None:
            steps.append(_step(number, record, event, effects))
            event = None
        else:
            raise TraceError(number, f"unexpected line of kind {kind!r} here")
    if trace is None:
        raise TraceError(0, "the trace is empty")
    if event is not None:
        raise TraceError(number, "the last event has no step line")
    return attrs.evolve(trace, steps=tuple(steps))


def replay(trace: Trace) -> list[str]:
    """Run the trace's events through `step` alone; every difference, as a sentence."""
    state = initial_state(trace.config, trace.turn)
    differences: list[str] = []
    for index, record in enumerate(trace.steps):
        try:
            out = step(state, record.event)
        except InvalidEvent as error:
            return [*differences, f"step {index}: {error}"]
        if out.effects != record.effects:
            differences.append(f"step {index} ({type(record.event).__name__}): effects differ")
        if (out.move, state.phase, out.state.phase) != (record.move, record.source, record.dest):
            differences.append(
                f"step {index}: recorded {record.source.value} -{record.move}-> "
                f"{record.dest.value}, replayed {state.phase.value} -{out.move}-> "
                f"{out.state.phase.value}"
            )
        state = out.state
    return differences


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


def _structure(number: int, data: Any, cls: Any) -> Any:
    try:
        return from_json(data, cls)
    except Exception as error:  # cattrs raises several types; all mean "not this shape"
        name = getattr(cls, "__name__", str(cls))
        raise TraceError(number, f"not a valid {name}: {error}") from None


def _step(number: int, record: dict[str, Any], event: Event, effects: list[Effect]) -> TraceStep:
    try:
        source, dest = Phase(record.get("source")), Phase(record.get("dest"))
    except ValueError as error:
        raise TraceError(number, str(error)) from None
    move = record.get("move")
    if not isinstance(move, str):
        raise TraceError(number, f"expected the move's name, got {move!r}")
    return TraceStep(event=event, effects=tuple(effects), move=move, source=source, dest=dest)
