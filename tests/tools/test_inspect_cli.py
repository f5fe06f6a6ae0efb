"""`toolloop inspect`: its demo runs and ends, and misuse is a one-line error with status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolloop.tools.cli import main

TOOLLOOP = Path(sys.executable).parent / "toolloop"


def test_the_demo_serves_the_page_and_ends_after_its_rounds() -> None:
    done = subprocess.run(
        [TOOLLOOP, "inspect", "--demo", "--port", "0", "--turns", "1", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("toolloop inspect: http://127.0.0.1:")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "attach it to your bot (docs/inspect.md), or see it now with --demo"),
        (["--demo", "--host", "0.0.0.0"], "binding 0.0.0.0 exposes the inspector"),
        (["--demo", "--turns", "0"], "--turns must be 1 or more, not 0"),
    ],
)
def test_misuse_is_refused_naming_what_is_wrong(
    arguments: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TOOLLOOP_INSPECT_TOKEN", raising=False)
    assert main(["inspect", *arguments]) == 2
    assert message in capsys.readouterr().err
