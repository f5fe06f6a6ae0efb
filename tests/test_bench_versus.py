"""`python -m tests.bench.versus`: each side of a comparison imports only its own tree's code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.bench.versus import HERE, export, side


def test_a_revision_runs_against_its_own_exported_code(tmp_path: Path) -> None:
    """HEAD exported and farmed: the child imports the export's toolloop, not this checkout's."""
    exported = export("HEAD", tmp_path / "tree")
    committed = subprocess.run(
        ["git", "-C", str(HERE), "show", "HEAD:engine/step.py"], capture_output=True, check=True
    ).stdout
    assert (exported / "engine" / "step.py").read_bytes() == committed
    command, cwd = side(exported, tmp_path / "farm", "HEAD", [])
    child = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    assert child.stdout == f"HEAD: toolloop from {tmp_path / 'farm'}\n"


def test_a_revision_git_cannot_export_ends_the_run_naming_it() -> None:
    """An unknown revision stops the comparison before anything runs, with git's reason."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.bench.versus", "no-such-revision", "bench_step"],
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("versus: git cannot export 'no-such-revision': ")
