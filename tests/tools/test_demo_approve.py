"""`toolloop demo --approve` and the terminal's approval port (SPEC 6c)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from toolloop.states import ApprovalRequest, Verdict, args_digest
from toolloop.tools.console_approvals import ConsoleApprovals

TOOLLOOP = Path(sys.executable).with_name("toolloop")
REQUEST = ApprovalRequest(
    tool="refund",
    call_id="c1",
    args={"amount": 250},
    channel_id="ch",
    user_id="ana",
    digest=args_digest({"amount": 250}),
)


def test_the_demo_asks_on_the_terminal_runs_what_is_approved_and_tells_the_model_the_no() -> None:
    """A `y` runs the calculation; a reason typed for the clock denies it with those words."""
    environment = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [str(TOOLLOOP), "demo", "--approve"],
        input="y\nno, not the clock\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert 'approval needed: calculate {"expression": "17 * 23 + 4"}' in out
    assert '"value": 395' in out
    assert "A person declined this tool call: no, not the clock" in out
    assert "summary: 3 provider calls, 1 tool run" in out


@pytest.mark.parametrize(
    ("line", "verdict", "reason"),
    [
        ("y", Verdict.APPROVE, None),
        (" YES ", Verdict.APPROVE, None),
        ("", Verdict.DENY, None),
        ("n", Verdict.DENY, None),
        ("too much money", Verdict.DENY, "too much money"),
    ],
)
def test_a_typed_line_is_the_decision(line: str, verdict: Verdict, reason: str | None) -> None:
    """y/yes approves; empty, n or no denies without a reason; other words are the reason."""
    port = ConsoleApprovals(Console(file=open(os.devnull, "w")), read=lambda prompt: line)  # noqa: SIM115
    decision = anyio.run(port.ask, REQUEST)
    assert (decision.verdict, decision.reason, decision.digest) == (verdict, reason, REQUEST.digest)


def test_a_closed_stdin_is_a_denial() -> None:
    """End of input means nobody can answer: the call is denied, not left hanging."""

    def closed(prompt: str) -> str:
        raise EOFError

    port = ConsoleApprovals(Console(file=open(os.devnull, "w")), read=closed)  # noqa: SIM115
    assert anyio.run(port.ask, REQUEST).verdict is Verdict.DENY
