"""Approval (SPEC 6c): what a person is asked about a tool call, and what they answered.

A request is bound to the exact arguments the model sent by their digest: a
decision carries the digest it was given for, so an answer meant for other
arguments (a stale prompt, a forged button) can be told apart and refused.
"""

from __future__ import annotations

import enum
import hashlib
import json

import attrs

from toolloop.states.calls import JsonObject


def args_digest(args: JsonObject | None) -> str:
    """The SHA-256 of the arguments as canonical JSON (sorted keys, no spaces); absent is {}.

    Canonical, so the same arguments give the same digest in every process: a
    request asked before a restart is still answerable after it.
    """
    text = json.dumps({} if args is None else args, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """One call waiting for a person's decision, as the host shows it."""

    tool: str
    call_id: str
    args: JsonObject | None
    """The call's arguments; the host sees them with secrets redacted (the interpreter
    redacts them before asking, as it does for the failed-tool notice)."""
    channel_id: str
    user_id: str
    """The user whose turn it is."""
    digest: str
    """`args_digest` of the exact (unredacted) arguments: a decision must name it."""


class Verdict(enum.Enum):
    """What a decision says."""

    #: Run the call.
    APPROVE = "approve"
    #: Do not run it (a reason may say why).
    DENY = "deny"


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """A person's answer to one request; `digest` is the request's, echoed back."""

    verdict: Verdict
    digest: str
    reason: str | None = None
    """The person's words for a denial, shown to the model."""
    by: str | None = None
    """Who decided, for the log."""


class ApprovalStatus(enum.Enum):
    """Where a call that needs approval stands (`BatchCall.approval`)."""

    #: Asked; no valid decision yet.
    WAITING = "waiting"
    #: A person approved it: it may be dispatched.
    APPROVED = "approved"
    #: A person denied it: it is never dispatched.
    DENIED = "denied"
    #: Nobody answered within `TOOL_APPROVAL_TIMEOUT_MS`: it is never dispatched.
    TIMED_OUT = "timed_out"
    #: The turn was killed while it waited: the request was withdrawn.
    WITHDRAWN = "withdrawn"
