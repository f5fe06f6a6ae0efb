"""Configuration from the environment (SPEC section 2): never crashes on a bad value.

A missing or blank value takes the default silently; a value that is not a
decimal integer, or is below its minimum, takes the default and is reported
once as a `ConfigWarning` naming the variable, the bad value and the value used.
"""

import os
import re
from collections.abc import Mapping

import attrs

from toolloop.states import ConfigWarning, LoopConfig

_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")

#: variable -> (LoopConfig field, minimum), in SPEC order (warnings follow it).
VARIABLES: dict[str, tuple[str, int]] = {
    "BOT_MAX_FUNCTION_CALL_ITERATIONS": ("max_function_call_iterations", 1),
    "BOT_MAX_CONSECUTIVE_TOOL_ERRORS": ("max_consecutive_tool_errors", 1),
    "NAI_TOOL_FAILURE_RETRY_THRESHOLD": ("nai_tool_failure_retry_threshold", 1),
    "STREAM_SDK_CALL_TIMEOUT_MS": ("stream_sdk_call_timeout_ms", 10_000),
    "STREAM_ABANDONED_SETTLE_TIMEOUT_MS": ("stream_abandoned_settle_timeout_ms", 0),
    "TOOL_EXECUTION_TIMEOUT_MS": ("tool_execution_timeout_ms", 10_000),
    "VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS": ("verbatim_tool_call_max_buffer_chars", 1),
}


@attrs.frozen(kw_only=True)
class LoadedConfig:
    """The configuration and the warnings its invalid values raised."""

    config: LoopConfig
    warnings: tuple[ConfigWarning, ...] = ()


def load_config(env: Mapping[str, object] | None = None) -> LoadedConfig:
    """Read every variable from `env` (default: the process environment)."""
    source: Mapping[str, object] = os.environ if env is None else env
    defaults = LoopConfig()
    values: dict[str, int] = {}
    warnings: list[ConfigWarning] = []
    for variable, (field, minimum) in VARIABLES.items():
        default: int = getattr(defaults, field)
        raw = source.get(variable)
        value = _parse(raw, minimum)
        if value is None:
            if raw is not None and str(raw).strip():
                warnings.append(ConfigWarning(variable=variable, value=str(raw), used=default))
            value = default
        values[field] = value
    return LoadedConfig(config=LoopConfig(**values), warnings=tuple(warnings))


def _parse(raw: object, minimum: int) -> int | None:
    """The integer `raw` spells when it is one and not below `minimum`, else None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= minimum else None
    if raw is None or not _INTEGER.fullmatch(text := str(raw)):
        return None
    value = int(text)
    return value if value >= minimum else None
