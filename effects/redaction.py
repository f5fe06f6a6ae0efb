"""Which parts of a tool's arguments are secret, read from its parameters schema.

A part is secret when a schema that applies to it says `"writeOnly": true`
(standard JSON Schema: sent by the client, never read back). The walk follows
`properties`, `additionalProperties`, `items` and the combinators `anyOf`,
`oneOf` and `allOf` (where `X | None` of a typed tool puts X), at any depth,
and redacts a part any branch marks: a branch that does not apply cannot
reveal more, only hide more. `$ref` is not followed.

A key an object's schema forbids (`"additionalProperties": false`, not in its
`properties`) is hidden with its value: a model that misplaced a secret may
have sent it as a key's name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["REDACTED", "has_secrets", "redact"]

REDACTED = "[redacted]"
_COMBINATORS = ("allOf", "anyOf", "oneOf")


def redact(value: Any, schema: Any) -> Any:
    """`value` with every part a `writeOnly` schema applies to replaced by `[redacted]`."""
    if not isinstance(schema, dict):
        return value
    if schema.get("writeOnly") is True:
        return REDACTED
    for keyword in _COMBINATORS:
        branches = schema.get(keyword)
        for branch in branches if isinstance(branches, list) else ():
            value = redact(value, branch)
    if isinstance(value, dict):
        return _redact_object(value, schema)
    if isinstance(value, list):
        return [redact(item, schema.get("items")) for item in value]
    return value


def _redact_object(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    shown = {}
    forbidden = 0
    for key, item in value.items():
        if key in properties:
            shown[key] = redact(item, properties[key])
        elif extra is False and "patternProperties" not in schema:
            forbidden += 1
        else:
            shown[key] = redact(item, extra)
    if forbidden:
        shown[REDACTED] = f"{forbidden} key{'s' if forbidden > 1 else ''} the schema does not allow"
    return shown


def has_secrets(schema: Any) -> bool:
    """Whether some schema `redact` reads says `writeOnly` (else arguments need no walk)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("writeOnly") is True:
        return True
    properties = schema.get("properties")
    below = [*(properties.values() if isinstance(properties, dict) else ())]
    below += [schema.get("additionalProperties"), schema.get("items")]
    for keyword in _COMBINATORS:
        branches = schema.get(keyword)
        below += branches if isinstance(branches, list) else []
    return any(has_secrets(child) for child in below)
