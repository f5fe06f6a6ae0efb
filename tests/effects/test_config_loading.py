"""`load_config`: the process environment by default, every warning logged once at WARNING."""

from __future__ import annotations

import logging

import pytest

from toolloop.effects.config_loading import load_config


def test_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a mapping the process environment is read."""
    monkeypatch.setenv("STREAM_ABANDONED_SETTLE_TIMEOUT_MS", "0")
    assert load_config().config.stream_abandoned_settle_timeout_ms == 0


def test_warnings_are_logged_once_at_warning_when_loaded(caplog: pytest.LogCaptureFixture) -> None:
    """Each warning is logged once, at WARNING, naming variable, value, range and value used."""
    env = {"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": "lots", "TOOL_EXECUTION_TIMEOUT_MS": "5"}
    with caplog.at_level(logging.DEBUG, logger="toolloop"):
        loaded = load_config(env)
    records = [(r.levelno, r.name, r.getMessage()) for r in caplog.records]
    assert records == [
        (
            logging.WARNING,
            "toolloop.effects.config_loading",
            "BOT_MAX_CONSECUTIVE_TOOL_ERRORS='lots' is not an integer from 1 to 1000; using 5",
        ),
        (
            logging.WARNING,
            "toolloop.effects.config_loading",
            "TOOL_EXECUTION_TIMEOUT_MS='5' is not an integer from 10000 to 86400000; using 300000",
        ),
    ]
    assert len(loaded.warnings) == 2


def test_a_huge_value_is_logged_shortened(caplog: pytest.LogCaptureFixture) -> None:
    """A value of 5,000 digits is logged as its first 40 characters and its length."""
    with caplog.at_level(logging.WARNING, logger="toolloop"):
        load_config({"STREAM_ABANDONED_SETTLE_TIMEOUT_MS": "2" + "0" * 4999})
    (record,) = caplog.records
    assert record.getMessage() == (
        f"STREAM_ABANDONED_SETTLE_TIMEOUT_MS='{'2' + '0' * 39}… (5000 characters)' "
        "is not an integer from 0 to 600000; using 5000"
    )


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("5\nWARNING toolloop: all good", "'5\\nWARNING toolloop: all good'"),
        ("\x1b[2J\x1b]0;owned\x07", "'\\x1b[2J\\x1b]0;owned\\x07'"),
        ("7\r", "'7\\r'"),
        ("\u202e9", "'\\u202e9'"),
        ("\u00a07", "'\\xa07'"),
    ],
)
def test_a_value_is_logged_escaped(caplog: pytest.LogCaptureFixture, raw: str, shown: str) -> None:
    """A newline cannot forge a log line, nor an escape sequence reach the terminal."""
    with caplog.at_level(logging.WARNING, logger="toolloop"):
        load_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": f"x{raw}"})
    (record,) = caplog.records
    message = record.getMessage()
    assert message.startswith(f"BOT_MAX_CONSECUTIVE_TOOL_ERRORS='x{shown[1:]} is not an integer")
    assert message.isprintable()


def test_valid_configuration_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Valid and blank values log nothing at all."""
    with caplog.at_level(logging.DEBUG, logger="toolloop"):
        load_config({"BOT_MAX_CONSECUTIVE_TOOL_ERRORS": "7", "TOOL_EXECUTION_TIMEOUT_MS": " "})
    assert caplog.records == []
