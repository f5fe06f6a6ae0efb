"""Configuration from the environment (SPEC section 2)."""

from __future__ import annotations

import pytest

from toolloop.engine.config_parsing import VARIABLES, parse_config
from toolloop.states import ConfigWarning, LoopConfig


def test_defaults_when_nothing_is_set() -> None:
    """An empty environment gives SPEC's defaults and no warning."""
    loaded = parse_config({})
    assert loaded.config == LoopConfig()
    assert loaded.warnings == ()


def test_defaults_match_the_spec_table() -> None:
    """The defaults are SPEC's numbers."""
    assert LoopConfig() == LoopConfig(
        max_function_call_iterations=100,
        max_consecutive_tool_errors=5,
        nai_tool_failure_retry_threshold=3,
        stream_sdk_call_timeout_ms=120_000,
        stream_abandoned_settle_timeout_ms=5_000,
        tool_execution_timeout_ms=300_000,
        verbatim_tool_call_max_buffer_chars=8_192,
    )


def test_bool_is_not_an_integer() -> None:
    """A mapping's `True` is not the integer 1."""
    loaded = parse_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": True})
    assert loaded.config.max_consecutive_tool_errors == 5
    assert [w.value for w in loaded.warnings] == ["True"]


def test_integer_values_below_the_minimum_fall_back() -> None:
    """An int from a mapping obeys the minimum too; the minimum itself passes."""
    assert (
        parse_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": 0}).config.max_consecutive_tool_errors == 5
    )
    assert (
        parse_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": 1}).config.max_consecutive_tool_errors == 1
    )


def test_negative_values_are_integers() -> None:
    """A sign is allowed: -0 meets a minimum of 0."""
    assert (
        parse_config(
            {"STREAM_ABANDONED_SETTLE_TIMEOUT_MS": "-0"}
        ).config.stream_abandoned_settle_timeout_ms
        == 0
    )


@pytest.mark.parametrize("raw", [" 7 ", "+7", "7", 7, "\t7\n"])
def test_integers_with_whitespace_and_sign_are_read(raw: object) -> None:
    """Optional whitespace and sign around decimal digits is an integer."""
    assert (
        parse_config({"BOT_MAX_FUNCTION_CALL_ITERATIONS": raw}).config.max_function_call_iterations
        == 7
    )


@pytest.mark.parametrize(
    "raw",
    [
        "7.0",
        "1e3",
        "0x10",
        "7abc",
        "abc",
        "٧",
        "７",
        "True",
        "\u00a07",
        "7\u3000",
        "\u2003",
        "\x85",
    ],
)
def test_non_integers_fall_back_with_one_warning(raw: str) -> None:
    """A non-integer takes the default and is reported once with variable, value and default.

    Unicode digits and Unicode whitespace alike (around digits or alone) are
    refused, though `int` reads both: only ASCII is a decimal integer here.
    """
    loaded = parse_config({"BOT_MAX_FUNCTION_CALL_ITERATIONS": raw})
    assert loaded.config.max_function_call_iterations == 100
    assert loaded.warnings == (
        ConfigWarning(variable="BOT_MAX_FUNCTION_CALL_ITERATIONS", value=raw, used=100),
    )


@pytest.mark.parametrize("raw", ["", "   "])
def test_blank_values_use_the_default_silently(raw: str) -> None:
    """Blank is the same as missing."""
    loaded = parse_config({"TOOL_EXECUTION_TIMEOUT_MS": raw})
    assert loaded.config.tool_execution_timeout_ms == 300_000
    assert loaded.warnings == ()


SPEC_TABLE = [
    ("BOT_MAX_FUNCTION_CALL_ITERATIONS", "max_function_call_iterations", 1),
    ("BOT_MAX_CONSECUTIVE_TOOL_ERRORS", "max_consecutive_tool_errors", 1),
    ("NAI_TOOL_FAILURE_RETRY_THRESHOLD", "nai_tool_failure_retry_threshold", 1),
    ("STREAM_SDK_CALL_TIMEOUT_MS", "stream_sdk_call_timeout_ms", 10_000),
    ("STREAM_ABANDONED_SETTLE_TIMEOUT_MS", "stream_abandoned_settle_timeout_ms", 0),
    ("TOOL_EXECUTION_TIMEOUT_MS", "tool_execution_timeout_ms", 10_000),
    ("VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS", "verbatim_tool_call_max_buffer_chars", 1),
    ("TOOL_PARALLEL_LIMIT", "tool_parallel_limit", 1),
    ("TOOL_APPROVAL_TIMEOUT_MS", "tool_approval_timeout_ms", 10_000),
]


def test_variables_are_the_spec_table_in_order() -> None:
    """The variables, their fields and minimums are SPEC's, in SPEC's order."""
    assert [(v, var.field, var.minimum) for v, var in VARIABLES.items()] == SPEC_TABLE


@pytest.mark.parametrize(("variable", "field", "minimum"), SPEC_TABLE)
def test_values_below_the_minimum_fall_back(variable: str, field: str, minimum: int) -> None:
    """One below the minimum warns; the minimum itself is accepted."""
    below = parse_config({variable: str(minimum - 1)})
    assert getattr(below.config, field) == getattr(LoopConfig(), field)
    default = getattr(LoopConfig(), field)
    assert below.warnings == (
        ConfigWarning(variable=variable, value=str(minimum - 1), used=default),
    )
    assert getattr(parse_config({variable: str(minimum)}).config, field) == minimum


def test_warnings_follow_the_variable_order() -> None:
    """Several bad values give one warning each, in SPEC's order."""
    loaded = parse_config(
        {"TOOL_EXECUTION_TIMEOUT_MS": "x", "BOT_MAX_CONSECUTIVE_TOOL_ERRORS": "0"}
    )
    assert [w.variable for w in loaded.warnings] == [
        "BOT_MAX_CONSECUTIVE_TOOL_ERRORS",
        "TOOL_EXECUTION_TIMEOUT_MS",
    ]


def test_unknown_variables_are_ignored() -> None:
    """Other names in the mapping change nothing."""
    assert parse_config({"PATH": "/bin", "BOT_OTHER": "x"}).warnings == ()
