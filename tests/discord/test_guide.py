"""The examples of docs/discord.md run as written and print what the guide says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).parents[2] / "docs" / "discord.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
PRINTS = ["['kill'] False\n", "TurnManager\n"]


def test_the_guide_has_the_two_examples() -> None:
    """Both examples (your tools and persona, the building blocks) are found."""
    assert len(EXAMPLES) == len(PRINTS)


@pytest.mark.parametrize(("example", "prints"), list(zip(EXAMPLES, PRINTS, strict=True)))
def test_an_example_prints_what_the_guide_says(example: str, prints: str) -> None:
    """Run in a fresh interpreter, the example exits 0 with the documented output."""
    done = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, prints, "")
