"""The tool registry's room: registration, typed tools, schemas, secrets, the stash.

`tool_registry` is the registry itself; `schema` checks a tool's JSON schema
and the arguments against it, `signature` reads a typed function's parameters
as a schema, `redaction` hides the `writeOnly` parts of arguments, and `stash`
keeps what a tool leaves for the next call of the turn.
"""

from toolloop.effects.registry.redaction import REDACTED
from toolloop.effects.registry.schema import ToolSchemaError, check_parameters
from toolloop.effects.registry.signature import ArgumentError, Secret, SignatureError
from toolloop.effects.registry.stash import ContextStash
from toolloop.effects.registry.tool_registry import (
    FollowUpRule,
    NotRegistered,
    ToolCall,
    ToolExecution,
    ToolFunction,
    ToolRegistry,
)

__all__ = [
    "REDACTED",
    "ArgumentError",
    "ContextStash",
    "FollowUpRule",
    "NotRegistered",
    "Secret",
    "SignatureError",
    "ToolCall",
    "ToolExecution",
    "ToolFunction",
    "ToolRegistry",
    "ToolSchemaError",
    "check_parameters",
]
