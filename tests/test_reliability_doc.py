"""docs/reliability.md: its sample prints what the page says, and its numbers are the code's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from toolloop.effects.registry import stash, tool_registry
from toolloop.engine.config_parsing import VARIABLES
from toolloop.states import LoopConfig, json_policy

PAGE = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()


def test_sample_prints_what_the_page_says() -> None:
    """The Python block, run in a fresh interpreter, prints the text block below it."""
    (sample,) = re.findall(r"```python\n(.*?)```", PAGE, re.S)
    (printed,) = re.findall(r"It prints:\n\n```text\n(.*?)```", PAGE, re.S)
    done = subprocess.run(
        [sys.executable, "-c", sample], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr, done.stdout) == (0, "", printed)


def test_bounds_on_the_page_are_the_code_constants() -> None:
    """Every bound the page names has the value the code uses."""
    numbers = {
        "MAX_JSON_CHARS": (json_policy.MAX_JSON_CHARS, "16,777,216"),
        "MAX_JSON_DEPTH": (json_policy.MAX_JSON_DEPTH, "100"),
        "MAX_RESULT_CHARS": (tool_registry.MAX_RESULT_CHARS, "100,000"),
        "MAX_ERROR_CHARS": (tool_registry.MAX_ERROR_CHARS, "2,000"),
        "RING_SIZE": (tool_registry.RING_SIZE, "1,000"),
        "MAX_KEPT_ARGS_CHARS": (tool_registry.MAX_KEPT_ARGS_CHARS, "10,000"),
        "MAX_ITEMS": (stash.MAX_ITEMS, "64"),
        "TTL_S": (stash.TTL_S, "600"),
    }
    for name, (value, shown) in numbers.items():
        assert f"{value:,}".removesuffix(".0") == shown
        (row,) = [
            line for line in PAGE.splitlines() if line.startswith("|") and f"`{name}`" in line
        ]
        assert f" {shown} " in row, (name, row)


def test_configuration_table_is_the_code_ranges() -> None:
    """Each row of the configuration table has the code's default, minimum and maximum."""
    defaults = LoopConfig()
    for name, variable in VARIABLES.items():
        default = getattr(defaults, variable.field)
        row = f"| `{name}` | {default:,} | {variable.minimum:,} | {variable.maximum:,}"
        assert row in PAGE, row
