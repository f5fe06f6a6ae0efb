"""The ports: what the interpreter needs from its host, as typing Protocols.

The loop talks to the world only through these (SPEC section 1). Everything is
written against anyio, so the same adapters run under trio and asyncio.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs

from toolloop.engine import tool_call
from toolloop.engine.commands import StreamOnce
from toolloop.engine.events import StopRequest
from toolloop.states import (
    VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS,
    ApprovalDecision,
    ApprovalRequest,
    FunctionCall,
    JsonObject,
    ProviderDescriptor,
    StreamResult,
    ToolContext,
    ToolResult,
    ToolSpec,
    TurnSettings,
)

log = logging.getLogger("toolloop")
"""Where a failure the host should hear of, and that never ends the turn, is logged."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamRequest:
    """Everything one provider call needs: the turn, the loop's state and the tools."""

    turn: TurnSettings
    once: StreamOnce
    """The engine's effect: history, model parts, context, tail directives, suppression."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools exposed to the model this attempt."""
    reply_to: str | None = None
    """The message the reply answers; None for scene turns."""
    verbatim: bool = False
    """Run the verbatim parser over the visible text (SPEC 10, decided per attempt)."""
    verbatim_tool_call_max_buffer_chars: int = VERBATIM_TOOL_CALL_MAX_BUFFER_CHARS
    """The parser's cap on held text: the attempt's `LoopConfig` value, carried here so the
    provider reads it from the request and the bot author never copies it (SPEC 2)."""


class StreamSink(Protocol):
    """Where a provider reports what it streams; given to it by the interpreter."""

    def progress(self) -> None:
        """Call when the model made progress (text, reasoning, a call, the finish): it restarts
        the inactivity timer, so a chunk that carries nothing must not call it."""

    async def deliver(self, text: str) -> None:
        """Send visible text to the channel (the sink drops it while text is suppressed)."""


class Provider(Protocol):
    """A model that streams one reply per call.

    `stream` is cancelled through anyio cancellation (the inactivity timeout, the
    kill handle, the host): an adapter must then close its HTTP request. Errors
    it cannot map to a `StreamResult` propagate to the loop's caller (SPEC 5).
    """

    @property
    def descriptor(self) -> ProviderDescriptor:
        """Which provider this is; policies read its API family."""
        ...

    async def stream(self, request: StreamRequest, sink: StreamSink) -> StreamResult:
        """Run one provider call and report how it ended."""
        ...


class ToolRegistryPort(Protocol):
    """The tools of a turn, as the interpreter sees them (`toolloop.effects.registry`)."""

    def specs(self, provider: ProviderDescriptor) -> tuple[ToolSpec, ...]:
        """The tools exposed to the model for `provider`."""
        ...

    async def execute(
        self, call: FunctionCall, context: ToolContext, invocation: ToolInvocation
    ) -> ToolResult:
        """Apply the gates and the schema, run the tool; tool errors are failures, never raised."""
        ...

    def requires_follow_up(
        self, tool: str, provider: ProviderDescriptor, server: str | None
    ) -> bool:
        """Whether the tool's result must be presented by another model call (SPEC 7)."""
        ...

    def redact(self, tool: str, args: JsonObject | None) -> JsonObject | None:
        """The arguments with every secret the tool's schema names replaced."""
        ...

    def exclusive(self, tool: str) -> bool:
        """Whether the tool runs alone within a batch of calls (SPEC 6b item 3)."""
        ...

    def timeout_ms(self, tool: str) -> int | None:
        """The tool's own timeout, overriding `TOOL_EXECUTION_TIMEOUT_MS`; None: that one."""
        ...

    def needs_approval(self, call: FunctionCall, context: ToolContext) -> bool:
        """Whether the call waits for a person's decision before it runs (SPEC 6c); only
        for a call that would pass the registry's own checks (unknown tool, gates, schema).
        Optional: a registry without it never asks."""
        ...

    def asks_approval(self) -> bool:
        """Whether any of its tools may need a person's approval (SPEC 6c), asked once per
        stream that brings calls: False spares asking `needs_approval` about each call.
        Optional: without it, `needs_approval` is asked about every call."""
        ...


def approvals_needed(
    registry: ToolRegistryPort,
    result: StreamResult,
    context: Callable[[], ToolContext],
) -> tuple[bool, ...]:
    """The registry's answer for each call of `result`: it needs approval (SPEC 6c); () when
    none does.

    Asked about each call only when it may ask at all: a registry that says none of its
    tools does (`asks_approval`), or one written before approval existed (no
    `needs_approval`), is asked nothing more, and `context` is never built for it.
    """
    asks_approval = getattr(registry, "asks_approval", None)
    if asks_approval is not None and not asks_approval():
        return ()
    needs_approval = getattr(registry, "needs_approval", None)
    calls = result.batch
    if needs_approval is None or not calls:
        return ()
    made = context()
    needs = tuple(
        bool(needs_approval(tool_call.renamed(call, call.name.strip()), made)) for call in calls
    )
    return needs if any(needs) else ()


def exclusive_flags(registry: ToolRegistryPort, calls: Sequence[FunctionCall]) -> tuple[bool, ...]:
    """Whether each call of a batch runs alone (SPEC 6b item 3); () for fewer than two calls,
    which run alone anyway."""
    if len(calls) < 2:
        return ()
    return tuple(registry.exclusive(call.name.strip()) for call in calls)


def shown_request(registry: ToolRegistryPort, request: ApprovalRequest) -> ApprovalRequest:
    """The approval request as the host shows it (`ApprovalPort`): its arguments' secrets
    redacted by the tool's schema."""
    return attrs.evolve(request, args=registry.redact(request.tool, request.args))


class ApprovalPort(Protocol):
    """Where a person approves or denies a tool call (SPEC 6c): the host's prompt.

    `ask` shows the request and returns the decision once a person gave one; the
    loop cancels it when nobody answered within `TOOL_APPROVAL_TIMEOUT_MS` (the
    host then retires its prompt as expired). A decision must echo the request's
    `digest`: one given for other arguments is refused and `ask` is called again.
    `withdraw` says the turn was killed while it waited.
    """

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask a person about the call; return their decision."""
        ...

    async def withdraw(self, request: ApprovalRequest) -> None:
        """The request is moot: retire its prompt."""
        ...


async def withdraw(
    approvals: ApprovalPort | None, registry: ToolRegistryPort, request: ApprovalRequest
) -> None:
    """Tell the host that `request` is moot (the turn was killed while it waited), shown as it
    was asked (`shown_request`); a host that fails to hear it is logged, never the turn's end."""
    if approvals is None:
        return
    try:
        await approvals.withdraw(shown_request(registry, request))
    except Exception:
        log.exception("withdrawing the approval request of %s failed", request.tool)


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class StreamingContext:
    """The stream a tool call came from, live in the channel (SPEC 6 step 3).

    What a tool that delivers the reply itself needs to speak in the same place,
    under the same identity, after what the model already said.
    """

    reply_to: str | None
    """The message the turn's reply answers; None for scene turns."""
    identity: str | None
    """The persona's webhook identity the turn speaks as; None for the bot's own."""
    pre_tool_text: str
    """What the stream said before asking for the tool."""
    text_suppressed: bool
    """That text was kept out of the channel (a NovelAI retry)."""


@attrs.frozen(kw_only=True, slots=False)  # built per call: dict-backed is faster
class ToolInvocation:
    """What a running tool gets from the interpreter, live: kill signal, notices, its stream."""

    killed: KillSignal
    """Set when the turn is killed: a tool waits on it to cancel its own I/O."""
    notify: Callable[[str], Awaitable[None]]
    """Send a progress notice (a no-op when the turn suppresses progress notices)."""
    streaming: StreamingContext | None = None
    """The live stream the call came from (None outside a turn, e.g. a tool run by hand)."""


@attrs.frozen(kw_only=True)
class Notice:
    """A rendered notice, ready for the channel or the thought log."""

    key: str
    level: str
    text: str
    hidden: bool
    iteration: int
    identity: str | None = None
    """The persona's webhook identity when the turn speaks as one; None for the bot."""


@attrs.frozen(kw_only=True)  # slotted: a waiting turn holds its stream's
class StreamSpan:
    """One stream of a turn, as the channel sees it: its attempt and iteration are its identity."""

    attempt: int
    """The index of the attempt in the generation turn's fallback chain (0 first)."""
    iteration: int
    reply_to: str | None = None
    """The message the stream's text replies to; None for scene turns."""
    suppressed: bool = False
    """The stream's text is suppressed (NovelAI retry): nothing of it reaches `send_text`."""
    turn: str | None = None
    """The turn's name in every process (a Temporal workflow's id), when the host has one:
    with the attempt and iteration it names the stream to a channel that recalls what it
    took (`toolloop.durable.RecallingChannel`)."""


class Channel(Protocol):
    """Where the turn's text and notices appear.

    Each stream's text arrives between `stream_started` and `stream_ended`, so a
    chat adapter can give each stream its own message and flush it at the end.
    """

    def stream_started(self, stream: StreamSpan) -> None:
        """A stream begins; its text follows (synchronous: it must not block)."""

    def stream_ended(self, stream: StreamSpan) -> None:
        """The stream is over on every path (end, kill, timeout, failure); it must not block."""

    async def send_text(self, text: str, *, reply_to: str | None) -> None:
        """Deliver a chunk of streamed, visible reply text.

        An exception (the platform refused or failed the send) ends the stream
        as `error` carrying it; the text delivered before stays (SPEC 5).
        """

    async def send_notice(self, notice: Notice) -> None:
        """Show a warning, error or info notice in the channel."""

    async def send_hidden_notice(self, notice: Notice) -> None:
        """Add a hidden notice to the thought log only."""

    def delivered_message_ids(self) -> Sequence[str]:
        """Every message this channel delivered for the turn, in order."""
        ...

    async def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages a superseded attempt delivered."""


KillHandle = Callable[[], None]


class KillSignal(Protocol):
    """The turn's kill signal as tools and the interpreter read it; an `anyio.Event` is one."""

    def is_set(self) -> bool:
        """True once the turn is killed."""
        ...

    async def wait(self) -> None:
        """Return once the turn is killed."""
        ...


class TurnControl(Protocol):
    """The channel's turn state: stop and follow-up requests, counters, the kill."""

    def pending_request(self) -> StopRequest:
        """The stop or follow-up request pending for the channel."""
        ...

    async def wait_for_follow_up(self) -> None:
        """Return once a follow-up request is pending for the channel (at once if one is).

        The interpreter waits on it while a stream runs before the tool-call
        chain is active: a follow-up then ends that stream (SPEC 5). Cancelled
        when the stream ends.
        """

    def clear_stop_request(self) -> None:
        """Forget the pending request (a follow-up seen by a tool chain, an unanswered stop)."""

    def queue_stop_response(self) -> None:
        """Queue the stop response at the front of the channel's queue."""

    def reset_follow_up_count(self) -> None:
        """The turn ended on a stream of its own: follow-ups start counting afresh."""

    def increment_follow_up_count(self) -> None:
        """A follow-up message interrupted the stream once more."""

    def set_tool_chain_active(self) -> None:
        """The channel is in a tool-call chain (the host shows it, queues behind it)."""

    def count_tool_usage(self, name: str) -> None:
        """A successful, non-blocked call outside direct messages, for usage statistics."""

    def retain_affordance(self, name: str) -> None:
        """Keep `name` exposed under deliberate mode for the configured further turns."""

    def register_kill(self, handle: KillHandle) -> None:
        """Register what ends the current call at once on `/kill` (synchronous, never blocks)."""

    def deregister_kill(self, handle: KillHandle) -> None:
        """Remove a handle given to `register_kill`; the interpreter does so on every path."""

    @property
    def killed(self) -> KillSignal:
        """The turn's kill signal, set by a genuine kill; tools wait on it to cancel their I/O."""
        ...
