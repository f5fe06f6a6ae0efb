"""Secrets a tool's schema marks `writeOnly` never reach simulate's output or a trace file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent / "secret_scenario.json"


def test_trace_hides_secrets_and_still_replays(tmp_path: Path) -> None:
    """`simulate --trace` writes no password; `replay --check` finds the same effects."""
    trace = tmp_path / "trace.jsonl"
    cli = [sys.executable, "-m", "toolloop.tools.cli"]
    subprocess.run(
        [*cli, "simulate", str(SCENARIO), "--trace", str(trace)], check=True, capture_output=True
    )
    text = trace.read_text()
    assert "hunter2" not in text
    assert '"password": "[redacted]"' in text
    replayed = subprocess.run(
        [*cli, "replay", "--check", str(trace)], capture_output=True, text=True
    )
    assert replayed.returncode == 0, replayed.stderr


def test_simulate_document_hides_secrets_everywhere() -> None:
    """The printed document (history, dispatched calls, effects, notices) has no password."""
    cli = [sys.executable, "-m", "toolloop.tools.cli"]
    done = subprocess.run(
        [*cli, "simulate", str(SCENARIO)], check=True, capture_output=True, text=True
    )
    document = json.loads(done.stdout)
    assert "hunter2" not in done.stdout
    assert document["function_history"][0]["args"] == {"user": "kit", "password": "[redacted]"}
