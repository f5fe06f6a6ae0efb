"""What a tool returns and what the model is shown of it."""

from __future__ import annotations

from typing import Any

import attrs

from toolloop.states.calls import FunctionCall, JsonObject
from toolloop.states.turn import ContextItem, ProviderDescriptor


@attrs.frozen(kw_only=True)
class ToolResult:
    """The outcome of one tool call, as the registry reports it."""

    success: bool
    data: Any = None
    """The tool's payload; an empty object is data."""
    error: str | None = None
    message: str | None = None
    """A message for the model, preferred over `error` in the failure response."""
    end_turn: bool = False
    """The tool asks the loop to finish `completed` now."""
    response_delivered: bool = False
    """The tool itself already delivered the reply to the channel."""
    image_metadata: JsonObject | None = None


@attrs.frozen(kw_only=True)
class ToolHistoryEntry:
    """One accepted call and its response, passed to every later provider call.

    Slotted, unlike the per-step values: a turn holds every entry to its end.
    """

    function_call: FunctionCall
    function_response: JsonObject
    """`{"name": NAME, "response": {"result": ...}}`."""
    image_metadata: JsonObject | None = None
    pre_tool_call_text_parts: tuple[JsonObject, ...] | None = None
    """`({"type": "text", "text": ...},)`: what the model already said before the call."""
    same_turn: bool = False
    """The model made this call in the same reply as the previous entry's (a batch, SPEC
    6b): a provider sends both in one assistant turn, then a response to each."""

    @property
    def response(self) -> Any:
        """The response object the model reads."""
        return self.function_response["response"]["result"]


@attrs.frozen(kw_only=True, slots=False)
class ToolContext:
    """What a tool is told about its turn (SPEC 6, step 3)."""

    channel_id: str
    user_id: str
    guild_id: str | None
    locale: str
    provider: ProviderDescriptor
    """The provider streaming this turn: its API family decides the provider gate."""
    persona_name: str
    user_impersonation: bool
    iteration: int
    suppress_progress_notices: bool
    """The turn does not surface user errors: tools stay quiet too."""
    show_kill_hint: bool
    """The chain is long (iteration >= 20): progress notices mention `/kill`."""
    unavailable_for_turn: frozenset[str] = frozenset()
    """Tools the registry must refuse as not available for the current turn."""
    context_items: tuple[ContextItem, ...] = ()
    """The attempt's context as it is now, enrichment from restarts included."""

    @property
    def provider_name(self) -> str:
        """The streaming provider's name, as error messages show it."""
        return self.provider.name


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as the model sees it: OpenAI-style name, description and JSON schema."""

    name: str
    description: str = ""
    parameters: JsonObject = attrs.field(factory=lambda: {"type": "object", "properties": {}})
