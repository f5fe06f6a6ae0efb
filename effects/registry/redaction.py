"""Which parts of a tool's arguments are secret, read from its parameters schema.

A part is secret when a schema that applies to it says `"writeOnly": true`
(standard JSON Schema: sent by the client, never read back). The walk follows
what applies a schema to a part: `properties`, `patternProperties` (on RE2, as
validation does), `additionalProperties`, `prefixItems`, `items`, the
combinators `anyOf`, `oneOf` and `allOf` (where `X | None` of a typed tool
puts X), and `$ref` (resolved as validation resolves it, inside the schema or
to a meta-schema), at any depth. A part any branch marks is redacted: a
branch that does not apply cannot reveal more, only hide more.

A key an object's schema forbids (`"additionalProperties": false`, matched by
neither `properties` nor `patternProperties`) is hidden with its value: a
model that misplaced a secret may have sent it as a key's name.
"""

from __future__ import annotations

from typing import Any

import referencing.jsonschema
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]

from toolloop.effects.registry.schema import regex
from toolloop.states import JsonObject

__all__ = ["REDACTED", "has_secrets", "redact"]

REDACTED = "[redacted]"
_COMBINATORS = ("allOf", "anyOf", "oneOf")
#: What applies a schema to an object's values, and to an array's items: without them, no walk.
_OBJECT_KEYWORDS = frozenset({"properties", "patternProperties", "additionalProperties"})
_ARRAY_KEYWORDS = frozenset({"prefixItems", "items"})
_NOTHING_FOLLOWED: frozenset[int] = frozenset()
_SPEC = referencing.jsonschema.DRAFT202012


def redact(value: Any, schema: Any) -> Any:
    """`value` with every part a `writeOnly` schema applies to replaced by `[redacted]`."""
    if not isinstance(schema, dict):
        return value
    return _redact(value, schema, _resolver(schema), _NOTHING_FOLLOWED)


def has_secrets(schema: Any) -> bool:
    """Whether some schema `redact` reads says `writeOnly` (else arguments need no walk)."""
    if not isinstance(schema, dict):
        return False
    stack: list[tuple[Any, Any]] = [(schema, _resolver(schema))]
    seen: set[int] = set()
    while stack:
        node, resolver = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if node.get("writeOnly") is True:
            return True
        resolver = _in_subresource(resolver, node)
        stack.extend((child, resolver) for child in _subschemas(node))
        if (resolved := _lookup(resolver, node)) is not None:
            stack.append((resolved.contents, resolved.resolver))
    return False


_RESOLVERS: dict[int, tuple[dict[str, Any], Any]] = {}
"""Each root schema's resolver, by the schema's identity (a tool redacts on every call)."""
_MAX_RESOLVERS = 1024


def _resolver(root: dict[str, Any]) -> Any:
    """The resolver of `$ref`s in `root`, made once per schema object (it halves the cost)."""
    kept = _RESOLVERS.get(id(root))
    if kept is not None and kept[0] is root:
        return kept[1]
    if len(_RESOLVERS) >= _MAX_RESOLVERS:
        _RESOLVERS.clear()
    resolver = SPECIFICATIONS.resolver_with_root(_SPEC.create_resource(root))
    _RESOLVERS[id(root)] = (root, resolver)
    return resolver


def _in_subresource(resolver: Any, node: dict[str, Any]) -> Any:
    if isinstance(node.get("$id"), str):
        return resolver.in_subresource(_SPEC.create_resource(node))
    return resolver


def _lookup(resolver: Any, node: dict[str, Any]) -> Any:
    """What the node's `$ref` points at (registration resolved it once), or None."""
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return None
    try:
        return resolver.lookup(ref)
    except referencing.exceptions.Unresolvable:
        return None


def _subschemas(node: dict[str, Any]) -> list[Any]:
    """Every schema `redact` may apply below `node`, `$ref` aside."""
    below: list[Any] = [node.get("additionalProperties"), node.get("items")]
    for keyword in ("properties", "patternProperties"):
        if isinstance(children := node.get(keyword), dict):
            below += children.values()
    for keyword in ("prefixItems", *_COMBINATORS):
        if isinstance(children := node.get(keyword), list):
            below += children
    return below


def _redact(value: Any, schema: Any, resolver: Any, followed: frozenset[int]) -> Any:
    """`followed`: the `$ref`s taken at this level of `value`, so that a cycle of them ends."""
    if not isinstance(schema, dict):
        return value
    if schema.get("writeOnly") is True:
        return REDACTED
    if "$id" in schema:
        resolver = _in_subresource(resolver, schema)
    if "$ref" in schema and id(schema) not in followed:
        resolved = _lookup(resolver, schema)
        if resolved is not None:
            value = _redact(value, resolved.contents, resolved.resolver, followed | {id(schema)})
    for keyword in _COMBINATORS:
        branches = schema.get(keyword)
        for branch in branches if isinstance(branches, list) else ():
            value = _redact(value, branch, resolver, followed)
    if isinstance(value, dict) and not _OBJECT_KEYWORDS.isdisjoint(schema):
        return _redact_object(value, schema, resolver)
    if isinstance(value, list) and not _ARRAY_KEYWORDS.isdisjoint(schema):
        prefix, items = schema.get("prefixItems", []), schema.get("items")
        return [
            _redact(
                item, prefix[index] if index < len(prefix) else items, resolver, _NOTHING_FOLLOWED
            )
            for index, item in enumerate(value)
        ]
    return value


def _redact_object(value: dict[str, Any], schema: dict[str, Any], resolver: Any) -> JsonObject:
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extra = schema.get("additionalProperties")
    shown, forbidden = {}, 0
    for key, item in value.items():
        applying = (
            [child for pattern, child in patterns.items() if regex(pattern).search(key)]
            if patterns
            else []
        )
        if key in properties:
            applying.append(properties[key])
        if not applying and extra is False:
            forbidden += 1
            continue
        for child in applying or [extra]:
            item = _redact(item, child, resolver, _NOTHING_FOLLOWED)
        shown[key] = item
    if forbidden:
        shown[REDACTED] = f"{forbidden} key{'s' if forbidden > 1 else ''} the schema does not allow"
    return shown
