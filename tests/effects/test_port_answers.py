"""The registry's answers that the interpreter and the Temporal activities share (effects/ports).

`exclusive_flags` and `shown_request` have one owner, so a batch's exclusive calls
and an approval prompt's redaction are the same whichever of the two runs the turn.
"""

from __future__ import annotations

from toolloop.effects.ports import exclusive_flags, shown_request
from toolloop.effects.registry import REDACTED, ToolCall, ToolRegistry
from toolloop.states import ApprovalRequest, FunctionCall, JsonObject, args_digest

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


def test_the_shown_request_redacts_the_secrets_and_keeps_the_digest() -> None:
    """The prompt shows `pin` redacted; the digest still names the exact arguments."""
    args: JsonObject = {"cents": 500, "pin": "1234"}
    request = ApprovalRequest(
        tool="charge",
        call_id="c1",
        args=args,
        channel_id="ch",
        user_id="u",
        digest=args_digest(args),
    )
    shown = shown_request(registry(), request)
    assert shown.args == {"cents": 500, "pin": REDACTED}
    assert shown.digest == request.digest == args_digest(args)
    assert (shown.tool, shown.call_id) == ("charge", "c1")
