"""`replay --check` and `diagram --trace` over damaged trace files: a whole trace or an error.

Each damage is one a real file suffers: cut off by a crash or a full disk
(mid-line, at a line's end, after the start line), padded (the zeros a
filesystem leaves after a crash, blank lines), or a line written twice. Both
commands refuse each with one line naming the file and the line (or, for an
effect written twice, the step that no longer replays).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tools.test_cli_hostile_input import assert_one_line_error, run_cli

SCENARIO = Path(__file__).resolve().parent / "full_scenario.json"

Damage = Callable[[list[bytes]], list[bytes]]
"""The lines of a whole trace (each ending in a newline) -> the damaged file's lines."""


def kind_at(lines: list[bytes], kind: str) -> int:
    """The index of the first line of `kind`."""
    return next(
        n for n, line in enumerate(lines) if line.startswith(b'{"kind": "%s"' % kind.encode())
    )


DAMAGES: dict[str, tuple[Damage, str]] = {
    "cut mid-line": (
        lambda lines: [*lines[:5], lines[5][:40]],
        "line 6: not JSON",
    ),
    "cut before the end line": (
        lambda lines: lines[:-1],
        "line {before_end}: the trace ends after {steps} steps without its end line (cut off",
    ),
    "cut inside a step": (
        lambda lines: lines[:-2],
        "line {prior}: the trace ends inside a step: the event on line",
    ),
    "only the start line": (
        lambda lines: lines[:1],
        "line 1: the trace ends after its start line without its end line (cut off",
    ),
    "zeros where the end line was": (
        lambda lines: [*lines[:-1], b"\x00" * 4096],
        "line {last}: not JSON",
    ),
    "zeros after the end line": (
        lambda lines: [*lines, b"\x00" * 4096],
        "line {after}: a line after the end line",
    ),
    "padded with blank lines": (
        lambda lines: [*lines, b"\n", b"\n"],
        "line {after}: a line after the end line",
    ),
    "an event line twice": (
        lambda lines: [*lines[:2], lines[1], *lines[2:]],
        "line 3: an event line before the step line of the event on line 2 (a line written twice?)",
    ),
    "a step line twice": (
        lambda lines: [*lines[: kind_at(lines, "step") + 1], *lines[kind_at(lines, "step") :]],
        "line {second_step}: unexpected line of kind 'step' here",
    ),
    "the start line twice": (
        lambda lines: [lines[0], *lines],
        "line 2: unexpected line of kind 'start' here",
    ),
    "the end line twice": (
        lambda lines: [*lines, lines[-1]],
        "line {after}: a line after the end line (line {last})",
    ),
}


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The lines of a real trace: `toolloop simulate --trace` over the full scenario."""
    trace = tmp_path_factory.mktemp("whole") / "t.jsonl"
    assert run_cli_quiet(["simulate", str(SCENARIO), "--trace", str(trace)]) == 0
    return trace.read_bytes().splitlines(keepends=True)


def run_cli_quiet(argv: list[str]) -> int:
    from toolloop.tools.cli import main

    return main(argv)


def damaged(tmp_path: Path, whole: list[bytes], name: str) -> tuple[Path, str]:
    damage, message = DAMAGES[name]
    trace = tmp_path / "damaged.jsonl"
    trace.write_bytes(b"".join(damage(whole)))
    second_step = kind_at(whole, "step") + 2
    steps = sum(line.startswith(b'{"kind": "step"') for line in whole)
    lines = {"last": len(whole), "after": len(whole) + 1, "before_end": len(whole) - 1}
    return trace, message.format(
        second_step=second_step, steps=steps, prior=len(whole) - 2, **lines
    )


def test_the_whole_trace_replays_and_draws(
    tmp_path: Path, whole: list[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """The undamaged file passes both commands: the damages below are all that fails."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"".join(whole))
    assert run_cli(["replay", "--check", str(trace)], capsys)[0] == 0
    assert run_cli(["diagram", "--trace", str(trace)], capsys)[0] == 0


@pytest.mark.parametrize("name", DAMAGES)
@pytest.mark.parametrize("command", [["replay", "--check"], ["diagram", "--trace"]])
def test_a_damaged_trace_is_one_error_naming_the_line(
    tmp_path: Path,
    whole: list[bytes],
    capsys: pytest.CaptureFixture[str],
    name: str,
    command: list[str],
) -> None:
    """Cut off, padded or doubled: exit 2, one line naming the file, the line and why."""
    trace, message = damaged(tmp_path, whole, name)
    status, out, err = run_cli([*command, str(trace)], capsys)
    assert (status, out) == (2, "")
    assert_one_line_error(err, f"toolloop {command[0]}: {trace}: {message}")


def test_an_effect_line_twice_does_not_replay(
    tmp_path: Path, whole: list[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """A doubled effect reads as a well-formed step, so replay names the step it breaks."""
    effect = kind_at(whole, "effect")
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"".join([*whole[: effect + 1], *whole[effect:]]))
    status, _, err = run_cli(["replay", "--check", str(trace)], capsys)
    assert status == 1
    assert err.startswith(f"{trace}: step 0 (TurnStarted): effects differ\n"), err
    status, _, err = run_cli(["diagram", "--trace", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(
        err, f"toolloop diagram: {trace}: does not replay: step 0 (TurnStarted): effects differ"
    )


def test_a_trace_of_the_first_format_is_refused_with_its_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A format-1 file (no version, no end line) says which format it is and what to do."""
    trace = tmp_path / "old.jsonl"
    trace.write_text('{"kind": "start", "config": {}, "turn": {}}\n', "utf-8")
    for command in (["replay", "--check"], ["diagram", "--trace"]):
        status, _, err = run_cli([*command, str(trace)], capsys)
        assert status == 2
        assert_one_line_error(
            err,
            f"toolloop {command[0]}: {trace}: line 1: a trace written by an older toolloop "
            "(format 1); this toolloop reads format 3 only: record the turn again",
        )


def test_a_full_disk_is_one_error_and_no_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate --trace /dev/full`: the writes fail with ENOSPC, reported in one line."""
    status, out, err = run_cli(["simulate", str(SCENARIO), "--trace", "/dev/full"], capsys)
    assert (status, out) == (2, "")
    assert_one_line_error(
        err, "toolloop simulate: /dev/full: cannot write the trace: No space left on device"
    )


@pytest.mark.parametrize("problem", ["No such file or directory", "Is a directory"])
def test_a_trace_that_cannot_be_read_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str
) -> None:
    """A missing file or a folder: exit 2, one line with the system's reason."""
    trace = tmp_path / "missing.jsonl" if problem.startswith("No") else tmp_path
    status, _, err = run_cli(["replay", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop replay: {trace}: cannot read the trace: {problem}\n")
