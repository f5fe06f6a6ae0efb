"""Typed tools: a function's signature becomes the JSON Schema of its parameters, and the
arguments the model sent (already valid against that schema) are structured back into the
types the function declares, with cattrs.

The registry uses this for a tool registered without ``parameters=`` whose function is not in
the dict form ``(args, call)``. The mapping (the table in docs/tools.md):

* ``str``, ``int``, ``float``, ``bool`` -> ``string``, ``integer``, ``number``, ``boolean``;
  ``Any`` -> any JSON value.
* ``Literal[...]`` and ``Enum`` classes -> ``enum`` of their (JSON scalar) values.
* ``list[X]`` -> ``array`` of X; ``dict[str, X]`` -> ``object`` with X values.
* ``X | None`` -> ``anyOf`` X or ``null``; a parameter with a default is not required, and
  the default is shown to the model when it is JSON and holds no secret.
* attrs classes and ``TypedDict`` -> nested ``object`` schemas, no other keys allowed.
* ``Annotated[X, "text"]`` describes X; ``Annotated[X, Secret]`` marks it ``writeOnly``, which
  the registry redacts wherever it hands arguments out.
* A parameter annotated with the registry's ``ToolCall`` receives the call, not an argument.

What the function returns is its result: a ``ToolResult`` or None as is, any other value
(unstructured to JSON) the success data; a return annotation JSON cannot hold is refused.
Arguments the schema passed but the types cannot hold (``10**400`` as a ``float``) raise
``ArgumentError`` before the function runs, which the registry answers as invalid arguments.

Descriptions come from the docstring: its text before the first section is the tool's
description, and a Google ``Args:`` section or reST ``:param name:`` fields describe the
parameters (``Annotated`` text wins over the docstring).
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, Final, Literal, NotRequired, Required, Union

import attrs
import cattrs

from toolloop.effects.registry.redaction import redact
from toolloop.effects.registry.schema import json_path
from toolloop.states import JsonObject, ToolResult
from toolloop.states.errors import ToolloopError

__all__ = [
    "ArgumentError",
    "Secret",
    "SignatureError",
    "TypedTool",
    "takes_arguments_dict",
    "typed_tool",
]


@attrs.frozen
class _SecretMarker:
    def __repr__(self) -> str:
        return "Secret"


Secret: Final = _SecretMarker()
"""``Annotated[str, Secret]``: a secret argument, ``writeOnly`` in the schema, so redacted."""

_PRIMITIVES: Final[dict[object, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
}
_SCALARS: Final = (str, int, float, bool, type(None))
_JSON_HELP: Final = (
    "str, int, float, bool, Any, a Literal, an Enum, list[...], dict[str, ...], "
    "X | None, an attrs class or a TypedDict"
)
_MAPPING_HELP: Final = f"use {_JSON_HELP}"


class ArgumentError(ToolloopError, ValueError):
    """Arguments the schema passed that cannot become the declared types (``10**400`` as a
    ``float``); raised before the function runs, naming each argument, never its value."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        """``$.place.lat: is too large for a float (at most 1.798e+308)``, one per argument."""


class SignatureError(ToolloopError, TypeError):
    """The function's signature cannot be turned into a parameters schema."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        """``signature.query``, ``signature.options.limit``: the parameter or field at fault."""
        self.problem = problem


@attrs.frozen(kw_only=True)
class TypedTool:
    """What the registry needs of a typed function: its schema, description and dict form."""

    parameters: JsonObject
    """The JSON Schema of the function's parameters (an object schema)."""
    description: str
    """The docstring without its parameter sections."""
    run: Callable[[JsonObject, Any], Awaitable[Any]]
    """The function in the registry's dict form: ``await run(args, call)``."""


def takes_arguments_dict(function: Callable[..., Any]) -> bool:
    """The untyped form ``(args, call)``: two parameters, the first named ``args``."""
    names = list(inspect.signature(function).parameters)
    return len(names) == 2 and names[0] == "args"


def typed_tool(function: Callable[..., Awaitable[Any]], call_type: type) -> TypedTool:
    """The schema and dict form of ``function``; a parameter of ``call_type`` gets the call.

    Raises ``SignatureError`` naming the parameter (or nested field) that has no mapping.
    """
    if not _is_async(function):
        raise SignatureError("signature", "a tool must be an async function (async def)")
    try:
        annotated = function if inspect.isroutine(function) else type(function).__call__
        hints = typing.get_type_hints(annotated, include_extras=True)
    except (NameError, TypeError) as error:
        raise SignatureError("signature", f"cannot resolve the type hints: {error}") from None
    description, documented = _docstring(function)
    parameters = inspect.signature(function).parameters.values()
    properties: JsonObject = {}
    required: list[str] = []
    for parameter in parameters:
        where = f"signature.{parameter.name}"
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise SignatureError(where, "*args and **kwargs cannot be tool parameters")
        if parameter.name not in hints:
            raise SignatureError(where, "has no type annotation")
        if hints[parameter.name] is call_type:
            continue
        schema = _schema(hints[parameter.name], where, ())
        if "description" not in schema and parameter.name in documented:
            schema = {**schema, "description": documented[parameter.name]}
        if parameter.default is parameter.empty:
            required.append(parameter.name)
        else:
            schema = _with_default(schema, parameter.default)
        properties[parameter.name] = schema
    object_schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        object_schema["required"] = required
    object_schema["additionalProperties"] = False
    if "return" in hints:
        _check_return(hints["return"])
    return TypedTool(
        parameters=object_schema,
        description=description,
        run=_dict_form(function, hints, call_type),
    )


def _is_async(function: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    call = type(function).__call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _dict_form(
    function: Callable[..., Awaitable[Any]], hints: dict[str, Any], call_type: type
) -> Callable[[JsonObject, Any], Awaitable[Any]]:
    """``function`` called as the registry calls tools: the arguments structured, the call
    passed to the parameter that takes it, a missing argument left to its default."""
    parameters = list(inspect.signature(function).parameters.values())

    async def run(args: JsonObject, call: Any) -> Any:
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        problems: list[str] = []
        for parameter in parameters:
            hint = hints[parameter.name]
            value = parameter.default
            if hint is call_type:
                value = call
            elif parameter.name in args:
                try:
                    value = _STRUCTURER.structure(args[parameter.name], hint)
                except Exception as error:
                    problems.extend(_unstructurable(error, [parameter.name], hint))
            if parameter.kind is parameter.POSITIONAL_ONLY:
                positional.append(value)
            else:
                keywords[parameter.name] = value
        if problems:
            raise ArgumentError(problems)
        return _returned(await function(*positional, **keywords))

    return run


def _returned(value: Any) -> Any:
    """What a typed function returned, as the registry takes it: a ``ToolResult`` or None
    as is, anything else (a str, a number, a list, an attrs instance) as success data."""
    if value is None or isinstance(value, ToolResult):
        return value
    return ToolResult(success=True, data=_STRUCTURER.unstructure(value))


def _check_return(hint: Any) -> None:
    """Refuse a return annotation JSON cannot hold; each arm of a union is checked."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    arms = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else ()
    for arm in arms or (hint,):
        if arm is None or arm is type(None) or arm is ToolResult:
            continue
        try:
            _schema(arm, "signature.return", ())
        except SignatureError as error:
            problem = f"{arm!r} is not JSON data (return a ToolResult, None or data {_JSON_HELP})"
            raise SignatureError(error.where, problem) from None


def _unstructurable(error: BaseException, path: list[str | int], hint: Any) -> Iterator[str]:
    """One problem per value cattrs could not structure, by JSON path, without the value."""
    if isinstance(error, cattrs.IterableValidationError):
        with_notes, without = error.group_exceptions()
        for sub, note in with_notes:
            yield from _unstructurable(sub, [*path, note.index], note.type)
        for sub in without:
            yield from _unstructurable(sub, path, hint)
    elif isinstance(error, cattrs.ClassValidationError):
        with_attribute, without_attribute = error.group_exceptions()
        for sub, attribute in with_attribute:
            yield from _unstructurable(sub, [*path, attribute.name], attribute.type)
        for sub in without_attribute:
            yield from _unstructurable(sub, path, hint)
    elif isinstance(error, _Unfit):
        yield f"{json_path(path)}: {error.problem}"
    else:
        yield f"{json_path(path)}: cannot be made a {getattr(hint, '__name__', repr(hint))}"


class _Unfit(ValueError):
    """A JSON value the schema passed that the declared Python type cannot hold."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _structure_float(value: Any, _: type) -> float:
    """A JSON number as a float; an integer beyond the float range is refused, not raised."""
    try:
        return float(value)
    except OverflowError:
        raise _Unfit(f"is too large for a float (at most {sys.float_info.max:.4g})") from None


def _structure_literal(value: Any, hint: Any) -> Any:
    """The literal's own value equal to ``value``: ``1`` for ``1.0`` in ``Literal[1, 2]``.

    The schema's ``enum`` compares as JSON does (``1.0`` equals ``1``, ``true`` does not).
    """
    for allowed in typing.get_args(hint):
        if allowed == value and isinstance(allowed, bool) == isinstance(value, bool):
            return allowed
    raise _Unfit(f"must be one of {json.dumps(list(typing.get_args(hint)))}")


def _structure_typeddict(value: Any, hint: Any) -> dict[str, Any]:
    """A TypedDict's keys, each structured by its hint (the keys the schema let through).

    cattrs reads the class's ``__required_keys__``, wrong under
    ``from __future__ import annotations`` (see ``_is_required_key``).
    """
    hints = _key_hints(hint)
    structured, errors = {}, []
    for key, item in value.items():
        key_hint = hints[key]
        try:
            structured[key] = _STRUCTURER.structure(item, key_hint)
        except Exception as error:
            error.add_note(cattrs.errors.AttributeValidationNote(key, key, key_hint))
            errors.append(error)
    if errors:
        raise cattrs.ClassValidationError(f"While structuring {hint.__name__}", errors, hint)
    return structured


@functools.cache
def _key_hints(cls: Any) -> dict[str, Any]:
    """A TypedDict's keys and their types, ``Required``/``NotRequired`` taken off (resolved
    once per class: every call of the tool structures with them)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {key: _unwrap_required(hint) for key, hint in hints.items()}


def _is_literal(hint: Any) -> bool:
    return typing.get_origin(hint) is Literal


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter()
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook_func(_is_literal, _structure_literal)
    converter.register_structure_hook_func(typing.is_typeddict, _structure_typeddict)
    return converter


_STRUCTURER: Final = _converter()


def _schema(hint: Any, where: str, seen: tuple[type, ...]) -> JsonObject:
    """The JSON Schema of one annotation; ``seen`` holds the enclosing classes."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _annotated(_schema(args[0], where, seen), args[1:])
    if hint is Any:
        return {}
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}
    if origin is Literal:
        return _enum(list(args), where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum([member.value for member in hint], where)
    if origin in (Union, types.UnionType):
        return _optional(args, where, seen)
    if hint is list or origin is list:
        return {"type": "array", "items": _schema(args[0] if args else Any, where, seen)}
    if hint is dict or origin is dict:
        key, value = args or (str, Any)
        if key is not str:
            raise SignatureError(where, f"dict keys must be str (JSON object keys), not {key!r}")
        return {"type": "object", "additionalProperties": _schema(value, where, seen)}
    if isinstance(hint, type) and (attrs.has(hint) or typing.is_typeddict(hint)):
        if hint in seen:
            raise SignatureError(where, f"the recursive type {hint.__name__} is not supported")
        return _object(hint, where, (*seen, hint))
    raise SignatureError(where, f"{hint!r} has no JSON Schema mapping; {_MAPPING_HELP}")


def _annotated(schema: JsonObject, metadata: tuple[Any, ...]) -> JsonObject:
    texts = [item for item in metadata if isinstance(item, str)]
    if texts:
        schema = {**schema, "description": " ".join(texts)}
    if any(item is Secret for item in metadata):
        schema = {**schema, "writeOnly": True}
    return schema


def _enum(values: list[Any], where: str) -> JsonObject:
    if not values or not all(isinstance(value, _SCALARS) for value in values):
        raise SignatureError(where, f"enum values must be JSON scalars, not {values!r}")
    kinds = {_json_type(value) for value in values}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _PRIMITIVES[bool if isinstance(value, bool) else type(value)]


def _optional(args: tuple[Any, ...], where: str, seen: tuple[type, ...]) -> JsonObject:
    """``X | None``; the description and ``writeOnly`` of X stay on the outer schema, where
    the model and the registry's redaction read them."""
    others = [arg for arg in args if arg is not type(None)]
    if len(others) != 1 or len(args) != 2:
        raise SignatureError(where, f"only X | None unions are supported, not {args!r}")
    inner = _schema(others[0], where, seen)
    outer: JsonObject = {
        key: inner.pop(key) for key in ("description", "writeOnly") if key in inner
    }
    return {"anyOf": [inner, {"type": "null"}], **outer}


def _object(cls: type, where: str, seen: tuple[type, ...]) -> JsonObject:
    """An attrs class or a TypedDict: its fields, those without a default required."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as error:
        raise SignatureError(where, f"cannot resolve the type hints: {error}") from None
    properties: JsonObject = {}
    required: list[str] = []
    if attrs.has(cls):
        for field in attrs.fields(cls):
            if not field.init:
                continue
            field_schema = _schema(hints[field.name], f"{where}.{field.name}", seen)
            if field.default is attrs.NOTHING:
                required.append(field.name)
            elif not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                field_schema = _with_default(field_schema, field.default)
            properties[field.name] = field_schema
    else:
        for key, hint in hints.items():
            properties[key] = _schema(_unwrap_required(hint), f"{where}.{key}", seen)
            if _is_required_key(cls, key, hint):
                required.append(key)
    schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _unwrap_required(hint: Any) -> Any:
    """``X`` of ``Required[X]`` and ``NotRequired[X]`` (inside ``Annotated`` too)."""
    if typing.get_origin(hint) is Annotated:
        inner, *metadata = typing.get_args(hint)
        return Annotated[(_unwrap_required(inner), *metadata)]
    if typing.get_origin(hint) in (Required, NotRequired):
        return typing.get_args(hint)[0]
    return hint


def _is_required_key(cls: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict's key is required, read from its resolved hint.

    Under ``from __future__ import annotations`` the class sees only strings, so
    its ``__required_keys__`` miss ``NotRequired`` and ``Required``; the hint does not.
    """
    while typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is Required:
        return True
    if typing.get_origin(hint) is NotRequired:
        return False
    return key in cls.__required_keys__


def _with_default(schema: JsonObject, default: Any) -> JsonObject:
    """``schema`` showing the default, when it has a JSON form that holds no secret.

    A secret's default would go to the model provider with every request.
    """
    try:
        value = _STRUCTURER.unstructure(default)
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return schema
    if redact(value, schema) != value:
        return schema
    return {**schema, "default": value}


_SECTION: Final = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|Notes?"
    r"|See Also|Attributes|Warnings?|Todo):\s*"
)
_ARG_SECTIONS: Final = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args"})
_GOOGLE_ENTRY: Final = re.compile(r"(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_REST_FIELD: Final = re.compile(
    r":(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]+\s)?(\w+)\s*:(.*)"
)


def _docstring(function: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (text before the first section or field) and per-parameter texts."""
    lines = (inspect.getdoc(function) or "").splitlines()
    end = next(
        (i for i, line in enumerate(lines) if _SECTION.fullmatch(line) or line.startswith(":")),
        len(lines),
    )
    described: dict[str, list[str]] = {}
    current: list[str] | None = None
    entry_indent = -1  # the indentation of the Args section's entries; -1 outside it
    for line in lines[end:]:
        text, indent = line.strip(), len(line) - len(line.lstrip())
        if not text:
            continue
        if indent == 0:
            header, field = _SECTION.fullmatch(line), _REST_FIELD.fullmatch(line)
            in_args = header is not None and header.group(1) in _ARG_SECTIONS
            entry_indent, current = (0 if in_args else -1), None
            if field:
                current = described.setdefault(field.group(1), [])
                current.append(field.group(2).strip())
            continue
        if entry_indent == 0:
            entry_indent = indent
        entry = _GOOGLE_ENTRY.fullmatch(text) if indent == entry_indent else None
        if entry:
            current = described.setdefault(entry.group(1).lstrip("*"), [])
            current.append(entry.group(2).strip())
        elif current is not None:
            current.append(text)
    texts = {name: " ".join(t for t in parts if t) for name, parts in described.items()}
    return "\n".join(lines[:end]).strip(), {name: text for name, text in texts.items() if text}
