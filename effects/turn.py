"""The generation turn (SPEC section 10): the tool loop once per attempt of a fallback chain.

Every attempt starts from the same base context. The verbatim nudge is decided
per attempt by the same predicate that turns the adapter's verbatim parser on,
so the instruction to write calls as text and the parser that reads them always
agree: a custom fallback behind a native primary gets both, a native fallback
behind a custom primary gets neither.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from toolloop.effects.config_loading import environment_config
from toolloop.effects.interpreter import Observer, run_tool_loop
from toolloop.effects.notices import NoticeCatalog
from toolloop.effects.observe import HostObserver
from toolloop.effects.ports import ApprovalPort, Channel, Provider, ToolRegistryPort, TurnControl
from toolloop.effects.registry.stash import ContextStash
from toolloop.states import (
    ApiFamily,
    ContextItem,
    GenerationTurnResult,
    LoopConfig,
    TurnSettings,
    TurnStatus,
)
from toolloop.states.errors import BrokenInvariant, InvalidOption, ToolloopError

NUDGE_KIND = "verbatim_nudge"
NUDGE = (
    "To use a tool, write the call as one inline code span and nothing else on that line: "
    '`tool_name({"arg": "value"})` with a JSON object of arguments, '
    '`tool_name("value")` for a tool with exactly one required string argument, '
    "or `tool_name()` for a tool without required arguments."
)
HANDS_OVER = frozenset({TurnStatus.ERROR, TurnStatus.TIMEOUT})


@attrs.frozen(kw_only=True)
class Attempt:
    """One model of the fallback chain: its provider and its configuration."""

    provider: Provider
    """The model's adapter; its descriptor becomes the attempt's `TurnSettings.provider`."""
    config: LoopConfig | None = None
    """The limits this attempt's loop runs with; None: the environment's (`load_config`)."""
    verbatim_enabled: bool = False
    """The server enabled verbatim tool calling for this endpoint."""


class RetryableError(ToolloopError):
    """An exception after which the next attempt of the chain may still succeed."""


def wants_verbatim(attempt: Attempt, registry: ToolRegistryPort) -> bool:
    """Nudge and parser both apply: enabled, the model has tools, the provider is custom."""
    descriptor = attempt.provider.descriptor
    has_tools = bool(registry.specs(descriptor))
    return attempt.verbatim_enabled and has_tools and descriptor.api_family is ApiFamily.CUSTOM


def attempt_context(base: tuple[ContextItem, ...], verbatim: bool) -> tuple[ContextItem, ...]:
    """The base context with the nudge added for a verbatim attempt and removed otherwise."""
    kept = tuple(item for item in base if item.kind != NUDGE_KIND)
    return (*kept, ContextItem(kind=NUDGE_KIND, content=NUDGE)) if verbatim else kept


def prepared(
    turn: TurnSettings, attempt: Attempt, registry: ToolRegistryPort
) -> tuple[TurnSettings, LoopConfig, bool]:
    """An attempt's turn (its provider, the nudge decided), its configuration (the
    environment's when it has none) and whether the verbatim parser reads its stream."""
    verbatim = wants_verbatim(attempt, registry)
    attempt_turn = attrs.evolve(
        turn,
        provider=attempt.provider.descriptor,
        context=attempt_context(turn.context, verbatim),
    )
    return attempt_turn, attempt.config or environment_config(), verbatim


async def run_generation_turn(
    *,
    turn: TurnSettings,
    attempts: Sequence[Attempt],
    registry: ToolRegistryPort,
    channel: Channel,
    control: TurnControl,
    catalog: NoticeCatalog | None = None,
    stash: ContextStash | None = None,
    reply_to: str | None = None,
    observer: Observer | None = None,
    on_event: HostObserver | None = None,
    approvals: ApprovalPort | None = None,
) -> GenerationTurnResult:
    """Run the attempts in order until one ends other than `error` or `timeout`.

    A superseded attempt's delivered messages are deleted before the next one
    speaks. The last attempt's result (or exception) is the turn's. The notice
    catalog, the context stash (one for the whole turn, so an item a tool put
    aside in one attempt can be taken in the next), the reply target, the
    observer (every step of every attempt), `on_event` (their host events) and
    the approval port (SPEC 6c) reach each attempt's `run_tool_loop` as they are.
    An attempt without its own configuration runs with the environment's, read
    once for the turn.
    """
    if not attempts:
        raise InvalidOption("run_generation_turn needs at least one attempt")
    stash = ContextStash() if stash is None else stash
    for index, attempt in enumerate(attempts):
        last = index == len(attempts) - 1
        attempt_turn, config, verbatim = prepared(turn, attempt, registry)
        delivered_before = len(channel.delivered_message_ids())
        try:
            result = await run_tool_loop(
                turn=attempt_turn,
                config=config,
                provider=attempt.provider,
                registry=registry,
                channel=channel,
                control=control,
                catalog=catalog,
                stash=stash,
                reply_to=reply_to,
                verbatim=verbatim,
                observer=observer,
                on_event=on_event,
                attempt=index,
                approvals=approvals,
            )
        except RetryableError:
            if last:
                raise
        else:
            if last or result.status not in HANDS_OVER:
                return result
        superseded = channel.delivered_message_ids()[delivered_before:]
        await channel.delete_messages(superseded)
    raise BrokenInvariant("unreachable: the last attempt returns or raises")
