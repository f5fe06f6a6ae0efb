"""Stage 01: one provider call streamed through its sink, and its end (SPEC 5)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable

import anyio

from toolloop.effects import port_values
from toolloop.effects.interpreter.announce import Announcer
from toolloop.effects.interpreter.attempt import log
from toolloop.effects.interpreter.calls import Sink
from toolloop.effects.observe import StreamFirstChunk
from toolloop.effects.ports import (
    StreamSpan,
    approvals_needed,
    exclusive_flags,
)
from toolloop.engine import build, tool_call
from toolloop.engine import commands as fx
from toolloop.engine.events import StopRequest, StreamEnded
from toolloop.states import (
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolContext,
)
from toolloop.states.loop_config import in_seconds

# Read on every stream, so module names: a member read off its Enum class is a
# class attribute lookup, about 900 instructions on CPython 3.11.
_ERROR, _TIMEOUT = StreamStatus.ERROR, StreamStatus.TIMEOUT


class StreamStage(Announcer):
    """Streams one provider call and turns its result into `StreamEnded`."""

    __slots__ = ()

    def _stream_once(self, effect: fx.StreamOnce) -> Awaitable[StreamEnded]:
        span = port_values.stream_span(
            attempt=self.attempt,
            iteration=effect.iteration,
            reply_to=self.reply_to,
            suppressed=effect.suppress_text_output,
        )
        follow_ups = None if self._chain_active else self.control
        first_chunk = None
        if self.on_event is not None:
            shown = StreamFirstChunk(attempt=self.attempt, iteration=effect.iteration)
            first_chunk = functools.partial(self.on_event, shown)
        sink = Sink(
            effect,
            self._runner,
            self._alarm,
            self.channel,
            span,
            self._stream_timeout,
            follow_ups,
            first_chunk,
        )
        request = port_values.stream_request(
            turn=self.turn,
            once=effect,
            tools=self.registry.specs(self.provider.descriptor),
            reply_to=self.reply_to,
            verbatim=self.verbatim,
            verbatim_tool_call_max_buffer_chars=self.config.verbatim_tool_call_max_buffer_chars,
        )
        self.channel.stream_started(span)
        stream = self.provider.stream(request, sink)
        if sink.interruptible:
            sink.check_follow_up()  # a follow-up pending when the stream starts ends it at once
            stream = sink.watch(stream)
        return self._call(sink, stream, self._stream_ended)

    def _stream_ended(self, sink: Sink, result: StreamResult) -> StreamEnded:
        status = result.status
        if status is _ERROR or status is _TIMEOUT:
            _log_failed_stream(self.provider.descriptor, sink.span, result)
        stop = self.control.pending_request()
        if sink.went_silent:  # the machine sends its notice (SPEC 5)
            return build.stream_ended(result=result, stop=stop, went_silent=True)
        exclusive = exclusive_flags(self.registry, result.calls)
        approval = approvals_needed(self.registry, result, self._tool_context)
        return build.stream_ended(result=result, stop=stop, exclusive=exclusive, approval=approval)

    def _tool_context(self) -> ToolContext:
        """What a tool would be told in the state the stream answers to: the approval
        rules read it (`approvals_needed` builds it only for a registry that may ask)."""
        state = self._state
        return tool_call.tool_context(
            self.turn, state.iteration, state.short_term_memory_updated, state.context.items
        )

    async def _abandoned(self, sink: Sink) -> StreamResult:
        """A stream taken from its runner: whatever ended it first decides its result.

        A failed send is `error` and a follow-up `follow_up_interrupt`, both with the
        text delivered so far. A killed stream, or a silent one: a stop wins at
        once, else settle, then `timeout`, reported as the loop's own (`went_silent`:
        its row sends the inactivity notice); a kill during the settle also ends it
        as `stopped_by_user`.
        """
        if sink.failure is not None:
            return channel_failed(sink.text, sink.failure)
        if sink.interrupted:
            return StreamResult(status=StreamStatus.FOLLOW_UP_INTERRUPT, accumulated_text=sink.text)
        if sink.killed or self.control.pending_request() is StopRequest.STOP:
            return _stopped(sink)
        sink.settled = anyio.Event()
        settle = self.config.stream_abandoned_settle_timeout_ms / 1000
        with self._alarm.start(self._alarm.now() + settle):
            await sink.settled.wait()
        self._alarm.stop()
        if sink.killed:
            return _stopped(sink)
        sink.went_silent = True
        return silent(sink.text, in_seconds(self.config.stream_sdk_call_timeout_ms))


def silent(text: str, seconds: str) -> StreamResult:
    """The `timeout` of a stream silent for `seconds` after delivering `text`."""
    error = StreamError(type="timeout", message=f"no data from the provider for {seconds} s")
    return StreamResult(status=StreamStatus.TIMEOUT, accumulated_text=text, data=error)


def _stopped(sink: Sink) -> StreamResult:
    return StreamResult(status=StreamStatus.STOPPED_BY_USER, accumulated_text=sink.text)


def channel_failed(text: str, failure: Exception) -> StreamResult:
    """The stream's `error` when the channel could not deliver its text, naming the failure."""
    error = StreamError(
        type="channel_send_failed",
        message=f"the channel could not deliver text: {type(failure).__name__}: {failure}",
        retryable=False,
    )
    return StreamResult(status=StreamStatus.ERROR, accumulated_text=text, data=error)


def _log_failed_stream(
    provider: ProviderDescriptor, span: StreamSpan, result: StreamResult
) -> None:
    """A failed or timed-out stream, at WARNING: which provider, where (no key), what it said."""
    error = result.data if isinstance(result.data, StreamError) else None
    log.warning(
        "stream %s: provider %s at %s (attempt %d, iteration %d): %s",
        result.status.value,
        provider.name,
        provider.endpoint or "an endpoint it does not name",
        span.attempt,
        span.iteration,
        "no error given" if error is None else f"{error.type}: {error.message}",
        extra={"provider": provider.name, "endpoint": provider.endpoint, "status": result.status},
    )
