"""The registry's answer to "does this call wait for a person?" (SPEC 6c)."""

from __future__ import annotations

from typing import Any

import pytest

from toolloop.effects.registry import ToolCall, ToolRegistry, ToolSchemaError
from toolloop.engine import tool_call
from toolloop.states import FunctionCall, ToolContext, TurnSettings

CONTEXT = tool_call.tool_context(TurnSettings(), 0, False, ())
AMOUNT = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


async def refund(args: dict[str, Any], call: ToolCall) -> None:
    """Refund."""


def over_100(args: dict[str, Any], context: ToolContext) -> bool:
    return int(args["amount"]) > 100


def registry_with(**options: Any) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(refund, parameters=AMOUNT, **options)
    return registry


def asks(registry: ToolRegistry, name: str = "refund", args: Any = None) -> bool:
    return registry.needs_approval(FunctionCall(name=name, args=args), CONTEXT)


def test_a_tool_registered_with_requires_approval_true_waits_on_every_call() -> None:
    """Every valid call of the tool waits; a tool registered without it never does."""
    assert asks(registry_with(requires_approval=True), args={"amount": 1})
    assert not asks(registry_with(), args={"amount": 1})


def test_a_predicate_over_the_arguments_decides_per_call() -> None:
    """The rule sees the arguments (and the turn): only the calls it says wait."""
    registry = registry_with(requires_approval=over_100)
    assert asks(registry, args={"amount": 250})
    assert not asks(registry, args={"amount": 50})


def test_a_call_that_could_not_run_is_never_asked_about() -> None:
    """An unknown tool and arguments the schema refuses fail as usual, without a prompt."""
    registry = registry_with(requires_approval=True)
    assert not asks(registry, name="nope", args={"amount": 1})
    assert not asks(registry, args={"amount": "lots"})


def test_a_rule_that_raises_makes_the_call_wait() -> None:
    """A broken rule cannot let a call through unasked: asking is the safe answer."""

    def broken(args: dict[str, Any], context: ToolContext) -> bool:
        raise KeyError("boom")

    assert asks(registry_with(requires_approval=broken), args={"amount": 1})


def test_requires_approval_of_another_type_is_refused_naming_the_tool() -> None:
    """Neither a bool nor a callable: a `ToolSchemaError` naming the tool and the option."""
    with pytest.raises(ToolSchemaError, match=r'^tool "refund": requires_approval: .* got str$'):
        registry_with(requires_approval="yes")


def test_asks_approval_says_whether_any_registered_tool_may_wait() -> None:
    """False with no tool that needs approval; True once one (by flag or rule) is
    registered, and until the last such tool is unregistered."""
    registry = registry_with()
    assert not registry.asks_approval()

    async def wipe(args: dict[str, Any], call: ToolCall) -> None:
        """Wipe."""

    registry.register(wipe, requires_approval=True)
    registry.register(refund, name="big_refund", parameters=AMOUNT, requires_approval=over_100)
    assert registry.asks_approval()
    registry.unregister("wipe")
    assert registry.asks_approval()
    registry.unregister("big_refund")
    registry.unregister("refund")
    assert not registry.asks_approval()
