"""`toolloop diagram` and `toolloop specs paths` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolloop.specs import diagram
from toolloop.specs.diagram import mermaid
from toolloop.specs.machine import MACHINE
from toolloop.tools.cli import main


def test_diagram_prints_mermaid_by_default(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """Without options the Mermaid text goes to stdout."""
    assert main(["diagram"]) == 0
    assert capsysbinary.readouterr().out.decode() == mermaid()


def test_diagram_writes_the_chosen_format_to_a_file(tmp_path: Path) -> None:
    """`--format dot -o FILE` writes the DOT text there."""
    out = tmp_path / "machine.dot"
    assert main(["diagram", "--format", "dot", "-o", str(out)]) == 0
    assert out.read_text() == diagram.dot()


def test_a_missing_trace_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreadable trace is an error naming the file, not a traceback."""
    missing = tmp_path / "nope.jsonl"
    assert main(["diagram", "--trace", str(missing)]) == 2
    assert capsys.readouterr().err.startswith(f"toolloop diagram: {missing}: ")


def test_a_malformed_trace_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace that is not JSON lines is reported with its line."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{\n")
    assert main(["diagram", "--trace", str(broken)]) == 2
    assert capsys.readouterr().err.startswith(f"toolloop diagram: {broken}: line 1: not JSON")


def test_svg_without_graphviz_exits_2_saying_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No `dot`: exit status 2 and the install hint on stderr."""
    monkeypatch.setattr(diagram.shutil, "which", lambda name: None)
    assert main(["diagram", "--format", "svg"]) == 2
    assert "apt-get install graphviz" in capsys.readouterr().err


def test_specs_paths_prints_one_path_per_declared_move(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The printed JSON lists a path for every declared move."""
    assert main(["specs", "paths"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed) == len(MACHINE.moves)


def test_the_installed_entry_point_runs(tmp_path: Path) -> None:
    """`python -m toolloop.tools.cli specs paths --out DIR` writes the scenario files."""
    command = [sys.executable, "-m", "toolloop.tools.cli", "specs", "paths", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dispatching-end_turn.json").exists()


def test_diagram_rules_labels_the_edges_with_spec_rules(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """`--rules` prints the Mermaid text with each edge's SPEC rule."""
    assert main(["diagram", "--rules"]) == 0
    assert capsysbinary.readouterr().out.decode() == mermaid(rules=True)
