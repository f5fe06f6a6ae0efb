"""Scenario files (SCENARIOS.md), read strictly into frozen data before anything runs.

Every malformed scenario raises one `ScenarioError` naming the file, the path
inside it (`streams[3].call.name`) and what was expected there: `toolloop
simulate` prints it and exits with status 2. Free-form values (`env` names,
`parameters`, `args`, `data`, `thought_log`, `enhanced_context_item`) are only
checked for their JSON type. A key written twice in one object is an error
too, since JSON would silently keep the last one.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs

from toolloop.effects.registry.tool_registry import (
    NAME_RULE,
    ToolSchemaError,
    check_name,
    check_parameters,
)
from toolloop.states import (
    ApiFamily,
    DeliberateMode,
    JsonObject,
    Persona,
    ProviderDescriptor,
    Sticker,
    StreamStatus,
    Trigger,
    TurnSettings,
    json_policy,
)
from toolloop.states.errors import ToolloopError

E = TypeVar("E", bound=enum.Enum)


class ScenarioError(ToolloopError, ValueError):
    """A scenario file that cannot be run: where in it, and what was expected there."""

    def __init__(self, file: str, path: str, expected: str, got: str) -> None:
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: expected {expected}, got {got}")
        self.file = file
        self.path = path
        self.expected = expected
        self.got = got


@attrs.frozen(kw_only=True)
class ScriptedCall:
    """The tool call a scripted stream ends with."""

    name: str
    args: JsonObject | None = None
    arguments_truncated: bool = False
    id: str | None = None
    """The provider's id for the call; None: `call_<provider call>_<position>`."""


@attrs.frozen(kw_only=True)
class ScriptedStream:
    """What the scripted provider does on one call."""

    status: StreamStatus
    """Resolved: `function_call` with a call, `stopped_by_user` for `kill`, else `completed`."""
    text: str = ""
    details: str = ""
    error: str | None = None
    """The message of an `error` or `timeout` stream."""
    call: ScriptedCall | None = None
    """The first call the stream ends with (the one of `call`, or the first of `calls`)."""
    calls: tuple[ScriptedCall, ...] = ()
    """Every call the stream ends with, in the model's order (`call` is one of them)."""
    thought_log: JsonObject | None = None
    stall: bool = False
    """Stream the text, then go silent: the inactivity timeout (or the kill) ends it."""
    kill: bool = False
    """A genuine stop (kill) arrives during the stream."""
    stop_before_tool: bool = False
    follow_up_before_tool: bool = False
    raises: str | None = None
    """Stream the text, then raise an error with this message (the JSON key `raise`)."""
    follow_up: bool = False
    """After the text, a follow-up message arrives while the call is still open."""
    channel_fails: str | None = None
    """The channel refuses the first text this stream sends, with this message."""
    model_parts: tuple[JsonObject, ...] | None = None
    """The provider-native parts it reports; None: one text part of its text, none when blank."""


@attrs.frozen(kw_only=True)
class ScriptedResult:
    """What a scripted tool does on one run of its code."""

    success: bool = True
    """Defaults to true unless `error` is given."""
    data: Any = None
    error: str | None = None
    message: str | None = None
    end_turn: bool = False
    response_delivered: bool = False
    image_metadata: JsonObject | None = None
    hang: bool = False
    """Never return: the tool timeout (or the kill) ends it."""
    kill: bool = False
    """A genuine stop (kill) arrives while the tool runs."""
    raises: str | None = None
    """Raise an exception with this message (the JSON key `raise`)."""
    delay_ms: int = 0
    """Settle after this much (virtual) time, so a batch's calls finish in any order."""


@attrs.frozen(kw_only=True)
class ScriptedDecision:
    """What a person does about one call that waits for approval (SPEC 6c)."""

    kind: str
    """`approve`, `deny`, `timeout` (nobody answers), `kill` (a genuine stop arrives while
    it waits) or `approve_for` (an approval given for other arguments: refused)."""
    reason: str | None = None
    """The person's words for a denial."""
    args: JsonObject | None = None
    """The other arguments an `approve_for` was given for."""
    delay_ms: int = 0
    """The person answers after this much (virtual) time, so a batch's waits can end in
    another order than the model's."""


@attrs.frozen(kw_only=True)
class ScriptedTool:
    """One tool of the scenario's registry."""

    name: str
    description: str = ""
    parameters: JsonObject = attrs.field(factory=lambda: {"type": "object", "properties": {}})
    requires_follow_up: bool = False
    available_for_provider: bool = True
    available_for_turn: bool = True
    exclusive: bool = False
    """Runs alone within a batch of calls (SPEC 6b)."""
    approval: tuple[ScriptedDecision, ...] | None = None
    """None: no call needs approval; else one decision consumed per call that waits
    (or is asked again), the last repeating (SPEC 6c)."""
    results: tuple[ScriptedResult, ...] = (ScriptedResult(),)
    """One consumed per run of the tool's code; the last repeats."""


@attrs.frozen(kw_only=True)
class Scenario:
    """A whole scenario file, validated."""

    file: str
    env: dict[str, str | int] = attrs.field(factory=dict)
    """Configuration variables, read by `load_config` like the real environment."""
    turn: TurnSettings = attrs.field(factory=TurnSettings)
    tools: tuple[ScriptedTool, ...] = ()
    streams: tuple[ScriptedStream, ...]
    """One consumed per provider call; the last repeats. Never empty."""


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file; any problem raises `ScenarioError`."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(file, "", "a readable UTF-8 file", str(error)) from None
    return parse_scenario(text, file=file)


def parse_scenario(text: str, *, file: str = "<scenario>") -> Scenario:
    """Validate a scenario given as JSON text; `file` names it in errors."""
    try:
        raw = json_policy.loads(text, where=file, object_pairs_hook=_Object)
    except json_policy.JsonInputError as error:
        where = f"line {error.line} column {error.column}" if error.line else ""
        if error.reason != error.problem:  # not JSON at all: the parser's reason
            raise ScenarioError(file, where, "valid JSON", error.reason) from None
        raise ScenarioError(file, "", "JSON within toolloop's bounds", error.problem) from None
    return _scenario(_Node(file, "", raw))


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys its text gave more than once."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        keys = [key for key, _ in pairs]
        self.duplicates = sorted({key for key in keys if keys.count(key) > 1})


@attrs.frozen
class _Node:
    """A value of the file and its path, with checked reads that raise `ScenarioError`."""

    file: str
    path: str
    value: Any

    def fail(self, expected: str, got: str | None = None) -> ScenarioError:
        return ScenarioError(
            self.file, self.path, expected, _describe(self.value) if got is None else got
        )

    def child(self, key: str | int) -> _Node:
        if isinstance(key, int):
            return _Node(self.file, f"{self.path}[{key}]", self.value[key])
        return _Node(self.file, f"{self.path}.{key}" if self.path else key, self.value[key])

    def fields(self, allowed: Collection[str]) -> dict[str, _Node]:
        """The object's members, after rejecting unknown and repeated keys."""
        self.of_type(dict, "an object")
        for key in self.value:
            if key not in allowed:
                keys = ", ".join(sorted(allowed))
                raise _Node(self.file, self.child(key).path, None).fail(
                    f"one of the keys {keys}", f"the unknown key {key!r}"
                )
        for key in self.value.duplicates:
            raise self.child(key).fail("each key once", f"{key!r} twice")
        return {key: self.child(key) for key in self.value}

    def items(self) -> Iterator[_Node]:
        self.of_type(list, "an array")
        return (self.child(index) for index in range(len(self.value)))

    def of_type(self, kind: type | tuple[type, ...], expected: str) -> Any:
        if not isinstance(self.value, kind) or _is_bool_as_int(self.value, kind):
            raise self.fail(expected)
        return self.value

    def enum(self, cls: type[E]) -> E:
        names = ", ".join(member.value for member in cls)
        self.of_type(str, f"one of {names}")
        try:
            return cls(self.value)
        except ValueError:
            raise self.fail(f"one of {names}") from None


def _is_bool_as_int(value: Any, kind: type | tuple[type, ...]) -> bool:
    """JSON `true` is not an integer, although Python's bool is an int."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return isinstance(value, bool) and bool not in kinds


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else json.dumps(value)


Reader = Callable[[_Node], Any]


def _read(fields: dict[str, _Node], key: str, reader: Reader, default: Any) -> Any:
    return reader(fields[key]) if key in fields else default


def _string(node: _Node) -> str:
    value: str = node.of_type(str, "a string")
    return value


def _name(node: _Node) -> str:
    value = _string(node)
    if not value.strip():
        raise node.fail("a non-blank name")
    return value


def _optional_string(node: _Node) -> str | None:
    value: str | None = node.of_type((str, type(None)), "a string or null")
    return value


def _boolean(node: _Node) -> bool:
    value: bool = node.of_type(bool, "true or false")
    return value


def _integer(node: _Node) -> int:
    value: int = node.of_type(int, "an integer")
    return value


def _object(node: _Node) -> JsonObject:
    value: JsonObject = node.of_type(dict, "an object")
    return value


def _optional_object(node: _Node) -> JsonObject | None:
    value: JsonObject | None = node.of_type((dict, type(None)), "an object or null")
    return value


def _anything(node: _Node) -> Any:
    return node.value


def _strings(node: _Node) -> tuple[str, ...]:
    return tuple(_string(item) for item in node.items())


def _scenario(root: _Node) -> Scenario:
    fields = root.fields({"env", "turn", "tools", "streams"})
    if "streams" not in fields:
        raise ScenarioError(root.file, "streams", "a non-empty array of streams", "nothing")
    return Scenario(
        file=root.file,
        env=_read(fields, "env", _env, {}),
        turn=_read(fields, "turn", _turn, TurnSettings()),
        tools=_read(fields, "tools", _tools, ()),
        streams=_streams(fields["streams"]),
    )


def _env(node: _Node) -> dict[str, str | int]:
    _object(node)
    return {
        key: child.of_type((str, int), "a string or an integer") for key, child in _members(node)
    }


def _members(node: _Node) -> Iterator[tuple[str, _Node]]:
    """The members of a free-form object (its keys are not checked)."""
    for key in node.value.duplicates:
        raise node.child(key).fail("each key once", f"{key!r} twice")
    return ((key, node.child(key)) for key in node.value)


TURN_KEYS = {
    "provider", "surface_user_errors", "suppress_user_errors", "user_impersonation",
    "impersonated_username", "impersonated_avatar_url", "direct_message", "locale", "persona",
    "deliberate_mode", "stop_context_queued", "guild_stickers",
}  # fmt: skip


def _turn(node: _Node) -> TurnSettings:
    fields = node.fields(TURN_KEYS)
    defaults = TurnSettings()
    readers: dict[str, Reader] = {
        "provider": _provider,
        "surface_user_errors": _boolean,
        "suppress_user_errors": _boolean,
        "user_impersonation": _boolean,
        "impersonated_username": _optional_string,
        "impersonated_avatar_url": _optional_string,
        "direct_message": _boolean,
        "locale": _name,
        "persona": _persona,
        "deliberate_mode": _deliberate_mode,
        "stop_context_queued": _boolean,
        "guild_stickers": _stickers,
    }
    values = {key: readers[key](child) for key, child in fields.items()}
    return attrs.evolve(defaults, **values)


def _provider(node: _Node) -> ProviderDescriptor:
    fields = node.fields({"name", "api_family", "server"})
    return ProviderDescriptor(
        name=_read(fields, "name", _name, "custom"),
        api_family=_read(fields, "api_family", lambda n: n.enum(ApiFamily), ApiFamily.CUSTOM),
        server=_read(fields, "server", _optional_string, None),
    )


def _persona(node: _Node) -> Persona:
    fields = node.fields({"name", "id", "lineage_id", "is_alter"})
    default = Persona()
    return Persona(
        name=_read(fields, "name", _name, default.name),
        id=_read(fields, "id", _integer, default.id),
        lineage_id=_read(fields, "lineage_id", _integer, default.lineage_id),
        is_alter=_read(fields, "is_alter", _boolean, default.is_alter),
    )


def _deliberate_mode(node: _Node) -> DeliberateMode:
    fields = node.fields({"active", "allowed", "triggers"})
    return DeliberateMode(
        active=_read(fields, "active", _boolean, False),
        allowed=_read(fields, "allowed", _strings, ()),
        triggers=_read(fields, "triggers", _triggers, {}),
    )


def _triggers(node: _Node) -> dict[str, Trigger]:
    _object(node)
    return {key: _trigger(child) for key, child in _members(node)}


def _trigger(node: _Node) -> Trigger:
    fields = node.fields({"trigger", "source"})
    return Trigger(
        trigger=_required(node, fields, "trigger", _string),
        source=_required(node, fields, "source", _string),
    )


def _stickers(node: _Node) -> tuple[Sticker, ...]:
    return tuple(_sticker(item) for item in node.items())


def _sticker(node: _Node) -> Sticker:
    fields = node.fields({"id", "name", "sendable"})
    return Sticker(
        id=_required(node, fields, "id", _name),
        name=_required(node, fields, "name", _string),
        sendable=_read(fields, "sendable", _boolean, True),
    )


def _required(parent: _Node, fields: dict[str, _Node], key: str, reader: Reader) -> Any:
    if key not in fields:
        path = f"{parent.path}.{key}" if parent.path else key
        raise ScenarioError(parent.file, path, f"the required key {key!r}", "nothing")
    return reader(fields[key])


def _tools(node: _Node) -> tuple[ScriptedTool, ...]:
    tools = tuple(_tool(item) for item in node.items())
    for index, tool in enumerate(tools):
        if any(earlier.name == tool.name for earlier in tools[:index]):
            raise (
                node.child(index)
                .child("name")
                .fail("a tool name not used before", f'"{tool.name}" again')
            )
    return tools


TOOL_KEYS = {
    "name", "description", "parameters", "requires_follow_up", "available_for_provider",
    "available_for_turn", "results", "exclusive", "approval",
}  # fmt: skip


def _tool(node: _Node) -> ScriptedTool:
    fields = node.fields(TOOL_KEYS)
    name = _required(node, fields, "name", _tool_name)
    default = ScriptedTool(name=name)
    return ScriptedTool(
        name=name,
        description=_read(fields, "description", _string, ""),
        parameters=_read(fields, "parameters", lambda n: _parameters(n, name), default.parameters),
        requires_follow_up=_read(fields, "requires_follow_up", _boolean, False),
        available_for_provider=_read(fields, "available_for_provider", _boolean, True),
        available_for_turn=_read(fields, "available_for_turn", _boolean, True),
        exclusive=_read(fields, "exclusive", _boolean, False),
        approval=_read(fields, "approval", _approval, None),
        results=_read(fields, "results", _results, default.results),
    )


def _approval(node: _Node) -> tuple[ScriptedDecision, ...] | None:
    if node.value is None:
        return None
    return _non_empty(node, _decision, "decisions")


DECISION_FORMS = (
    '"approve", "timeout", {"deny": "reason"}, {"kill": true}, '
    '{"approve_for": {...other arguments}} or {"approve": true}, each object form '
    'with an optional "delay_ms"'
)
VERDICT_KEYS = ("approve", "deny", "kill", "approve_for")


def _decision(node: _Node) -> ScriptedDecision:
    if node.value in ("approve", "timeout"):
        return ScriptedDecision(kind=node.value)
    if not isinstance(node.value, dict):
        raise node.fail(f"a decision: {DECISION_FORMS}")
    fields = node.fields({*VERDICT_KEYS, "delay_ms"})
    given = [key for key in VERDICT_KEYS if key in fields]
    if len(given) != 1:
        raise node.fail(f"a decision: {DECISION_FORMS}", f"the keys {sorted(fields)}")
    kind, delay_ms = given[0], _read(fields, "delay_ms", _delay, 0)
    if kind == "deny":
        reason = _optional_string(fields["deny"])
        return ScriptedDecision(kind="deny", reason=reason, delay_ms=delay_ms)
    if kind in ("kill", "approve"):
        if fields[kind].value is not True:
            raise fields[kind].fail("true")
        return ScriptedDecision(kind=kind, delay_ms=delay_ms)
    args = _object(fields["approve_for"])
    return ScriptedDecision(kind="approve_for", args=args, delay_ms=delay_ms)


def _tool_name(node: _Node) -> str:
    name = _string(node)
    try:
        return check_name(name)
    except ToolSchemaError:
        raise node.fail(f"a tool name of {NAME_RULE}") from None


def _parameters(node: _Node, tool: str) -> JsonObject:
    schema = _object(node)
    try:
        check_parameters(tool, schema)
    except ToolSchemaError as error:
        where = error.where.removeprefix("parameters")
        failed = _Node(node.file, node.path + where, None)
        raise failed.fail(
            "a valid JSON schema of an object", f"a schema where {error.problem}"
        ) from None
    return schema


def _non_empty(node: _Node, reader: Reader, what: str) -> tuple[Any, ...]:
    items = tuple(reader(item) for item in node.items())
    if not items:
        raise node.fail(f"a non-empty array of {what}", "an empty array")
    return items


def _results(node: _Node) -> tuple[ScriptedResult, ...]:
    return _non_empty(node, _result, "results")


OUTCOME_KEYS = {"success", "data", "error", "message", "end_turn", "response_delivered",
                "image_metadata"}  # fmt: skip


def _result(node: _Node) -> ScriptedResult:
    fields = node.fields({*OUTCOME_KEYS, "hang", "kill", "raise", "delay_ms"})
    hang = _read(fields, "hang", _boolean, False)
    raises = _read(fields, "raise", _string, None)
    _exclusive(node, fields, hang, raises)
    delay_ms = _read(fields, "delay_ms", _delay, 0)
    if hang and delay_ms:
        raise fields["delay_ms"].fail("no 'delay_ms' in a result that hangs", "one")
    error = _read(fields, "error", _optional_string, None)
    return ScriptedResult(
        success=_read(fields, "success", _boolean, error is None),
        data=_read(fields, "data", _anything, None),
        error=error,
        message=_read(fields, "message", _optional_string, None),
        end_turn=_read(fields, "end_turn", _boolean, False),
        response_delivered=_read(fields, "response_delivered", _boolean, False),
        image_metadata=_read(fields, "image_metadata", _optional_object, None),
        hang=hang,
        kill=_read(fields, "kill", _boolean, False),
        raises=raises,
        delay_ms=delay_ms,
    )


def _delay(node: _Node) -> int:
    value = _integer(node)
    if value < 0:
        raise node.fail("a number of milliseconds, zero or more")
    return value


def _exclusive(node: _Node, fields: dict[str, _Node], hang: bool, raises: str | None) -> None:
    """A result that hangs or raises returns nothing, so it cannot also say what it returns."""
    if hang and raises is not None:
        raise fields["raise"].fail("no 'raise' in a result that hangs", "both")
    returned = sorted(OUTCOME_KEYS & set(fields))
    if (hang or raises is not None) and returned:
        which = "hangs" if hang else "raises"
        raise fields[returned[0]].fail(f"no {returned[0]!r} in a result that {which}", "one")


def _streams(node: _Node) -> tuple[ScriptedStream, ...]:
    return _non_empty(node, _stream, "streams")


STREAM_KEYS = {
    "status", "text", "details", "error", "call", "thought_log", "stall", "kill",
    "stop_before_tool", "follow_up_before_tool", "raise", "follow_up", "channel_fails",
    "model_parts", "calls",
}  # fmt: skip
ERROR_STATUSES = {StreamStatus.ERROR, StreamStatus.TIMEOUT}


def _stream(node: _Node) -> ScriptedStream:
    fields = node.fields(STREAM_KEYS)
    if "call" in fields and "calls" in fields:
        raise fields["calls"].fail("one of 'call' and 'calls', not both", "both")
    call = _read(fields, "call", _call, None)
    calls: tuple[ScriptedCall, ...] = _read(fields, "calls", _calls, ())
    call = calls[0] if calls else call
    kill = _read(fields, "kill", _boolean, False)
    stall = _read(fields, "stall", _boolean, False)
    status = _status(fields, call, stall, kill)
    if "error" in fields and status not in ERROR_STATUSES:
        raise fields["error"].fail("no 'error' unless the status is error or timeout", "one")
    return ScriptedStream(
        status=status,
        text=_read(fields, "text", _string, ""),
        details=_read(fields, "details", _string, ""),
        error=_read(fields, "error", _string, None),
        call=call,
        calls=calls or ((call,) if call is not None else ()),
        thought_log=_read(fields, "thought_log", _optional_object, None),
        stall=stall,
        kill=kill,
        stop_before_tool=_read(fields, "stop_before_tool", _boolean, False),
        follow_up_before_tool=_read(fields, "follow_up_before_tool", _boolean, False),
        raises=_read(fields, "raise", _string, None),
        follow_up=_read(fields, "follow_up", _boolean, False),
        channel_fails=_read(fields, "channel_fails", _string, None),
        model_parts=_read(fields, "model_parts", _objects, None),
    )


def _objects(node: _Node) -> tuple[JsonObject, ...]:
    return tuple(_object(item) for item in node.items())


def _status(
    fields: dict[str, _Node], call: ScriptedCall | None, stall: bool, kill: bool
) -> StreamStatus:
    """The status the stream ends with; a stall wins over `status` and `call`, then a kill."""
    default = StreamStatus.FUNCTION_CALL if call is not None else StreamStatus.COMPLETED
    status: StreamStatus = _read(fields, "status", lambda n: n.enum(StreamStatus), default)
    if stall:
        return status
    if kill:
        return StreamStatus.STOPPED_BY_USER
    if call is not None and status is not StreamStatus.FUNCTION_CALL:
        raise fields["status"].fail("function_call, since the stream has a call")
    if call is None and status is StreamStatus.FUNCTION_CALL:
        raise fields["status"].fail("a status other than function_call, since there is no call")
    return status


def _call(node: _Node) -> ScriptedCall:
    fields = node.fields({"name", "args", "arguments_truncated", "id"})
    return ScriptedCall(
        name=_required(node, fields, "name", _string),
        args=_read(fields, "args", _optional_object, None),
        arguments_truncated=_read(fields, "arguments_truncated", _boolean, False),
        id=_read(fields, "id", _name, None),
    )


def _calls(node: _Node) -> tuple[ScriptedCall, ...]:
    calls: tuple[ScriptedCall, ...] = _non_empty(node, _call, "calls")
    ids = [call.id for call in calls if call.id is not None]
    for index, call in enumerate(calls):
        if call.id is not None and ids.count(call.id) > 1:
            raise (
                node.child(index)
                .child("id")
                .fail("an id not used by another call", f'"{call.id}" again')
            )
    return calls
