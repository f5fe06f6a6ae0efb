"""Configuration parsing (SPEC section 2): never crashes on a bad value.

A missing or blank value takes the default silently; a value that is not a
decimal integer, or is outside its range, takes the default and is reported
once as a `ConfigWarning` naming the variable, the bad value (shortened when
huge) and the value used. Decimal means ASCII: digits, an optional sign and
ASCII whitespace around them. A Unicode digit (`٧`) and Unicode whitespace (a
no-break space) are both refused, although `int` would take either; a value
of only such whitespace is not blank. The maximums keep every later use in
range: a timeout in milliseconds of at most a day converts to seconds and
deadlines without overflow, and a number of more digits than the maximum has
is never handed to `int`. Parsing is pure; `toolloop.effects.config_loading.load_config` reads
the process environment and logs the warnings.
"""

import re
from collections.abc import Mapping

import attrs

from toolloop.states import ConfigWarning, LoopConfig

_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
_BLANK = re.compile(r"\s*", re.ASCII)
_DAY_MS = 24 * 60 * 60 * 1000
#: Characters of a bad value quoted in a warning.
MAX_VALUE_CHARS = 40


@attrs.frozen(kw_only=True)
class Variable:
    """One variable: its `LoopConfig` field and the range of values it accepts."""

    field: str
    minimum: int
    maximum: int


#: variable -> its field and range, in SPEC order (warnings follow it).
VARIABLES: dict[str, Variable] = {
    "BOT_MAX_FUNCTION_CALL_ITERATIONS": Variable(
        field="max_function_call_iterations", minimum=1, maximum=10_000
    ),
    "BOT_MAX_CONSECUTIVE_TOOL_ERRORS": Variable(
        field="max_consecutive_tool_errors", minimum=1, maximum=1_000
    ),
    "NAI_TOOL_FAILURE_RETRY_THRESHOLD": Variable(
        field="nai_tool_failure_retry_threshold", minimum=1, maximum=1_000
    ),
    "STREAM_SDK_CALL_TIMEOUT_MS": Variable(
        field="stream_sdk_call_timeout_ms", minimum=10_000, maximum=_DAY_MS
    ),
    "STREAM_ABANDONED_SETTLE_TIMEOUT_MS": Variable(
        field="stream_abandoned_settle_timeout_ms", minimum=0, maximum=600_000
    ),
    "TOOL_EXECUTION_TIMEOUT_MS": Variable(
        field="tool_execution_timeout_ms", minimum=10_000, maximum=_DAY_MS
    ),
    "VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS": Variable(
        field="verbatim_tool_call_max_buffer_chars", minimum=1, maximum=1_048_576
    ),
    "TOOL_PARALLEL_LIMIT": Variable(field="tool_parallel_limit", minimum=1, maximum=1_000),
    "TOOL_APPROVAL_TIMEOUT_MS": Variable(
        field="tool_approval_timeout_ms", minimum=10_000, maximum=_DAY_MS
    ),
}


@attrs.frozen(kw_only=True)
class LoadedConfig:
    """The configuration and the warnings its invalid values raised."""

    config: LoopConfig
    warnings: tuple[ConfigWarning, ...] = ()


def parse_config(env: Mapping[str, object]) -> LoadedConfig:
    """Read every variable from `env`: the configuration and a warning per invalid value."""
    defaults = LoopConfig()
    values: dict[str, int] = {}
    warnings: list[ConfigWarning] = []
    for name, variable in VARIABLES.items():
        default: int = getattr(defaults, variable.field)
        raw = env.get(name)
        value = _parse(raw, variable)
        if value is None:
            if raw is not None and not _BLANK.fullmatch(text := _text(raw)):
                warnings.append(ConfigWarning(variable=name, value=text, used=default))
            value = default
        values[variable.field] = value
    return LoadedConfig(config=LoopConfig(**values), warnings=tuple(warnings))


def _parse(raw: object, variable: Variable) -> int | None:
    """The integer `raw` spells when it is one within the variable's range, else None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        value = raw
    elif raw is None or not _INTEGER.fullmatch(text := str(raw)):
        return None
    elif len(text.strip().lstrip("+-").lstrip("0")) > len(str(variable.maximum)):
        return None  # more digits than the maximum has: out of range, and never given to `int`
    else:
        value = int(text)
    return value if variable.minimum <= value <= variable.maximum else None


def _text(raw: object) -> str:
    """`raw` as a warning quotes it: shortened past `MAX_VALUE_CHARS`."""
    try:
        text = str(raw)
    except ValueError:  # an int too long for `str`: Python refuses past 4,300 digits
        return f"an integer of {raw.bit_length()} bits"  # type: ignore[attr-defined]
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}… ({len(text)} characters)"
