"""Model-based tests: the shortest path to each declared move, run as a scenario."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.specs.conformance import never_taken, row_taken, violations
from tests.specs.scenario_driver import run_scenario
from toolloop.engine.table import STREAMING
from toolloop.engine.trace import load_bytes
from toolloop.specs.machine import MACHINE, DeclaredMove
from toolloop.specs.paths import (
    WITNESSES,
    ConflictingWitnesses,
    ModelPath,
    NoWitness,
    Witness,
    model_paths,
    print_paths,
    scenario_for,
)

PATHS = model_paths()
IDS = [p.target.name for p in PATHS]
SIMULATE_MISSING = importlib.util.find_spec("toolloop.tools.simulate") is None


def labels(path: ModelPath) -> list[str]:
    return [move.label for move in path.moves]


def test_there_is_one_path_per_declared_move() -> None:
    """Every declared move is the target of exactly one model path."""
    assert [p.target for p in PATHS] == list(MACHINE.moves)


def test_the_witnesses_are_keyed_by_the_names_of_the_rows() -> None:
    """One witness per row, under the row's name: reordering rows cannot re-pair them."""
    assert sorted(WITNESSES) == sorted(move.name for move in MACHINE.moves)


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_a_path_runs_from_the_start_through_its_move_to_the_end(path: ModelPath) -> None:
    """Each path starts in IDLE, chains phase to phase, contains its target and ends FINISHED."""
    moves = path.moves
    assert moves[0].source is MACHINE.initial
    assert moves[-1].dest is MACHINE.final
    assert all(a.dest is b.source for a, b in itertools.pairwise(moves))
    assert path.target in moves


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_the_pure_core_takes_the_path_the_model_predicts(path: ModelPath) -> None:
    """The scenario of a path, run through `step`, makes exactly the predicted conforming moves."""
    steps = run_scenario(path.scenario)
    assert [move for _, _, move, _ in steps] == labels(path)
    assert violations(steps) == []


def test_the_model_paths_take_every_declared_row() -> None:
    """Coverage: the targeted scenarios together take every declared move, each by every
    row that reports it (a witness is keyed by its row: `stream_failed:silent` too)."""
    scenarios = [run_scenario(p.scenario) for p in PATHS]
    taken = {row_taken(before, event) for steps in scenarios for before, event, _, _ in steps}
    assert never_taken(taken) == []


@pytest.mark.skipif(SIMULATE_MISSING, reason="toolloop.tools.simulate is not importable yet")
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_simulate_takes_the_path_the_model_predicts(path: ModelPath, tmp_path: Path) -> None:
    """`toolloop simulate --trace` on a path's scenario records exactly the predicted moves."""
    scenario, trace = tmp_path / "scenario.json", tmp_path / "trace.jsonl"
    scenario.write_text(json.dumps(path.scenario))
    command = [sys.executable, "-m", "toolloop.tools.cli", "simulate", str(scenario)]
    done = subprocess.run([*command, "--trace", str(trace)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    recorded = load_bytes(trace.read_bytes())
    assert [step.move for step in recorded.steps] == labels(path)


def test_a_move_without_a_witness_is_named() -> None:
    """Building a scenario through a move nobody scripted raises `NoWitness` naming it."""
    stray = DeclaredMove(
        name="teleported",
        label="teleported",
        trigger="StreamEnded",
        source=STREAMING,
        dest=STREAMING,
    )
    with pytest.raises(NoWitness, match=r"^move 'teleported' from streaming: no witness"):
        scenario_for([stray])


def test_moves_needing_different_settings_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two witnesses that set one variable differently raise, naming the second move."""
    ceiling = MACHINE.move(STREAMING, "ceiling_reached")
    assert ceiling is not None
    later = DeclaredMove(
        name="second_ceiling",
        label="second_ceiling",
        trigger="StreamEnded",
        source=STREAMING,
        dest=STREAMING,
    )
    needs = Witness(env={"BOT_MAX_FUNCTION_CALL_ITERATIONS": "2"})
    monkeypatch.setitem(WITNESSES, "second_ceiling", needs)
    with pytest.raises(ConflictingWitnesses) as raised:
        scenario_for([ceiling, later])
    assert str(raised.value) == (
        "move 'second_ceiling' from streaming: needs BOT_MAX_FUNCTION_CALL_ITERATIONS='2', "
        "the path already has '1'"
    )


def test_specs_paths_prints_every_path_and_writes_one_scenario_file_each(tmp_path: Path) -> None:
    """The command's output is a JSON list of paths; each scenario file is the path's scenario."""
    printed = json.loads(print_paths(tmp_path))
    assert [(p["source"], p["move"]) for p in printed] == [
        (m.source.value, m.label) for m in MACHINE.moves
    ]
    first = printed[1]
    assert first["path"][-1] == {"move": "completed", "source": "streaming", "dest": "finished"}
    written = json.loads((tmp_path / "streaming-completed.json").read_text())
    assert written == first["scenario"]
