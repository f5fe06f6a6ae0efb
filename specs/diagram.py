"""Diagrams of the declared machine: Mermaid and DOT text, SVG and PNG through Graphviz.

Everything is drawn from `toolloop.specs.machine.MACHINE`, read off the table:
one node per phase, one edge per move label from a phase, labelled with the
label, its event and its guards (`not g` for an unless guard; the moves a label
names are joined by `or`) and, on request (`toolloop diagram --rules`), the
SPEC rules its rows implement. Given a trace, the same machine is drawn with
the moves that one recorded attempt took highlighted and each labelled with
how often it was taken.

A trace is the JSON-lines file of `toolloop.engine.trace` (`toolloop simulate
--trace FILE` writes it). The diagram needs only its `step` lines, but the
file is read whole and replayed, so it must be a whole trace that replays
exactly, as `toolloop replay` checks (a cut off, padded or doubled one is an
error naming the line or the step):

    {"kind": "start", "version": 2, "config": {...}, "turn": {...}}   first line
    {"kind": "event", "event": {"_type": "StreamEnded", ...}}          one per step
    {"kind": "effect", "effect": {"_type": "StreamOnce", ...}}         zero or more
    {"kind": "step", "move": "dispatched", "source": "streaming", "dest": "dispatching"}
    {"kind": "end", "steps": 12}                                       last line

`move` is the label `step` reported (`Step.move`), `source` and `dest` are
`Phase` values; a (source, move, dest) that is not declared is an error.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from toolloop.engine.trace import Trace, load_bytes, replayed
from toolloop.specs.machine import MACHINE, Declaration, DeclaredMove
from toolloop.states import Phase
from toolloop.states.errors import InvalidOption, ToolloopError

FORMATS = ("mermaid", "dot", "svg", "png")
Counts = Mapping[tuple[Phase, str], int]
TAKEN_COLOR, UNTAKEN_COLOR = "#c2410c", "#9ca3af"


class GraphvizMissing(ToolloopError, RuntimeError):
    """SVG or PNG was asked for but Graphviz's `dot` is not on PATH."""

    def __init__(self, fmt: str) -> None:
        super().__init__(
            f"--format {fmt} needs Graphviz's `dot`, which is not on PATH: install Graphviz "
            "(`apt-get install graphviz`, `brew install graphviz`), or use --format mermaid|dot"
        )


class GraphvizFailed(ToolloopError, RuntimeError):
    """Graphviz's `dot` ran and failed; the message carries what it printed."""


class UndeclaredMove(ToolloopError, ValueError):
    """A trace took a move the declaration does not have."""


Edge = tuple[DeclaredMove, ...]
"""The moves one label names from one phase: one edge of the diagram."""


def edges(declaration: Declaration) -> list[Edge]:
    """The declared moves grouped by (source, label), in declared order."""
    grouped: dict[tuple[Phase, str], list[DeclaredMove]] = {}
    for move in declaration.moves:
        grouped.setdefault((move.source, move.label), []).append(move)
    return [tuple(moves) for moves in grouped.values()]


def _guard_names(move: DeclaredMove) -> tuple[str, ...]:
    return (*move.conditions, *(f"not {name}" for name in move.unless))


def guard_alternatives(edge: Edge) -> list[tuple[str, ...]]:
    """The edge's guards, one conjunction per move, without those another one implies.

    `a and b or a` is `a`: a move whose guards include all of another's adds nothing.
    """
    names = list(dict.fromkeys(_guard_names(move) for move in edge))
    return [a for a in names if not any(set(b) < set(a) for b in names)]


def guards_text(edge: Edge) -> str:
    """The edge's guards, e.g. `[end_turn_requested and not restart_requested]`."""
    alternatives = guard_alternatives(edge)
    text = " or ".join(" and ".join(names) for names in alternatives if names)
    return f" [{text}]" if all(alternatives) else ""


def rules_text(edge: Edge) -> str:
    """The SPEC rules the edge's moves implement, e.g. `SPEC 4.3h2`."""
    rules = dict.fromkeys(rule for move in edge for rule in move.rule.split())
    return f"SPEC {' '.join(rules)}" if rules else ""


def _count_suffix(move: DeclaredMove, counts: Counts | None) -> str:
    if counts is None:
        return ""
    return f" ×{counts.get((move.source, move.label), 0)}"


def mermaid(
    declaration: Declaration = MACHINE, counts: Counts | None = None, *, rules: bool = False
) -> str:
    """`stateDiagram-v2` text; with `counts`, moves carry counts and visited phases a class."""
    lines = ["stateDiagram-v2", f"    [*] --> {declaration.initial.value}"]
    for edge in edges(declaration):
        move = edge[0]
        label = f"{move.label}{_count_suffix(move, counts)} · {move.trigger}{guards_text(edge)}"
        if rules:
            label += f" · {rules_text(edge)}"
        lines.append(f"    {move.source.value} --> {move.dest.value}: {label}")
    lines.append(f"    {declaration.final.value} --> [*]")
    if counts is not None:
        visited = sorted(_visited(declaration, counts), key=list(Phase).index)
        lines.append("    classDef taken fill:#fed7aa,stroke:#c2410c,stroke-width:2px")
        if visited:
            lines.append(f"    class {','.join(p.value for p in visited)} taken")
    return "\n".join(lines) + "\n"


def _visited(declaration: Declaration, counts: Counts) -> set[Phase]:
    taken = [m for m in declaration.moves if counts.get((m.source, m.label), 0)]
    return {phase for move in taken for phase in (move.source, move.dest)}


def dot(
    declaration: Declaration = MACHINE, counts: Counts | None = None, *, rules: bool = False
) -> str:
    """Graphviz DOT text; with `counts`, taken moves are drawn bold and the rest grey."""
    visited = _visited(declaration, counts) if counts is not None else set()
    lines = [
        "digraph toolloop {",
        '    graph [rankdir=LR, nodesep=0.5, ranksep=0.9, fontname="Helvetica"];',
        '    node [shape=box, style="rounded,filled", fillcolor="#f3f4f6", '
        'fontname="Helvetica", fontsize=16];',
        # Sizes a page shows at the SVG's own scale (docs/diagrams.md scrolls it, never shrinks).
        '    edge [fontname="Helvetica", fontsize=13];',
        "    start [shape=point, width=0.15];",
        f"    start -> {declaration.initial.value};",
    ]
    for phase in declaration.phases:
        fill = ', fillcolor="#fed7aa"' if phase in visited else ""
        lines.append(f'    {phase.value} [label="{phase.name}"{fill}];')
    ports = _ports(declaration)
    lines.extend(
        _dot_edge(edge, counts, ports.get(edge[0], ""), rules) for edge in edges(declaration)
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _ports(declaration: Declaration) -> dict[DeclaredMove, str]:
    """Ports that keep the labels of self-loops clear of the other edges.

    A phase's self-loops sit on its north and south-west sides; its other moves
    leave east, and moves coming back to it from a later phase arrive south-east.
    """
    order = list(declaration.phases)
    ports: dict[DeclaredMove, str] = {}
    for phase in declaration.phases:
        loops = [e[0] for e in edges(declaration) if e[0].source is phase and e[0].dest is phase]
        if not loops:
            continue
        for move, side in zip(loops, itertools.cycle(("n", "sw")), strict=False):
            ports[move] = f", tailport={side}, headport={side}"
        for move in declaration.moves:
            if move.source is phase and move.dest is not phase:
                ports[move] = ", tailport=e"
            elif move.dest is phase and order.index(move.source) > order.index(phase):
                ports[move] = ", headport=se"
    return ports


def _dot_edge(edge: Edge, counts: Counts | None, ports: str, rules: bool) -> str:
    move = edge[0]
    title = f"<b>{move.label}{_count_suffix(move, counts)}</b>"
    alternatives = [names for names in guard_alternatives(edge) if names]
    # One guard a line; the moves of a label, when they need different guards, one a line.
    guards = list(alternatives[0]) if len(alternatives) == 1 else []
    if len(alternatives) > 1:
        guards = [f"{' and '.join(names)} or" for names in alternatives[:-1]]
        guards.append(" and ".join(alternatives[-1]))
    label = "<br/>".join([title, move.trigger, *guards, *([rules_text(edge)] if rules else [])])
    style = ""
    if counts is not None:
        taken = counts.get((move.source, move.label), 0) > 0
        color = TAKEN_COLOR if taken else UNTAKEN_COLOR
        style = f', color="{color}", fontcolor="{color}", penwidth={2.5 if taken else 1}'
    return f"    {move.source.value} -> {move.dest.value} [label=<{label}>{style}{ports}];"


def render(dot_text: str, fmt: str) -> bytes:
    """SVG or PNG of `dot_text`, through Graphviz's `dot`."""
    if shutil.which("dot") is None:
        raise GraphvizMissing(fmt)
    done = subprocess.run(["dot", f"-T{fmt}"], input=dot_text.encode(), capture_output=True)
    if done.returncode != 0:
        raise GraphvizFailed(f"dot -T{fmt} failed: {done.stderr.decode().strip()}")
    return done.stdout


def trace_counts(trace: Trace, declaration: Declaration = MACHINE) -> Counter[tuple[Phase, str]]:
    """How often the trace took each declared move; an undeclared move raises, naming the step."""
    counts: Counter[tuple[Phase, str]] = Counter()
    for index, record in enumerate(trace.steps):
        move = declaration.move(record.source, record.move)
        if move is None or move.dest is not record.dest:
            seen = f"{record.source.value} -{record.move}-> {record.dest.value}"
            raise UndeclaredMove(f"step {index}: {seen} is not a declared move")
        counts[(record.source, record.move)] += 1
    return counts


def diagram(fmt: str, trace_file: Path | None = None, *, rules: bool = False) -> bytes:
    """`toolloop diagram`: the machine in `fmt`, highlighted by the trace file when given.

    With `rules`, each edge also names the SPEC rules of its moves.
    """
    if fmt not in FORMATS:
        raise InvalidOption(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    counts = None
    if trace_file is not None:
        trace = load_bytes(trace_file.read_bytes())
        counts = trace_counts(trace)  # an undeclared move first: the more telling refusal
        replayed(trace)
    if fmt == "mermaid":
        return mermaid(counts=counts, rules=rules).encode()
    text = dot(counts=counts, rules=rules)
    return text.encode() if fmt == "dot" else render(text, fmt)
