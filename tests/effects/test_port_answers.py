"""The registry's answers that the interpreter and the Temporal activities share (effects/ports).

`exclusive_flags`, `shown_request` and `withdraw` have one owner, so a batch's
exclusive calls, an approval prompt's redaction and its withdrawal are the same
whichever of the two runs the turn.
"""

from __future__ import annotations

import logging

import pytest

from toolloop.effects.ports import exclusive_flags, shown_request, withdraw
from toolloop.effects.registry import REDACTED, ToolCall, ToolRegistry
from toolloop.states import (
    ApprovalDecision,
    ApprovalRequest,
    FunctionCall,
    JsonObject,
    args_digest,
)

OBJECT: JsonObject = {"type": "object"}
CARD: JsonObject = {
    "type": "object",
    "properties": {"cents": {"type": "integer"}, "pin": {"type": "string", "writeOnly": True}},
}


async def noop(args: JsonObject, call: ToolCall) -> JsonObject:
    return {}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(noop, name="lookup", parameters=OBJECT)
    tools.register(noop, name="memory", parameters=OBJECT, exclusive=True)
    tools.register(noop, name="charge", parameters=CARD, requires_approval=True)
    return tools


def call(name: str) -> FunctionCall:
    return FunctionCall(name=name, args={}, call_id=f"id-{name}")


def test_exclusive_flags_name_each_call_of_a_batch_in_order() -> None:
    """A batch of calls gets one flag per call, by its tool's (stripped) name: unknown is no."""
    calls = [call("lookup"), call(" memory "), call("nowhere")]
    assert exclusive_flags(registry(), calls) == (False, True, False)


def test_exclusive_flags_are_empty_for_a_single_call() -> None:
    """A lone call runs alone anyway: no flags, even for an exclusive tool."""
    assert exclusive_flags(registry(), [call("memory")]) == ()
    assert exclusive_flags(registry(), []) == ()


ARGS: JsonObject = {"cents": 500, "pin": "1234"}
REQUEST = ApprovalRequest(
    tool="charge", call_id="c1", args=ARGS, channel_id="ch", user_id="u", digest=args_digest(ARGS)
)


def test_the_shown_request_redacts_the_secrets_and_keeps_the_digest() -> None:
    """The prompt shows `pin` redacted; the digest still names the exact arguments."""
    request, args = REQUEST, ARGS
    shown = shown_request(registry(), request)
    assert shown.args == {"cents": 500, "pin": REDACTED}
    assert shown.digest == request.digest == args_digest(args)
    assert (shown.tool, shown.call_id) == ("charge", "c1")


class Host:
    """An approvals port that records what it is told to withdraw, or fails to hear it."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.withdrawn: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        raise AssertionError("not asked here")

    async def withdraw(self, request: ApprovalRequest) -> None:
        if self.fails:
            raise ConnectionError("the chat is gone")
        self.withdrawn.append(request)


@pytest.mark.anyio
async def test_withdraw_tells_the_host_the_request_as_it_was_shown() -> None:
    """The host retires the prompt it showed: the request with its secrets redacted."""
    host = Host()
    await withdraw(host, registry(), REQUEST)
    assert host.withdrawn == [shown_request(registry(), REQUEST)]
    assert host.withdrawn[0].args == {"cents": 500, "pin": REDACTED}


@pytest.mark.anyio
async def test_a_host_that_fails_to_hear_a_withdrawal_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing host does not end the turn: the failure is logged, naming the tool."""
    with caplog.at_level(logging.ERROR, logger="toolloop"):
        await withdraw(Host(fails=True), registry(), REQUEST)
    [record] = caplog.records
    assert record.getMessage() == "withdrawing the approval request of charge failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], ConnectionError)


@pytest.mark.anyio
async def test_withdraw_without_an_approvals_port_does_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A host with no approvals port showed no prompt: nothing to retire, nothing raised,
    nothing logged (a withdrawal tried on no port would be logged as a failure)."""
    with caplog.at_level(logging.DEBUG, logger="toolloop"):
        await withdraw(None, registry(), REQUEST)
    assert caplog.records == []
