"""Diagrams are drawn from the declaration; the committed ones and the README cannot drift."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.engine.builders import call, done, fail, ok
from tests.engine.drive import drive
from tests.specs.conformance import trace_of
from toolloop.engine.trace import dump_lines
from toolloop.specs import diagram
from toolloop.specs.diagram import (
    GraphvizMissing,
    UndeclaredMove,
    dot,
    edges,
    mermaid,
    trace_counts,
)
from toolloop.specs.machine import MACHINE
from toolloop.states import Phase

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = (
    "regenerate with `toolloop diagram --format mermaid -o docs/machine.mmd` and "
    "`toolloop diagram --format svg -o docs/machine.svg`"
)
MERMAID_EDGE = re.compile(r"^\s+(\S+) --> (\S+): (.*)$", re.MULTILINE)
DOT_EDGE = re.compile(r"^\s+(\w+) -> (\w+) \[label=<(.*?)>", re.MULTILINE)
EDGES = edges(MACHINE)
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not on PATH")


def phase_edges(edges: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The edges between phases (without the start and end markers)."""
    return [e for e in edges if "[*]" not in e[:2] and "start" not in e[:2]]


def a_trace(tmp_path: Path) -> Path:
    """A recorded attempt: a tool succeeds twice, fails once, then the model completes."""
    run = drive([call(), call(), call(), done()], [ok(), fail(), ok()])
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(dump_lines(trace_of(run))) + "\n")
    return path


class TestAgainstTheDeclaration:
    """The diagrams show every phase as a node and every declared move as an edge."""

    def test_mermaid_nodes_are_the_phases_and_edges_the_moves(self) -> None:
        """One Mermaid edge per move label from a phase, between exactly the phases."""
        edges = phase_edges(MERMAID_EDGE.findall(mermaid()))
        assert {node for edge in edges for node in edge[:2]} == {p.value for p in Phase}
        assert len(edges) == len(EDGES)

    def test_dot_nodes_are_the_phases_and_edges_the_moves(self) -> None:
        """One DOT edge per move label from a phase, between exactly the phases."""
        edges = phase_edges(DOT_EDGE.findall(dot()))
        assert {node for edge in edges for node in edge[:2]} == {p.value for p in Phase}
        assert len(edges) == len(EDGES)

    def test_each_edge_names_its_move_event_and_guards(self) -> None:
        """The end_turn edge reads its label, event, guard and unless guard."""
        assert (
            "dispatching --> finished: end_turn · ToolSettled "
            "[end_turn_requested and not restart_requested]"
        ) in mermaid()

    def test_the_committed_mermaid_matches_the_declaration(self) -> None:
        """docs/machine.mmd is what `toolloop diagram --format mermaid` prints now."""
        committed = (ROOT / "docs" / "machine.mmd").read_text()
        assert committed == mermaid(), f"docs/machine.mmd is out of date: {REGENERATE}"

    def test_the_committed_svg_has_every_phase_and_one_edge_per_move(self) -> None:
        """docs/machine.svg draws the phases and the moves (plus the start arrow)."""
        svg = (ROOT / "docs" / "machine.svg").read_text()
        titles = set(re.findall(r'class="node">\s*<title>(\w+)</title>', svg))
        assert titles == {p.value for p in Phase} | {"start"}, REGENERATE
        assert svg.count('class="edge"') == len(EDGES) + 1, REGENERATE

    def test_the_readme_shows_the_declared_machine(self) -> None:
        """README.md holds the Mermaid diagram between the machine markers."""
        readme = (ROOT / "README.md").read_text()
        block = re.search(r"<!-- machine:begin -->\n(.*?)<!-- machine:end -->", readme, re.S)
        assert block is not None, "README.md lacks the <!-- machine:begin/end --> markers"
        expected = f"```mermaid\n{mermaid()}```\n"
        assert block.group(1) == expected, (
            "README.md's machine diagram is out of date: paste the output of "
            "`toolloop diagram --format mermaid` between <!-- machine:begin --> and "
            "<!-- machine:end --> inside a ```mermaid fence"
        )


class TestRendering:
    """SVG and PNG go through Graphviz; without it, a clear error."""

    @NEEDS_DOT
    def test_svg_draws_one_edge_per_move(self) -> None:
        """The rendered SVG has the declared moves and the start arrow as edges."""
        svg = diagram.diagram("svg").decode()
        assert svg.count('class="edge"') == len(EDGES) + 1

    @NEEDS_DOT
    def test_png_is_a_png(self) -> None:
        """PNG output starts with the PNG signature."""
        assert diagram.diagram("png").startswith(b"\x89PNG\r\n\x1a\n")

    def test_without_dot_svg_says_how_to_get_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No `dot` on PATH: the error names the format and how to install Graphviz."""
        monkeypatch.setattr(diagram.shutil, "which", lambda name: None)
        with pytest.raises(
            GraphvizMissing,
            match=r"^--format svg needs Graphviz's `dot`.*"
            r"install Graphviz \(`apt-get install graphviz`.*\), or use --format mermaid\|dot$",
        ):
            diagram.diagram("svg")

    def test_an_unknown_format_is_refused(self) -> None:
        """Only the four formats are drawn."""
        with pytest.raises(ValueError, match=r"^unknown format 'jpeg': expected one of mermaid"):
            diagram.diagram("jpeg")


class TestTrace:
    """With a trace, the moves one attempt took are highlighted and counted."""

    def test_counts_are_how_often_each_move_was_taken(self, tmp_path: Path) -> None:
        """Three dispatches, two successes, one failure, one completion."""
        from toolloop.engine.trace import load_bytes

        counts = trace_counts(load_bytes(a_trace(tmp_path).read_bytes()))
        assert counts == {
            (Phase.IDLE, "started"): 1,
            (Phase.STREAMING, "dispatched"): 3,
            (Phase.DISPATCHING, "tool_succeeded"): 2,
            (Phase.DISPATCHING, "tool_failed"): 1,
            (Phase.STREAMING, "completed"): 1,
        }

    def test_mermaid_labels_each_move_with_its_count(self, tmp_path: Path) -> None:
        """Taken moves show their count, untaken ones zero, visited phases get a class."""
        text = diagram.diagram("mermaid", a_trace(tmp_path)).decode()
        assert "streaming --> dispatching: dispatched ×3 · StreamEnded" in text
        failed = "stream_failed ×0 · StreamEnded [stream_went_silent or stream_failed]"
        assert f"streaming --> finished: {failed}" in text
        assert "    class idle,streaming,dispatching,finished taken" in text

    def test_dot_draws_taken_moves_bold_and_the_rest_grey(self, tmp_path: Path) -> None:
        """The taken edges carry the highlight colour, the others grey."""
        text = diagram.diagram("dot", a_trace(tmp_path)).decode()
        dispatched = next(line for line in text.splitlines() if "<b>dispatched ×3</b>" in line)
        assert f'color="{diagram.TAKEN_COLOR}"' in dispatched
        failed = next(line for line in text.splitlines() if "<b>stream_failed ×0</b>" in line)
        assert f'color="{diagram.UNTAKEN_COLOR}"' in failed

    def test_an_undeclared_move_in_a_trace_is_named(self, tmp_path: Path) -> None:
        """A trace whose step names a move the declaration lacks is refused with its step."""
        path = a_trace(tmp_path)
        path.write_text(path.read_text().replace('"move": "completed"', '"move": "vanished"'))
        with pytest.raises(
            UndeclaredMove, match=r"^step 7: streaming -vanished-> finished is not a declared move$"
        ):
            diagram.diagram("mermaid", path)


class TestRules:
    """On request, each edge names the SPEC rules of the table rows it draws."""

    def test_an_edge_names_its_spec_rule(self) -> None:
        """The end_turn edge reads SPEC 4.3h2, step 2 of the history branch."""
        assert (
            "dispatching --> finished: end_turn · ToolSettled "
            "[end_turn_requested and not restart_requested] · SPEC 4.3h2"
        ) in mermaid(rules=True)

    def test_a_label_of_several_rows_is_one_edge_with_the_guards_they_share(self) -> None:
        """The four ceiling rows after a tool are one edge, guarded by what all four need."""
        key = (Phase.DISPATCHING, "ceiling_reached")
        ceiling = [e for e in EDGES if (e[0].source, e[0].label) == key]
        assert len(ceiling) == 1 and len(ceiling[0]) == 4
        edge = "dispatching --> finished: ceiling_reached · ToolSettled [ceiling_reached]\n"
        assert edge in mermaid()

    def test_dot_lists_the_rule_under_the_guards(self) -> None:
        """The DOT label ends with the rule line."""
        line = next(x for x in dot(rules=True).splitlines() if "<b>end_turn</b>" in x)
        assert "not restart_requested<br/>SPEC 4.3h2>" in line
