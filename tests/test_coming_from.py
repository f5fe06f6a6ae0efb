"""docs/coming-from.md's line counts are the counts of the three programs it shows."""

from __future__ import annotations

import re

from tests.docs_samples import ROOT

PAGE = ROOT / "docs" / "coming-from.md"
STAND_IN = "# -- not part of the program"


def lines_of(code: str) -> int:
    return sum(1 for line in code.splitlines() if line.strip())


def test_the_table_counts_the_programs_shown() -> None:
    """Non-blank lines of ours (before its loopback stand-in), pydantic-ai's, the SDK's."""
    text = PAGE.read_text("utf-8")
    ours, pydantic_ai, agents_sdk = re.findall(r"^```(?:python|py)\n(.*?)^```", text, re.M | re.S)[
        :3
    ]
    assert STAND_IN in ours
    counted = [lines_of(ours.split(STAND_IN)[0]), lines_of(pydantic_ai), lines_of(agents_sdk)]
    [row] = re.findall(r"^\| lines [^|]*\| (\d+) \| (\d+) \| (\d+) \|$", text, re.M)
    assert [int(number) for number in row] == counted
    assert counted[0] < counted[1] and counted[0] < counted[2]
