"""Scenario files (SCENARIOS.md), read strictly into frozen data before anything runs.

Every malformed scenario raises one `ScenarioError` naming the file, the path
inside it (`streams[3].call.name`) and what was expected there: `toolloop
simulate` prints it and exits with status 2. Free-form values (`env` names,
`parameters`, `args`, `data`, `thought_log`, `enhanced_context_item`) are only
checked for their JSON type. A key written twice in one object is an error
too, since JSON would silently keep the last one. The checked reads, and the
error, are `toolloop.tools.scenario_json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
)
from toolloop.tools.scenario_json import (
    Node,
    Reader,
    ScenarioError,
    anything,
    boolean,
    integer,
    json_object,
    members,
    non_empty,
    nonblank,
    optional_object,
    optional_string,
    parse_json,
    read,
    required,
    string,
    strings,
)


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
    return _scenario(parse_json(text, file))


def _scenario(root: Node) -> Scenario:
    fields = root.fields({"env", "turn", "tools", "streams"})
    if "streams" not in fields:
        raise ScenarioError(root.file, "streams", "a non-empty array of streams", "nothing")
    return Scenario(
        file=root.file,
        env=read(fields, "env", _env, {}),
        turn=read(fields, "turn", _turn, TurnSettings()),
        tools=read(fields, "tools", _tools, ()),
        streams=_streams(fields["streams"]),
    )


def _env(node: Node) -> dict[str, str | int]:
    json_object(node)
    return {
        key: child.of_type((str, int), "a string or an integer") for key, child in members(node)
    }


TURN_KEYS = {
    "provider", "surface_user_errors", "suppress_user_errors", "user_impersonation",
    "impersonated_username", "impersonated_avatar_url", "direct_message", "locale", "persona",
    "deliberate_mode", "stop_context_queued", "guild_stickers",
}  # fmt: skip


def _turn(node: Node) -> TurnSettings:
    fields = node.fields(TURN_KEYS)
    defaults = TurnSettings()
    readers: dict[str, Reader] = {
        "provider": _provider,
        "surface_user_errors": boolean,
        "suppress_user_errors": boolean,
        "user_impersonation": boolean,
        "impersonated_username": optional_string,
        "impersonated_avatar_url": optional_string,
        "direct_message": boolean,
        "locale": nonblank,
        "persona": _persona,
        "deliberate_mode": _deliberate_mode,
        "stop_context_queued": boolean,
        "guild_stickers": _stickers,
    }
    values = {key: readers[key](child) for key, child in fields.items()}
    return attrs.evolve(defaults, **values)


def _provider(node: Node) -> ProviderDescriptor:
    fields = node.fields({"name", "api_family", "server"})
    return ProviderDescriptor(
        name=read(fields, "name", nonblank, "custom"),
        api_family=read(fields, "api_family", lambda n: n.enum(ApiFamily), ApiFamily.CUSTOM),
        server=read(fields, "server", optional_string, None),
    )


def _persona(node: Node) -> Persona:
    fields = node.fields({"name", "id", "lineage_id", "is_alter"})
    default = Persona()
    return Persona(
        name=read(fields, "name", nonblank, default.name),
        id=read(fields, "id", integer, default.id),
        lineage_id=read(fields, "lineage_id", integer, default.lineage_id),
        is_alter=read(fields, "is_alter", boolean, default.is_alter),
    )


def _deliberate_mode(node: Node) -> DeliberateMode:
    fields = node.fields({"active", "allowed", "triggers"})
    return DeliberateMode(
        active=read(fields, "active", boolean, False),
        allowed=read(fields, "allowed", strings, ()),
        triggers=read(fields, "triggers", _triggers, {}),
    )


def _triggers(node: Node) -> dict[str, Trigger]:
    json_object(node)
    return {key: _trigger(child) for key, child in members(node)}


def _trigger(node: Node) -> Trigger:
    fields = node.fields({"trigger", "source"})
    return Trigger(
        trigger=required(node, fields, "trigger", string),
        source=required(node, fields, "source", string),
    )


def _stickers(node: Node) -> tuple[Sticker, ...]:
    return tuple(_sticker(item) for item in node.items())


def _sticker(node: Node) -> Sticker:
    fields = node.fields({"id", "name", "sendable"})
    return Sticker(
        id=required(node, fields, "id", nonblank),
        name=required(node, fields, "name", string),
        sendable=read(fields, "sendable", boolean, True),
    )


def _tools(node: Node) -> tuple[ScriptedTool, ...]:
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


def _tool(node: Node) -> ScriptedTool:
    fields = node.fields(TOOL_KEYS)
    name = required(node, fields, "name", _tool_name)
    default = ScriptedTool(name=name)
    return ScriptedTool(
        name=name,
        description=read(fields, "description", string, ""),
        parameters=read(fields, "parameters", lambda n: _parameters(n, name), default.parameters),
        requires_follow_up=read(fields, "requires_follow_up", boolean, False),
        available_for_provider=read(fields, "available_for_provider", boolean, True),
        available_for_turn=read(fields, "available_for_turn", boolean, True),
        exclusive=read(fields, "exclusive", boolean, False),
        approval=read(fields, "approval", _approval, None),
        results=read(fields, "results", _results, default.results),
    )


def _approval(node: Node) -> tuple[ScriptedDecision, ...] | None:
    if node.value is None:
        return None
    return non_empty(node, _decision, "decisions")


DECISION_FORMS = (
    '"approve", "timeout", {"deny": "reason"}, {"kill": true}, '
    '{"approve_for": {...other arguments}} or {"approve": true}, each object form '
    'with an optional "delay_ms"'
)
VERDICT_KEYS = ("approve", "deny", "kill", "approve_for")


def _decision(node: Node) -> ScriptedDecision:
    if node.value in ("approve", "timeout"):
        return ScriptedDecision(kind=node.value)
    if not isinstance(node.value, dict):
        raise node.fail(f"a decision: {DECISION_FORMS}")
    fields = node.fields({*VERDICT_KEYS, "delay_ms"})
    given = [key for key in VERDICT_KEYS if key in fields]
    if len(given) != 1:
        raise node.fail(f"a decision: {DECISION_FORMS}", f"the keys {sorted(fields)}")
    kind, delay_ms = given[0], read(fields, "delay_ms", _delay, 0)
    if kind == "deny":
        reason = optional_string(fields["deny"])
        return ScriptedDecision(kind="deny", reason=reason, delay_ms=delay_ms)
    if kind in ("kill", "approve"):
        if fields[kind].value is not True:
            raise fields[kind].fail("true")
        return ScriptedDecision(kind=kind, delay_ms=delay_ms)
    args = json_object(fields["approve_for"])
    return ScriptedDecision(kind="approve_for", args=args, delay_ms=delay_ms)


def _tool_name(node: Node) -> str:
    name = string(node)
    try:
        return check_name(name)
    except ToolSchemaError:
        raise node.fail(f"a tool name of {NAME_RULE}") from None


def _parameters(node: Node, tool: str) -> JsonObject:
    schema = json_object(node)
    try:
        check_parameters(tool, schema)
    except ToolSchemaError as error:
        where = error.where.removeprefix("parameters")
        failed = Node(node.file, node.path + where, None)
        raise failed.fail(
            "a valid JSON schema of an object", f"a schema where {error.problem}"
        ) from None
    return schema


def _results(node: Node) -> tuple[ScriptedResult, ...]:
    return non_empty(node, _result, "results")


OUTCOME_KEYS = {"success", "data", "error", "message", "end_turn", "response_delivered",
                "image_metadata"}  # fmt: skip


def _result(node: Node) -> ScriptedResult:
    fields = node.fields({*OUTCOME_KEYS, "hang", "kill", "raise", "delay_ms"})
    hang = read(fields, "hang", boolean, False)
    raises = read(fields, "raise", string, None)
    _exclusive(node, fields, hang, raises)
    delay_ms = read(fields, "delay_ms", _delay, 0)
    if hang and delay_ms:
        raise fields["delay_ms"].fail("no 'delay_ms' in a result that hangs", "one")
    error = read(fields, "error", optional_string, None)
    return ScriptedResult(
        success=read(fields, "success", boolean, error is None),
        data=read(fields, "data", anything, None),
        error=error,
        message=read(fields, "message", optional_string, None),
        end_turn=read(fields, "end_turn", boolean, False),
        response_delivered=read(fields, "response_delivered", boolean, False),
        image_metadata=read(fields, "image_metadata", optional_object, None),
        hang=hang,
        kill=read(fields, "kill", boolean, False),
        raises=raises,
        delay_ms=delay_ms,
    )


def _delay(node: Node) -> int:
    value = integer(node)
    if value < 0:
        raise node.fail("a number of milliseconds, zero or more")
    return value


def _exclusive(node: Node, fields: dict[str, Node], hang: bool, raises: str | None) -> None:
    """A result that hangs or raises returns nothing, so it cannot also say what it returns."""
    if hang and raises is not None:
        raise fields["raise"].fail("no 'raise' in a result that hangs", "both")
    returned = sorted(OUTCOME_KEYS & set(fields))
    if (hang or raises is not None) and returned:
        which = "hangs" if hang else "raises"
        raise fields[returned[0]].fail(f"no {returned[0]!r} in a result that {which}", "one")


def _streams(node: Node) -> tuple[ScriptedStream, ...]:
    return non_empty(node, _stream, "streams")


STREAM_KEYS = {
    "status", "text", "details", "error", "call", "thought_log", "stall", "kill",
    "stop_before_tool", "follow_up_before_tool", "raise", "follow_up", "channel_fails",
    "model_parts", "calls",
}  # fmt: skip
ERROR_STATUSES = {StreamStatus.ERROR, StreamStatus.TIMEOUT}


def _stream(node: Node) -> ScriptedStream:
    fields = node.fields(STREAM_KEYS)
    if "call" in fields and "calls" in fields:
        raise fields["calls"].fail("one of 'call' and 'calls', not both", "both")
    call = read(fields, "call", _call, None)
    calls: tuple[ScriptedCall, ...] = read(fields, "calls", _calls, ())
    call = calls[0] if calls else call
    kill = read(fields, "kill", boolean, False)
    stall = read(fields, "stall", boolean, False)
    status = _status(fields, call, stall, kill)
    if "error" in fields and status not in ERROR_STATUSES:
        raise fields["error"].fail("no 'error' unless the status is error or timeout", "one")
    return ScriptedStream(
        status=status,
        text=read(fields, "text", string, ""),
        details=read(fields, "details", string, ""),
        error=read(fields, "error", string, None),
        call=call,
        calls=calls or ((call,) if call is not None else ()),
        thought_log=read(fields, "thought_log", optional_object, None),
        stall=stall,
        kill=kill,
        stop_before_tool=read(fields, "stop_before_tool", boolean, False),
        follow_up_before_tool=read(fields, "follow_up_before_tool", boolean, False),
        raises=read(fields, "raise", string, None),
        follow_up=read(fields, "follow_up", boolean, False),
        channel_fails=read(fields, "channel_fails", string, None),
        model_parts=read(fields, "model_parts", _objects, None),
    )


def _objects(node: Node) -> tuple[JsonObject, ...]:
    return tuple(json_object(item) for item in node.items())


def _status(
    fields: dict[str, Node], call: ScriptedCall | None, stall: bool, kill: bool
) -> StreamStatus:
    """The status the stream ends with; a stall wins over `status` and `call`, then a kill."""
    default = StreamStatus.FUNCTION_CALL if call is not None else StreamStatus.COMPLETED
    status: StreamStatus = read(fields, "status", lambda n: n.enum(StreamStatus), default)
    if stall:
        return status
    if kill:
        return StreamStatus.STOPPED_BY_USER
    if call is not None and status is not StreamStatus.FUNCTION_CALL:
        raise fields["status"].fail("function_call, since the stream has a call")
    if call is None and status is StreamStatus.FUNCTION_CALL:
        raise fields["status"].fail("a status other than function_call, since there is no call")
    return status


def _call(node: Node) -> ScriptedCall:
    fields = node.fields({"name", "args", "arguments_truncated", "id"})
    return ScriptedCall(
        name=required(node, fields, "name", string),
        args=read(fields, "args", optional_object, None),
        arguments_truncated=read(fields, "arguments_truncated", boolean, False),
        id=read(fields, "id", nonblank, None),
    )


def _calls(node: Node) -> tuple[ScriptedCall, ...]:
    calls: tuple[ScriptedCall, ...] = non_empty(node, _call, "calls")
    ids = [call.id for call in calls if call.id is not None]
    for index, call in enumerate(calls):
        if call.id is not None and ids.count(call.id) > 1:
            raise (
                node.child(index)
                .child("id")
                .fail("an id not used by another call", f'"{call.id}" again')
            )
    return calls
