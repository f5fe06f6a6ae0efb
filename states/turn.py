"""The turn's settings: who speaks, through which provider, under which rules."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from toolloop.states.calls import JsonObject


class ApiFamily(enum.Enum):
    """The provider's API family; policies key on it, never on provider names."""

    CUSTOM = "custom"
    OPENAI = "openai"
    OPENROUTER = "openrouter"
    GOOGLE = "google"
    NOVELAI = "novelai"


@attrs.frozen(kw_only=True)
class ProviderDescriptor:
    """Which provider a generation attempt uses."""

    name: str = "custom"
    api_family: ApiFamily = ApiFamily.CUSTOM
    server: str | None = None
    """The MCP or tool server, for the registry's follow-up question."""
    endpoint: str | None = None
    """Where the provider is reached (a URL without credentials), for logs and error reports."""
    accepts_images: bool = False
    """The model reads images sent with a user's message (`ContextItem.images`); a host names
    them to a provider that does not, rather than sending what it cannot read."""


@attrs.frozen(kw_only=True)
class Persona:
    """The identity the turn speaks as."""

    name: str = "Tomo"
    id: int = 1
    lineage_id: int = 1
    is_alter: bool = False


@attrs.frozen(kw_only=True)
class Sticker:
    """A guild sticker that `select_sticker_for_response` can resolve."""

    id: str
    name: str
    sendable: bool = True


@attrs.frozen(kw_only=True)
class Trigger:
    """Why deliberate mode exposed a tool this turn."""

    trigger: str
    source: str


@attrs.frozen(kw_only=True)
class DeliberateMode:
    """Deliberate tool mode: only the listed tools are exposed this turn."""

    active: bool = False
    allowed: tuple[str, ...] = ()
    """The complete list of exposed tools; a trigger does not add to it."""
    triggers: dict[str, Trigger] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ContextItem:
    """One entry of the model's context: a message or an enrichment item."""

    kind: str = "message"
    """`message` for a chat message; anything else is an enrichment item."""
    content: Any = None
    author: str | None = None
    timestamp: str | None = None
    message_ids: tuple[str, ...] = ()
    """The original messages merged into this one (one reference line each)."""
    reply_to: str | None = None
    metadata: JsonObject | None = None
    """Author and time references, set when the model revealed message metadata."""
    images: tuple[str, ...] = ()
    """URLs of images sent with a user's message, for a provider that accepts images."""


@attrs.frozen(kw_only=True)
class TurnSettings:
    """Everything the loop knows about its turn before it starts."""

    provider: ProviderDescriptor = attrs.field(factory=ProviderDescriptor)
    surface_user_errors: bool = True
    """Gates still-working, max-iterations and tool-error-loop notices and tool progress."""
    suppress_user_errors: bool = False
    """Gates the stream inactivity notice."""
    user_impersonation: bool = False
    impersonated_username: str | None = None
    impersonated_avatar_url: str | None = None
    direct_message: bool = False
    locale: str = "en"
    persona: Persona = attrs.field(factory=Persona)
    deliberate_mode: DeliberateMode = attrs.field(factory=DeliberateMode)
    stop_context_queued: bool = False
    """A stop message is waiting to be answered."""
    guild_stickers: tuple[Sticker, ...] = ()
    channel_id: str = "channel"
    user_id: str = "user"
    guild_id: str | None = None
    context: tuple[ContextItem, ...] = ()
    """The base context of the attempt."""
