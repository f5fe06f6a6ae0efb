"""An approval port kept in memory (SPEC 6c): requests wait until the host decides.

A bot whose prompt lives in its own process (a terminal, a test, a web page
served by the bot) can use it as it is: the loop's `ask` waits on the request,
and whatever shows it calls `approve` or `deny` with the call's id.
"""

from __future__ import annotations

import anyio

from toolloop.states import ApprovalDecision, ApprovalRequest, Verdict
from toolloop.states.errors import ToolloopError


class NoSuchRequest(ToolloopError, LookupError):
    """A decision named a call that no request waits for (decided, expired or never asked)."""


class MemoryApprovals:
    """The requests of one turn's calls that wait for a person, by call id."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[ApprovalRequest, anyio.Event, list[ApprovalDecision]]] = {}
        self._asked = anyio.Event()
        self.asked: list[ApprovalRequest] = []
        """Every request, in the order asked (a call asked again appears again)."""
        self.withdrawn: list[ApprovalRequest] = []
        """The requests withdrawn because the turn was killed while they waited."""

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """Wait until `approve`, `deny` or `decide` answers the request."""
        answered = anyio.Event()
        decisions: list[ApprovalDecision] = []
        self._waiting[request.call_id] = (request, answered, decisions)
        self.asked.append(request)
        self._asked.set()
        try:
            await answered.wait()
            return decisions[0]
        finally:
            self._waiting.pop(request.call_id, None)

    async def withdraw(self, request: ApprovalRequest) -> None:
        self.withdrawn.append(request)

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The requests waiting for a decision now, in the order asked."""
        return tuple(request for request, _, _ in self._waiting.values())

    async def next_request(self) -> ApprovalRequest:
        """The oldest waiting request, once there is one."""
        while not self._waiting:
            self._asked = anyio.Event()
            await self._asked.wait()
        return self.pending()[0]

    def approve(self, call_id: str, *, by: str | None = None) -> None:
        """Approve the waiting call, for the arguments it was asked about."""
        digest = self._request(call_id).digest
        self.decide(call_id, ApprovalDecision(verdict=Verdict.APPROVE, digest=digest, by=by))

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> None:
        """Deny the waiting call; `reason` is shown to the model."""
        digest = self._request(call_id).digest
        decision = ApprovalDecision(verdict=Verdict.DENY, digest=digest, reason=reason, by=by)
        self.decide(call_id, decision)

    def decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer the waiting call with `decision` as given (its digest is checked by the loop)."""
        self._request(call_id)
        _, answered, decisions = self._waiting.pop(call_id)
        decisions.append(decision)
        answered.set()

    def _request(self, call_id: str) -> ApprovalRequest:
        waiting = self._waiting.get(call_id)
        if waiting is None:
            open_ids = ", ".join(self._waiting) or "none"
            raise NoSuchRequest(
                f"no approval request waits for call {call_id!r} (waiting: {open_ids})"
            )
        return waiting[0]
