"""The terminal's approval port (SPEC 6c): `toolloop demo --approve` asks on stdin.

Each request is printed (tool, redacted arguments, whose turn), then one line is
read: `y` or `yes` approves, anything else denies, and the words typed (other
than `n`/`no`) are the reason the model reads. The line is read in a worker
thread, so the loop's timeout and kill still end the wait; a withdrawn request
is said so.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
from rich.console import Console

from toolloop.states import ApprovalDecision, ApprovalRequest, Verdict

YES = frozenset({"y", "yes"})
NO = frozenset({"", "n", "no"})


class ConsoleApprovals:
    """Asks a person at the terminal; `read` is `input` unless a test gives its own."""

    def __init__(self, console: Console, read: Callable[[str], str] = input) -> None:
        self.console, self.read = console, read

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        args = json.dumps(request.args, ensure_ascii=False)
        self.console.print(
            f"approval needed: {request.tool} {args} (call {request.call_id}, "
            f"turn of {request.user_id})",
            markup=False,
        )
        try:
            line = await anyio.to_thread.run_sync(
                self.read, "approve? [y/N, or a reason to deny] ", abandon_on_cancel=True
            )
        except EOFError:  # stdin closed: nobody can answer, so it is a no
            line = ""
        answer = line.strip()
        if answer.lower() in YES:
            return ApprovalDecision(verdict=Verdict.APPROVE, digest=request.digest, by="console")
        reason = None if answer.lower() in NO else answer
        return ApprovalDecision(
            verdict=Verdict.DENY, digest=request.digest, reason=reason, by="console"
        )

    async def withdraw(self, request: ApprovalRequest) -> None:
        self.console.print(
            f"approval withdrawn: {request.tool} (the turn was stopped)", markup=False
        )
