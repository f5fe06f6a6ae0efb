"""The code samples of the documentation: every fenced Python block and the output it shows.

The convention (docs/contributing.md): a ```python block runs as it stands,
with only the installed package; when the next fenced block after it is a
```text block, with nothing between but blank lines or one line ending in a
colon ("It prints:"), that block is exactly what the sample prints.

    python -m tests.docs_samples docs/embedding.md 1    prints the first sample's code
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$\n?", re.MULTILINE | re.DOTALL)


@attrs.frozen(kw_only=True)
class Sample:
    """One fenced Python block: where it is, its code, and the output the doc says it prints."""

    path: Path
    line: int
    """The line of the opening fence (1-based)."""
    code: str
    output: str | None
    """The text block right after the sample; None when the doc shows no output."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def samples(path: Path) -> list[Sample]:
    """The Python samples of one Markdown file, in order."""
    text = path.read_text("utf-8")
    blocks = list(FENCE.finditer(text))
    found = []
    for index, block in enumerate(blocks):
        if block.group(1) != "python":
            continue
        after = blocks[index + 1] if index + 1 < len(blocks) else None
        shows_output = (
            after is not None
            and after.group(1) == "text"
            and _only_an_announcement(text[block.end() : after.start()])
        )
        found.append(
            Sample(
                path=path,
                line=text.count("\n", 0, block.start()) + 1,
                code=block.group(2),
                output=after.group(2) if after is not None and shows_output else None,
            )
        )
    return found


def _only_an_announcement(between: str) -> bool:
    """Nothing, or one line that ends with a colon ("It prints:"), stands between the blocks."""
    line = between.strip()
    return line == "" or ("\n" not in line and line.endswith(":"))


if __name__ == "__main__":
    document, number = sys.argv[1:]
    print(samples(ROOT / document)[int(number) - 1].code, end="")
