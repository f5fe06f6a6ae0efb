"""Configuration values bounded on parse: huge values fall back with a warning."""

from __future__ import annotations

import pytest

from toolloop.engine.config_parsing import MAX_VALUE_CHARS, VARIABLES, parse_config
from toolloop.states import ConfigWarning, LoopConfig

MAXIMUMS = [
    ("BOT_MAX_FUNCTION_CALL_ITERATIONS", 10_000),
    ("BOT_MAX_CONSECUTIVE_TOOL_ERRORS", 1_000),
    ("NAI_TOOL_FAILURE_RETRY_THRESHOLD", 1_000),
    ("STREAM_SDK_CALL_TIMEOUT_MS", 86_400_000),
    ("STREAM_ABANDONED_SETTLE_TIMEOUT_MS", 600_000),
    ("TOOL_EXECUTION_TIMEOUT_MS", 86_400_000),
    ("VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS", 1_048_576),
    ("TOOL_PARALLEL_LIMIT", 1_000),
    ("TOOL_APPROVAL_TIMEOUT_MS", 86_400_000),
]


def test_maximums_are_the_documented_table() -> None:
    """Each variable's maximum is the one docs/reliability.md lists."""
    assert [(name, var.maximum) for name, var in VARIABLES.items()] == MAXIMUMS


@pytest.mark.parametrize(("variable", "maximum"), MAXIMUMS)
def test_values_above_the_maximum_fall_back(variable: str, maximum: int) -> None:
    """One above the maximum warns and uses the default; the maximum itself is accepted."""
    field = VARIABLES[variable].field
    default = getattr(LoopConfig(), field)
    above = parse_config({variable: str(maximum + 1)})
    assert getattr(above.config, field) == default
    assert above.warnings == (
        ConfigWarning(variable=variable, value=str(maximum + 1), used=default),
    )
    assert getattr(parse_config({variable: maximum}).config, field) == maximum


@pytest.mark.parametrize("variable", list(VARIABLES))
def test_thousands_of_digits_fall_back_with_a_shortened_value(variable: str) -> None:
    """5,000 digits never reach `int`: the warning quotes 40 characters and the size."""
    raw = "9" * 5000
    loaded = parse_config({variable: raw})
    default = getattr(LoopConfig(), VARIABLES[variable].field)
    assert getattr(loaded.config, VARIABLES[variable].field) == default
    shown = "9" * MAX_VALUE_CHARS + "… (5000 characters)"
    assert loaded.warnings == (ConfigWarning(variable=variable, value=shown, used=default),)


def test_huge_int_from_a_mapping_falls_back() -> None:
    """An int too long for `str` is described by its size, not printed."""
    loaded = parse_config({"TOOL_EXECUTION_TIMEOUT_MS": 10**5000})
    assert loaded.config.tool_execution_timeout_ms == 300_000
    assert loaded.warnings == (
        ConfigWarning(
            variable="TOOL_EXECUTION_TIMEOUT_MS",
            value=f"an integer of {(10**5000).bit_length()} bits",
            used=300_000,
        ),
    )


def test_leading_zeros_do_not_count_as_digits() -> None:
    """`000…0007` is 7: zeros before the digits do not make a value out of range."""
    loaded = parse_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": "0" * 50 + "7"})
    assert loaded.config.max_consecutive_tool_errors == 7
    assert loaded.warnings == ()
