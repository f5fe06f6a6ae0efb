"""The real CLI on hostile files: one clear line on stderr naming the file, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolloop.states.json_policy import MAX_JSON_DEPTH
from toolloop.tools.cli import main


def nested(depth: int, leaf: Any = "x") -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def one_call(args: Any) -> str:
    """A scenario whose first stream calls `echo` with `args`."""
    return json.dumps(
        {
            "tools": [{"name": "echo"}],
            "streams": [
                {"text": "", "call": {"name": "echo", "args": args}},
                {"status": "completed", "text": "ok"},
            ],
        }
    )


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(err: str, prefix: str) -> None:
    """The whole of stderr is one line starting with `prefix`."""
    assert err.startswith(prefix), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"streams": [{"text": "a\\ud800b"}]}', "$.streams[0].text"),
        (one_call({"q": "\udfff"}), "$.streams[0].call.args.q"),
        ('{"streams": [{"text": ""}], "env": {"\\ud800": "1"}}', "$.env has a key"),
    ],
)
def test_simulate_lone_surrogate_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, path: str
) -> None:
    """A lone surrogate escape in text, arguments or a key: exit 2 naming the file and path."""
    scenario = tmp_path / "s.json"
    scenario.write_text(text, "utf-8")
    status, out, err = run_cli(["simulate", str(scenario)], capsys)
    assert (status, out) == (2, "")
    assert_one_line_error(err, f"toolloop simulate: {scenario}: expected JSON within")
    assert path in err and "lone surrogate" in err


def test_simulate_deep_scenario_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario nested 100,000 deep: exit 2 saying how deep is allowed, no RecursionError."""
    scenario = tmp_path / "deep.json"
    scenario.write_text('{"streams": ' + "[" * 100_000 + "]" * 100_000 + "}", "utf-8")
    status, _, err = run_cli(["simulate", str(scenario)], capsys)
    assert status == 2
    assert_one_line_error(
        err,
        f"toolloop simulate: {scenario}: expected JSON within toolloop's bounds, "
        f"got nests deeper than {MAX_JSON_DEPTH} levels",
    )


def test_simulate_deep_arguments_within_the_bound_print_trace_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arguments nested 80 deep run, print, trace and replay: the bound leaves room for output."""
    scenario, trace = tmp_path / "s.json", tmp_path / "t.jsonl"
    scenario.write_text(one_call({"q": nested(80)}), "utf-8")
    status, out, err = run_cli(["simulate", str(scenario), "--trace", str(trace)], capsys)
    assert (status, err) == (0, "")
    assert json.loads(out)["function_history"][0]["args"] == {"q": nested(80)}
    status, out, err = run_cli(["replay", "--check", str(trace)], capsys)
    assert (status, err) == (0, ""), err
    assert out.endswith("steps replayed, same effects\n")


def test_simulate_arguments_past_the_bound_are_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arguments nested past the bound are refused when the scenario is read."""
    scenario = tmp_path / "s.json"
    scenario.write_text(one_call({"q": nested(MAX_JSON_DEPTH)}), "utf-8")
    status, _, err = run_cli(["simulate", str(scenario)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop simulate: {scenario}: expected JSON within")


def test_simulate_unwritable_trace_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace path in a missing folder: exit 2 naming the trace file."""
    scenario, trace = tmp_path / "s.json", tmp_path / "missing" / "t.jsonl"
    scenario.write_text('{"streams": [{"status": "completed", "text": "ok"}]}', "utf-8")
    status, _, err = run_cli(["simulate", str(scenario), "--trace", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop simulate: {trace}: cannot write the trace: ")


def test_replay_binary_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A binary (non-UTF-8) trace: exit 2 naming the file, the line and the first bad byte."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b'{"kind": "start"}\n\xff\xfe\x00garbage')
    status, _, err = run_cli(["replay", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop replay: {trace}: line 2: not UTF-8 text (byte 18: ")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[" * 50_000 + "]" * 50_000, f"line 1: nests deeper than {MAX_JSON_DEPTH} levels"),
        ('{"kind": "start", "x": "\\udc00"}', "line 1: $.x is a string with a lone surrogate"),
        ('{"kind": "start", "x": NaN}', "line 1: is not valid JSON: NaN (not a JSON number)"),
    ],
)
def test_replay_hostile_line_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, problem: str
) -> None:
    """A deep, non-Unicode or non-JSON trace line: exit 2 naming the file and the line."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(line + "\n", "utf-8")
    status, _, err = run_cli(["replay", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop replay: {trace}: {problem}")


def test_diagram_binary_trace_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diagram --trace` with a binary file: exit 2 naming it."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"\xff\xfe")
    status, _, err = run_cli(["diagram", "--trace", str(trace)], capsys)
    assert status == 2
    assert_one_line_error(err, f"toolloop diagram: {trace}: ")


def test_installed_command_prints_no_traceback_for_a_binary_trace(tmp_path: Path) -> None:
    """The real process: stderr is the one error line and the status is 2."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"\x80\x81\x82")
    done = subprocess.run(
        [sys.executable, "-m", "toolloop.tools.cli", "replay", str(trace)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    expected = f"toolloop replay: {trace}: line 1: not UTF-8 text (byte 0: "
    assert_one_line_error(done.stderr, expected)
