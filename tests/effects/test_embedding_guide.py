"""The examples of docs/embedding.md run as written and print what the guide says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).parents[2] / "docs" / "embedding.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
PRINTS = [
    "completed | Let me check. The sky over Kyoto is clear.\n" * 2,
    "general stopped_by_user | Thinking about it\n"
    "random cancelled by the host | Thinking about it\n",
]


def test_the_guide_has_the_two_examples() -> None:
    """Both examples (trio and asyncio program, asyncio bot) are found."""
    assert len(EXAMPLES) == len(PRINTS)


@pytest.mark.parametrize(("example", "prints"), list(zip(EXAMPLES, PRINTS, strict=True)))
def test_an_example_prints_what_the_guide_says(example: str, prints: str) -> None:
    """Run in a fresh interpreter, the example exits 0 with the documented output."""
    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(done.stdout.splitlines()) == sorted(prints.splitlines())
