"""`ToolRegistry.unregister`: the hook of a tool source (toolloop.mcp) for a tool it dropped."""

from __future__ import annotations

import pytest

from toolloop.effects.registry import ToolCall, ToolRegistry
from toolloop.states import JsonObject, ProviderDescriptor

PROVIDER = ProviderDescriptor(name="local")


async def search(args: JsonObject, call: ToolCall) -> None:
    """Search."""


class TestUnregister:
    def test_the_tool_leaves_the_specs_even_when_they_were_kept(self) -> None:
        """`specs` keeps its answer per descriptor: unregistering drops that answer too."""
        registry = ToolRegistry()
        registry.register(search)
        registry.register(search, name="fetch")
        assert [spec.name for spec in registry.specs(PROVIDER)] == ["search", "fetch"]
        registry.unregister("search")
        assert [spec.name for spec in registry.specs(PROVIDER)] == ["fetch"]
        assert not registry.requires_follow_up("search", PROVIDER, None)

    def test_the_name_can_be_registered_again(self) -> None:
        registry = ToolRegistry()
        registry.register(search)
        registry.unregister("search")
        registry.register(search, description="Search again.")
        assert registry.specs(PROVIDER)[0].description == "Search again."

    def test_an_unknown_name_is_a_key_error_naming_it(self) -> None:
        with pytest.raises(KeyError, match=r'^\'tool "nothing" is not registered\'$'):
            ToolRegistry().unregister("nothing")
