"""A tool's parameters schema: checked whole at registration, applied without leaking or hanging.

Three promises the registry builds on:

* **Checked whole, once.** Registration checks the schema against its
  meta-schema, resolves every `$ref` and `$dynamicRef` (only inside the
  schema or to a JSON Schema meta-schema: nothing is fetched from the
  network) and compiles every regular expression; a schema that fails any of
  these is refused then, naming the tool and where, never on first use. So
  is a `default` beside `"writeOnly": true`: the schema goes to the model
  provider with every request, and a secret must not.
* **Linear regular expressions.** `pattern` and `patternProperties` (and
  `additionalProperties`, which consults them) run on RE2 (`google-re2`),
  which matches in time linear in the text and cannot backtrack, so a
  pattern such as `^(a+)+$` cannot block the event loop. RE2 has no
  backreferences and no lookaround: such a pattern is refused at
  registration. `unevaluatedProperties` together with `patternProperties`
  is refused too, since jsonschema evaluates that pair with Python's `re`.
* **Messages without values.** A broken rule is described from the error's
  path, its keyword and the schema alone, never from jsonschema's message or
  the offending value, so a secret argument cannot reach a failure, a
  notice, a log or a trace through validation. A key the schema forbids is
  not named either (the keys allowed are): a secret may be sent as a key.

Valid arguments cost one fast check (`accepting`): a schema written with the
common keywords is compiled once into a predicate that answers exactly as the
validator does, and only arguments it refuses are walked by jsonschema to
word their problems.
"""

from __future__ import annotations

import functools
import json
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import jsonschema
import re2  # type: ignore[import-untyped]
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]

from toolloop.states import JsonObject
from toolloop.states.errors import ToolloopError
from toolloop.states.json_policy import JsonInputError, check_json

#: Keywords whose values are data, not schemas: never searched for `$ref` or patterns.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Characters of a schema value or a property name quoted in a message.
QUOTE_CHARS = 120
#: Property names listed when an object has a key its schema does not allow.
ALLOWED_KEYS_SHOWN = 20


class ToolSchemaError(ToolloopError, ValueError):
    """A tool was registered with a name or a parameters schema the registry cannot use."""

    def __init__(self, tool: str, problem: str, where: str = "") -> None:
        super().__init__(f'tool "{tool}": {where + ": " if where else ""}{problem}')
        self.tool = tool
        self.problem = problem
        self.where = where
        """Where in the registration: `parameters.properties.query.type`, or empty."""


def check_parameters(name: str, schema: JsonObject) -> Validator:
    """A validator for the tool's parameters, once the schema passed every check above.

    Raises `ToolSchemaError` naming the tool, where in the schema and what is wrong.
    """
    try:
        check_json(schema, where="parameters")
    except JsonInputError as error:
        raise ToolSchemaError(name, error.problem, "parameters") from None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        got = json.dumps(schema.get("type")) if isinstance(schema, dict) else type(schema).__name__
        problem = f'"type" is {got}, but parameters must be an object schema ("type": "object")'
        raise ToolSchemaError(name, problem, "parameters")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        where = _where(error.absolute_path)
        raise ToolSchemaError(name, f"{error.message} (rule: {error.validator})", where) from None
    _check_patterns_and_refs(name, cls, schema)
    validator: Validator = _linear(cls)(schema, registry=referencing.Registry())
    return validator


def accepting(schema: JsonObject, validator: Validator) -> Callable[[JsonObject], bool]:
    """Whether arguments are valid, exactly as `validator` (made by `check_parameters`) says.

    The schema compiled (`compiled_check`) when it can be, else `validator.is_valid`.
    """
    return compiled_check(schema) or validator.is_valid


def problems(validator: Validator, args: JsonObject) -> Iterator[str]:
    """One line per broken rule: the argument's JSON path, what was expected, the rule's name."""
    yield from _described(validator.iter_errors(args))


def _described(errors: Iterable[jsonschema.ValidationError]) -> Iterator[str]:
    for error in sorted(errors, key=lambda error: list(map(str, error.path))):
        path = list(error.absolute_path)
        keyword = error.validator
        if keyword in ("anyOf", "oneOf") and (branch := _fitting_branch(error)) is not None:
            yield from _described(branch)
        elif keyword == "required":
            present: Any = error.instance
            required: Any = error.validator_value
            for missing in required:
                if missing not in present:
                    yield f"{json_path([*path, missing])}: is required (rule: required)"
        elif keyword == "dependentRequired":
            present, dependencies = error.instance, error.validator_value
            for key, needed in dependencies.items():  # type: ignore[union-attr]
                for missing in needed if key in present else ():
                    if missing not in present:
                        when = f"is required when {json_path([*path, key])} is present"
                        yield f"{json_path([*path, missing])}: {when} (rule: dependentRequired)"
        elif keyword == "additionalProperties" and error.validator_value is False:
            yield f"{json_path(path)}: {_extra_keys(error)} (rule: additionalProperties)"
        else:
            names = "property names: " if "propertyNames" in error.relative_schema_path else ""
            rule = "false schema" if keyword is None else keyword
            expected = _expected(str(keyword), error.validator_value)
            yield f"{json_path(path)}: {names}{expected} (rule: {rule})"


def _fitting_branch(
    error: jsonschema.ValidationError,
) -> list[jsonschema.ValidationError] | None:
    """The errors of the one branch the value's type fits, when the others do not fit it.

    For `X | None` given an object, the problems inside X are what the model
    must fix, not "must match one of the 2 schemas".
    """
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for suberror in error.context or ():
        branches.setdefault(suberror.relative_schema_path[0], []).append(suberror)
    fitting = [
        suberrors
        for suberrors in branches.values()
        if not any(sub.validator == "type" and not sub.relative_path for sub in suberrors)
    ]
    every_branch_failed = len(branches) == len(error.validator_value)  # type: ignore[arg-type]
    return fitting[0] if len(fitting) == 1 and every_branch_failed else None


def _extra_keys(error: jsonschema.ValidationError) -> str:
    """The keys the object may have, never the ones it may not (a misplaced secret)."""
    schema: Any = error.schema
    named = [_quote(name) for name in schema.get("properties", {})]
    allowed = named[:ALLOWED_KEYS_SHOWN] + ["…"] * (len(named) > ALLOWED_KEYS_SHOWN)
    allowed += [
        f"keys matching {_quote(pattern)}" for pattern in schema.get("patternProperties", {})
    ]
    return f"has keys that are not allowed (allowed: {', '.join(allowed) or 'none'})"


def _expected(keyword: str, value: Any) -> str:
    """What the rule asks for, in words, from the schema's value for it alone."""
    plural = "" if value == 1 else "s"
    match keyword:
        case "type":
            kinds = [value] if isinstance(value, str) else list(value)
            return "must be of type " + " or ".join(kinds)
        case "enum":
            return f"must be one of {_quote(value)}"
        case "const":
            return f"must be {_quote(value)}"
        case "minLength":
            return f"must be at least {value} character{plural} long"
        case "maxLength":
            return f"must be at most {value} character{plural} long"
        case "pattern":
            return f"must match the pattern {_quote(value)}"
        case "minimum":
            return f"must be at least {value}"
        case "maximum":
            return f"must be at most {value}"
        case "exclusiveMinimum":
            return f"must be greater than {value}"
        case "exclusiveMaximum":
            return f"must be less than {value}"
        case "multipleOf":
            return f"must be a multiple of {value}"
        case "minItems":
            return f"must have at least {value} item{plural}"
        case "maxItems":
            return f"must have at most {value} item{plural}"
        case "uniqueItems":
            return "must not repeat an item"
        case "minProperties":
            return f"must have at least {value} propert{'y' if value == 1 else 'ies'}"
        case "maxProperties":
            return f"must have at most {value} propert{'y' if value == 1 else 'ies'}"
        case "anyOf":
            return f"must match at least one of the {len(value)} schemas it allows"
        case "oneOf":
            return f"must match exactly one of the {len(value)} schemas it allows"
        case "not":
            return "must not match the schema under `not`"
        case "contains" | "minContains" | "maxContains":
            return "must contain the right number of items matching `contains`"
        case "unevaluatedProperties":
            return "has properties that no schema allows"
        case "items" | "prefixItems" | "unevaluatedItems":
            return "has more items than the schema allows"
        case "None":  # jsonschema reports a `false` subschema at its parent's path
            return "has a value its schema forbids (`false`)"
        case _:
            return f"must meet `{keyword}`: {_quote(value)}"


def json_path(parts: Sequence[str | int]) -> str:
    """`$.query`, `$.items[0].$ref`, `$["odd key"]`; a very long key is shortened."""
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.replace("$", "_").isidentifier() and len(part) <= QUOTE_CHARS:
            path += f".{part}"
        else:
            path += f"[{_quote(part)}]"
    return path


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _where(parts: Sequence[str | int]) -> str:
    return json_path(parts).replace("$", "parameters", 1)


# Registration: every regular expression compiles on RE2, every reference resolves.


@functools.lru_cache(maxsize=1024)
def regex(pattern: str) -> Any:
    """The RE2 program for `pattern` (cached: schemas repeat their patterns on every call)."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _check_patterns_and_refs(name: str, cls: type[Validator], schema: JsonObject) -> None:
    spec = referencing.jsonschema.specification_with(
        str(cls.META_SCHEMA.get("$id", "")), default=referencing.jsonschema.DRAFT202012
    )
    root = SPECIFICATIONS.resolver_with_root(spec.create_resource(schema))
    has_pattern_properties = has_unevaluated = False
    stack: list[tuple[Any, Any, list[str | int]]] = [(schema, root, [])]  # value, resolver, path
    while stack:
        node, resolver, path = stack.pop()
        if isinstance(node, list):
            stack.extend((item, resolver, [*path, i]) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(spec.create_resource(node))
        if node.get("writeOnly") is True and "default" in node:
            problem = "a writeOnly (secret) value's default would be sent to the model provider"
            raise ToolSchemaError(name, problem, _where([*path, "default"]))
        for keyword in ("$ref", "$dynamicRef"):
            if isinstance(ref := node.get(keyword), str):
                _resolve(name, resolver, ref, [*path, keyword])
        if isinstance(pattern := node.get("pattern"), str):
            _compile(name, pattern, [*path, "pattern"])
        if isinstance(patterns := node.get("patternProperties"), dict):
            has_pattern_properties = True
            for pattern in patterns:
                _compile(name, pattern, [*path, "patternProperties", pattern])
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
        stack.extend(
            (child, resolver, [*path, key])
            for key, child in node.items()
            if key not in _DATA_KEYWORDS
        )
    if has_pattern_properties and has_unevaluated:
        problem = (
            "`unevaluatedProperties` cannot be used with `patternProperties` "
            "(their patterns would run on a backtracking engine)"
        )
        raise ToolSchemaError(name, problem, "parameters")


def _resolve(name: str, resolver: Any, ref: str, path: list[str | int]) -> None:
    try:
        resolver.lookup(ref)
    except referencing.exceptions.Unresolvable:
        problem = (
            f"cannot resolve {_quote(ref)} (only references inside the schema "
            "or to a JSON Schema meta-schema are allowed)"
        )
        raise ToolSchemaError(name, problem, _where(path)) from None


def _compile(name: str, pattern: str, path: list[str | int]) -> None:
    try:
        regex(pattern)
    except re2.error as error:
        detail = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else ""
        problem = (
            f"the pattern {_quote(pattern)} is not supported by RE2, the linear-time engine "
            f"(no backreferences or lookaround): {detail}"
        )
        raise ToolSchemaError(name, problem, _where(path)) from None


# Validation: the keywords that match regular expressions, on RE2.


def _pattern(validator: Validator, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not regex(pattern).search(instance):
        yield jsonschema.ValidationError("does not match the pattern")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [regex(pattern) for pattern in schema.get("patternProperties", {})]
    extras = sorted(
        key
        for key in instance
        if key not in properties and not any(program.search(key) for program in patterns)
    )
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif allowed is False and extras:  # at the object's path: an extra key may be a secret
        yield jsonschema.ValidationError(f"{len(extras)} keys are not allowed")


@functools.cache
def _linear(cls: type[Validator]) -> type[Validator]:
    """`cls` with the regular-expression keywords on RE2."""
    linear: type[Validator] = extend(  # type: ignore[no-untyped-call]
        cls,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    return linear


# The fast check: a schema of the common keywords compiled into one predicate.

Check = Callable[[Any], bool]

#: Keywords that never fail without a format checker (Draft 2020-12, as `check_parameters` builds).
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
    | {"$comment", "format"}
)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


#: jsonschema's Draft 2020-12 type checker, one plain function per type.
_TYPES: dict[str, Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": _is_integer,
    "number": _is_number,
}


def compiled_check(schema: Any) -> Check | None:
    """`schema` (Draft 2020-12) as one predicate, or None when it uses another keyword.

    Compiled: `type`, `properties`, `required`, `additionalProperties`, `items`,
    `enum` and `const` of strings, the numeric bounds, the length and item-count
    bounds, `pattern` (on RE2, as validation runs it) and the annotations. Each
    rule is jsonschema's own (a rule for another type passes); anything else,
    `$schema` and `$ref` among them, leaves the schema to the validator.
    """
    if isinstance(schema, bool):
        return _yes if schema else _no
    if not isinstance(schema, dict):
        return None
    checks: list[Check] = []
    fused = schema.get("type") == "object"
    if fused:  # the usual root: the type and the object keywords as one predicate
        check = _object(schema)
        if check is None:
            return None
        checks.append(check)
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or (fused and keyword in _OBJECT_KEYWORDS):
            continue
        check = _keyword(keyword, value, schema)
        if check is None:
            return None
        checks.append(check)
    if len(checks) == 1:
        return checks[0]
    rules = tuple(checks)

    def every(value: Any) -> bool:
        for rule in rules:  # noqa: SIM110 (all() over a generator costs a frame per call)
            if not rule(value):
                return False
        return True

    return every


def _yes(value: Any) -> bool:
    return True


def _no(value: Any) -> bool:
    return False


def _keyword(keyword: str, value: Any, schema: dict[str, Any]) -> Check | None:
    """One keyword's rule as a predicate; None when it is not one `compiled_check` knows."""
    match keyword:
        case "type":
            kinds = tuple(_TYPES[kind] for kind in ([value] if isinstance(value, str) else value))
            if len(kinds) == 1:
                return kinds[0]
            return lambda item: any(kind(item) for kind in kinds)
        case "properties":
            pairs = _compiled_properties(value)
            return None if pairs is None else _properties(pairs)
        case "required":
            required = frozenset(value)
            return lambda item: not isinstance(item, dict) or item.keys() >= required
        case "additionalProperties":
            return _additional(value, frozenset(schema.get("properties", {})))
        case "items":
            each = compiled_check(value)
            if each is None:
                return None
            return lambda item: not isinstance(item, list) or all(each(one) for one in item)
        case "enum" if all(isinstance(one, str) for one in value):
            allowed = frozenset(value)
            return lambda item: isinstance(item, str) and item in allowed
        case "const" if isinstance(value, str):
            return lambda item: item == value
        case "minimum":
            return lambda item: not _is_number(item) or item >= value
        case "maximum":
            return lambda item: not _is_number(item) or item <= value
        case "exclusiveMinimum":
            return lambda item: not _is_number(item) or item > value
        case "exclusiveMaximum":
            return lambda item: not _is_number(item) or item < value
        case "minLength":
            return lambda item: not isinstance(item, str) or len(item) >= value
        case "maxLength":
            return lambda item: not isinstance(item, str) or len(item) <= value
        case "minItems":
            return lambda item: not isinstance(item, list) or len(item) >= value
        case "maxItems":
            return lambda item: not isinstance(item, list) or len(item) <= value
        case "pattern":
            search = regex(value).search
            return lambda item: not isinstance(item, str) or search(item) is not None
        case _:
            return None


#: The keywords `_object` compiles into one predicate with `"type": "object"`.
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})


def _object(schema: dict[str, Any]) -> Check | None:
    """`"type": "object"` with its `properties`, `required` and `additionalProperties`.

    Each alone is a predicate that first asks whether the value is an object; a
    tool's arguments always are, so together they ask once, in one call per check.
    """
    properties = schema.get("properties", {})
    pairs = _compiled_properties(properties)
    if pairs is None:
        return None
    required = frozenset(schema.get("required", ()))
    rest = _additional(schema.get("additionalProperties", True), frozenset(properties))
    if rest is None:
        return None

    def object_check(item: Any) -> bool:
        if not isinstance(item, dict) or not item.keys() >= required:
            return False
        for name, check in pairs:
            if name in item and not check(item[name]):
                return False
        return rest is _yes or rest(item)

    return object_check


def _compiled_properties(properties: dict[str, Any]) -> tuple[tuple[str, Check], ...] | None:
    """Each property's name and compiled subschema, or None when one cannot be compiled."""
    pairs = []
    for name, subschema in properties.items():
        check = compiled_check(subschema)
        if check is None:
            return None
        pairs.append((name, check))
    return tuple(pairs)


def _properties(pairs: tuple[tuple[str, Check], ...]) -> Check:
    def properties(item: Any) -> bool:
        if isinstance(item, dict):
            for name, check in pairs:
                if name in item and not check(item[name]):
                    return False
        return True

    return properties


def _additional(allowed: Any, named: frozenset[str]) -> Check | None:
    """`additionalProperties` beside `properties` (`patternProperties` is not compiled)."""
    if allowed is True:
        return _yes
    if allowed is False:
        return lambda item: not isinstance(item, dict) or item.keys() <= named
    each = compiled_check(allowed)
    if each is None:
        return None
    return lambda item: (
        not isinstance(item, dict)
        or all(each(value) for key, value in item.items() if key not in named)
    )
