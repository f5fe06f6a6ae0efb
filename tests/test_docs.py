"""Docs that run: every Python sample of README.md and docs/ prints what the doc says it prints.

Each sample runs as a script in a fresh interpreter, in an empty directory, so
it sees only the installed package (the convention is in docs/contributing.md,
the extraction in tests/docs_samples.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_samples import DOCUMENTS, Sample, samples

ALL = [sample for document in DOCUMENTS for sample in samples(document)]


def run(sample: Sample, where: Path) -> subprocess.CompletedProcess[str]:
    script = where / "sample.py"
    script.write_text(sample.code, "utf-8")
    return subprocess.run(
        [sys.executable, str(script)], cwd=where, capture_output=True, text=True, timeout=90
    )


@pytest.mark.parametrize("sample", ALL, ids=[sample.name for sample in ALL])
def test_the_sample_runs_and_prints_what_the_doc_shows(sample: Sample, tmp_path: Path) -> None:
    """The sample exits 0; what it prints is the text block after it (nothing when it has none)."""
    done = run(sample, tmp_path)
    assert done.returncode == 0, f"{sample.name} failed:\n{done.stderr}"
    assert done.stdout == (sample.output or ""), f"{sample.name} printed:\n{done.stdout}"


def test_the_docs_have_samples_and_every_sample_runs_somewhere() -> None:
    """README.md and the guides are read, and the samples include the embedding example."""
    names = {sample.name.split(":")[0] for sample in ALL}
    assert {"docs/embedding.md", "docs/tools.md", "docs/providers.md", "docs/discord.md"} <= names


def test_a_sample_that_prints_something_else_is_caught(tmp_path: Path) -> None:
    """A sample owns the text block after it ("It prints:" may stand between), never past prose."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```python\nprint(6 * 7)\n```\n\nIt prints:\n\n```text\n41\n```\n\n"
        "```python\npass\n```\n\nA paragraph.\nOf prose.\n\n```text\nnot output\n```\n"
    )
    first, second = samples(doc)
    assert (first.line, first.output, second.output) == (1, "41\n", None)
    assert run(first, tmp_path).stdout != first.output
