"""The spans and metrics of one turn, fed by the interpreter's observer port.

`Telemetry.turn(turn, attempts)` opens the turn's `invoke_agent` span (current
while it is open, so a bot's own spans nest under it) and yields a `TurnTrace`
whose `observer` and `on_event` are handed to `run_generation_turn` or
`run_tool_loop`. From them it builds, under the turn span and across every
attempt of the fallback chain:

* a `chat {model}` span per provider call, from the step that starts the stream
  to the step that reads its result, with the tokens it used when the provider
  reported them (summed on the turn span, and the token usage histogram);
* an `execute_tool {name}` span per tool call, from its `ToolStarted` (or its
  first `ApprovalAsked`) to its `ToolFinished` host event (the calls of a batch
  are siblings; `toolloop.effects.telemetry.tool_spans`);
* a `toolloop.step` event on the turn span per step (its move, SPEC rule and
  phases) and a `toolloop.notice` event per notice shown.

Content (the model's text, tool arguments and results, notice text) is
recorded only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
or `capture_content=True`; even then arguments are the registry's redacted
ones, and the values of a call's secret arguments are cut out of everything
recorded after it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from toolloop.effects.interpreter import Observer
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalExpired,
    ApprovalWithdrawn,
    HostEvent,
    HostObserver,
    MoveMemo,
    NoticeShown,
    StreamFirstChunk,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from toolloop.effects.telemetry import conventions as sc
from toolloop.effects.telemetry.tool_spans import ToolSpans
from toolloop.effects.turn import Attempt
from toolloop.engine import commands as fx
from toolloop.engine.events import Event, StreamEnded, ToolSettled, TurnStarted
from toolloop.engine.step import Step
from toolloop.engine.table import Move
from toolloop.states import (
    IterationState,
    Phase,
    ProviderDescriptor,
    StreamError,
    StreamStatus,
    TokenUsage,
    ToolResult,
    TurnSettings,
    TurnStatus,
)

FAILED_TURNS = frozenset({TurnStatus.ERROR, TurnStatus.TIMEOUT})
COUNTED_MOVES = frozenset(
    {
        Move.FOLLOW_UP_INTERRUPT,
        Move.STOPPED_BY_USER,
        Move.STOPPED_BEFORE_TOOL,
        Move.STOPPED_DURING_TOOL,
    }
)
"""The moves a counter counts: the follow-up interrupts, and the kills and stops."""
FINISHED = Phase.FINISHED
TRACED_EFFECTS = frozenset({fx.DispatchTool, fx.StartTool, fx.StreamOnce, fx.AskApproval})
"""The effects a trace reads; a step's others are passed over with one lookup."""
STREAM_ENDED = {
    status.value: {
        sc.STREAM_STATUS: status.value,
        sc.FINISH_REASONS: (sc.FINISH_REASON.get(status, status.value),),
    }
    for status in StreamStatus
}
"""The attributes a provider call's span ends with, by its stream's status's value."""


def _labels(
    source: Phase, event: type[Event], move: Move, dest: Phase, rule: str
) -> tuple[dict[str, str], bool]:
    """A step event's attributes that its move decides, and whether a counter counts the move."""
    labels = {sc.MOVE: str(move), sc.RULE: rule, sc.SOURCE: source.value, sc.DEST: dest.value}
    return labels, move in COUNTED_MOVES


step_labels = MoveMemo(_labels)


def sdk_configured() -> bool:
    """An SDK's tracer provider is installed (by the application or `opentelemetry-instrument`)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def capture_requested() -> bool:
    """The conventions' content-capture switch is on in the environment."""
    return os.environ.get(sc.CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


class Telemetry:
    """A tracer and toolloop's instruments; one per process is enough, turns share it.

    Without providers given it uses the global ones, which are no-ops until an
    SDK is configured. `capture_content` None reads the conventions' switch.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool | None = None,
    ) -> None:
        schema = f"https://opentelemetry.io/schemas/{sc.SEMCONV_VERSION}"
        self.tracer = trace.get_tracer("toolloop", None, tracer_provider, schema)
        meter = metrics.get_meter("toolloop", "", meter_provider, schema)
        self.capture_content = capture_requested() if capture_content is None else capture_content
        self._meter_provider = meter_provider
        self.duration = meter.create_histogram(
            sc.OPERATION_DURATION, unit="s", description="GenAI operation duration"
        )
        self.token_usage = meter.create_histogram(
            sc.TOKEN_USAGE,
            unit="{token}",
            description="Measures number of input and output tokens used",
        )
        self.iterations = meter.create_histogram(
            "toolloop.turn.iterations", unit="{iteration}", description="Iterations per attempt"
        )
        self.turns = meter.create_counter(
            "toolloop.turns", unit="{turn}", description="Turns ended, by status"
        )
        self.tool_failures = meter.create_counter(
            "toolloop.tool.failures", unit="{call}", description="Tool calls that failed, by tool"
        )
        self.follow_up_interrupts = meter.create_counter(
            "toolloop.follow_up.interrupts",
            unit="{stream}",
            description="Streams a follow-up message interrupted",
        )
        self.stops = meter.create_counter(
            "toolloop.stops", unit="{attempt}", description="Attempts a kill or a stop ended"
        )
        self.approval_waits = meter.create_histogram(
            sc.APPROVAL_WAIT_DURATION,
            unit="s",
            description="Waits for a person's approval of a tool call, by outcome",
        )

    @contextmanager
    def turn(self, turn: TurnSettings, attempts: Sequence[Attempt] = ()) -> Iterator[TurnTrace]:
        """The turn's span, current while the block runs; an exception out of it is recorded."""
        attributes = {
            sc.OPERATION: "invoke_agent",
            sc.AGENT_NAME: turn.persona.name,
            sc.CONVERSATION: turn.channel_id,
            sc.PROVIDER: provider_name(turn.provider),
        }
        span = self.tracer.start_span(
            f"invoke_agent {turn.persona.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        active = span.is_recording() or self.measuring()
        models = [_model(attempt) for attempt in attempts] if active else []
        traced = TurnTrace(self, span, models, active=active)
        current: AbstractContextManager[Any] = (
            nullcontext()  # the API's no-op tracer hands back the span already current
            if span is trace.get_current_span()
            else trace.use_span(span, record_exception=False, set_status_on_exception=False)
        )
        with current:
            try:
                yield traced
            except BaseException as error:
                traced.raised(error)
                raise
            finally:
                traced.close()

    def measuring(self) -> bool:
        """A meter provider of an SDK records the instruments (not the API's no-op or proxy)."""
        provider = self._meter_provider or metrics.get_meter_provider()
        noop = isinstance(provider, metrics.NoOpMeterProvider)
        return not noop and type(provider).__name__ != "_ProxyMeterProvider"


def provider_name(descriptor: ProviderDescriptor) -> str:
    """`gen_ai.provider.name`: the well-known value of the API family, else the provider's name."""
    return sc.PROVIDER_NAMES.get(descriptor.api_family.value, descriptor.name)


def _model(attempt: Attempt) -> str:
    """The model an attempt asks for, when its provider says (`OpenAICompatProvider.model`)."""
    model = getattr(attempt.provider, "model", None)
    return model if isinstance(model, str) else attempt.provider.descriptor.name


class TurnTrace:
    """One turn's spans: pass `observer` and `on_event` to the loop.

    Both are None when nothing would be recorded (no SDK, or the turn sampled
    out and no meter): the loop then builds no host event and calls nothing, and
    the trace itself builds nothing, not even at the turn's end.
    """

    def __init__(
        self, telemetry: Telemetry, span: Span, models: Sequence[str], *, active: bool
    ) -> None:
        self._telemetry, self._span, self._models = telemetry, span, models
        self._active = active
        self.observer: Observer | None = self._observe if active else None
        self.on_event: HostObserver | None = self._on_event if active else None
        if not active:
            return
        self._context: Context = trace.set_span_in_context(span)
        self._recording = span.is_recording()
        """False for a turn its sampler dropped: only its metrics are recorded."""
        self._attempt = -1
        self._chat: Span | None = None
        self._chat_started, self._chat_name = 0.0, ""
        self._first_chunk: float | None = None
        """The open provider call's time to its first chunk, once it came."""
        self._chat_metric: dict[str, Any] = {}
        self._chat_attributes: dict[str, Any] = {}
        self._token_metrics: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        self._tools = tools = ToolSpans(telemetry, self._context, recording=self._recording)
        self._handlers: dict[type, Callable[[Any], None]] = {
            ToolStarted: tools.started,
            ToolFinished: self._finished,
            StreamFirstChunk: self._first_chunk_came,
            ApprovalAsked: tools.asked,
            ApprovalAnswered: tools.ended,
            ApprovalExpired: tools.ended,
            ApprovalWithdrawn: tools.ended,
            NoticeShown: self._notice,
            TurnFinished: self._turn_finished,
        }
        """What each host event the trace reads does; the others are passed over."""
        self._settled: ToolResult | None = None
        self._usage: TokenUsage | None = None
        self._status: TurnStatus | None = None

    # -- the observer port ------------------------------------------------------------------

    def _observe(self, state: IterationState, event: Event, out: Step) -> None:
        """Every step: its event on the turn span, and the provider calls' spans.

        It runs on every step of a traced turn, so it reuses each move's labels and
        what the provider calls of an attempt have in common.
        """
        if isinstance(event, TurnStarted) or self._attempt < 0:  # < 0: a resumed wait
            self._begin_attempt(state.turn.provider)
        elif isinstance(event, StreamEnded):
            self._end_chat(event)
        elif isinstance(event, ToolSettled):
            self._settled = event.result
        after, move = out.state, out.move
        dest = after.phase
        labels, counted = step_labels(state.phase, type(event), move, dest)
        if self._recording:
            self._span.add_event(
                sc.STEP_EVENT, {**labels, sc.ATTEMPT: self._attempt, sc.ITERATION: after.iteration}
            )
        if counted:
            self._count(move)
        if dest is FINISHED:
            self._telemetry.iterations.record(after.iteration + 1)  # iterations count from 0
        for effect in out.effects:
            if type(effect) not in TRACED_EFFECTS:
                continue
            if isinstance(effect, fx.StreamOnce):
                self._start_chat(effect.iteration)
            elif isinstance(effect, fx.DispatchTool | fx.StartTool):
                self._tools.dispatched(effect.call)
            elif isinstance(effect, fx.AskApproval):
                self._tools.asking(effect.request)

    def _count(self, move: Move) -> None:
        if move is Move.FOLLOW_UP_INTERRUPT:
            self._telemetry.follow_up_interrupts.add(1)
        else:
            self._telemetry.stops.add(1, {sc.MOVE: str(move)})

    def _on_event(self, shown: HostEvent) -> None:
        """Host events: tool spans and approvals, the first chunk, notices, the result."""
        handle = self._handlers.get(type(shown))
        if handle is not None:  # None: the provider calls' spans are made from the steps
            handle(shown)

    def _finished(self, shown: ToolFinished) -> None:
        settled, self._settled = self._settled, None
        self._tools.finished(shown, settled)

    def _first_chunk_came(self, shown: StreamFirstChunk) -> None:
        if self._chat is not None and self._first_chunk is None:
            self._first_chunk = time.monotonic() - self._chat_started

    def _notice(self, shown: NoticeShown) -> None:
        """A notice shown: an event on the turn span."""
        if not self._recording:
            return
        notice = shown.notice
        attributes: dict[str, Any] = {
            sc.NOTICE_KEY: notice.key,
            sc.NOTICE_LEVEL: notice.level,
            sc.NOTICE_HIDDEN: notice.hidden,
            sc.ATTEMPT: shown.attempt,
            sc.ITERATION: notice.iteration,
        }
        if self._telemetry.capture_content:
            attributes[sc.NOTICE_TEXT] = self._scrub(notice.text)
        self._span.add_event(sc.NOTICE_EVENT, attributes)

    def _turn_finished(self, shown: TurnFinished) -> None:
        self._status = shown.result.status

    # -- provider calls ---------------------------------------------------------------------

    def _begin_attempt(self, descriptor: ProviderDescriptor) -> None:
        """A new attempt of the chain: what each of its provider calls has in common."""
        self._attempt = attempt = self._attempt + 1
        models = self._models
        model = models[attempt] if attempt < len(models) else descriptor.name
        provider = provider_name(descriptor)
        self._chat_name = f"chat {model}"
        self._chat_metric = {sc.OPERATION: "chat", sc.PROVIDER: provider, sc.REQUEST_MODEL: model}
        self._token_metrics = (
            {**self._chat_metric, sc.TOKEN_TYPE: "input"},
            {**self._chat_metric, sc.TOKEN_TYPE: "output"},
        )
        self._chat_attributes = {
            **self._chat_metric,
            sc.REQUEST_STREAM: True,
            sc.ATTEMPT: attempt,
        }

    def _start_chat(self, iteration: int) -> None:
        self._chat_started, self._first_chunk = time.monotonic(), None
        if not self._recording:
            self._chat = INVALID_SPAN  # its duration is still measured
            return
        self._chat = self._telemetry.tracer.start_span(
            self._chat_name,
            self._context,
            kind=SpanKind.CLIENT,
            attributes={**self._chat_attributes, sc.ITERATION: iteration},
        )

    def _end_chat(self, event: StreamEnded) -> None:
        span, self._chat = self._chat, None
        if span is None:
            return
        took = time.monotonic() - self._chat_started
        result = event.result
        status = result.status
        ended: dict[str, Any] = {**STREAM_ENDED[status._value_]}  # a str hashes in C
        if self._first_chunk is not None:
            ended[sc.TIME_TO_FIRST_CHUNK] = self._first_chunk
        metric = self._chat_metric
        if status is StreamStatus.ERROR or status is StreamStatus.TIMEOUT:
            error = result.data
            kind = error.type if isinstance(error, StreamError) else status.value
            ended[sc.ERROR_TYPE] = kind
            metric = {**metric, sc.ERROR_TYPE: kind}
            span.set_status(Status(StatusCode.ERROR, _message(error)))
        usage = result.usage
        if usage is not None:
            self._used(usage, ended)
        if self._recording and self._telemetry.capture_content:
            message = {
                "role": "assistant",
                "parts": [{"type": "text", "content": self._scrub(result.accumulated_text)}],
                "finish_reason": ended[sc.FINISH_REASONS][0],
            }
            ended[sc.OUTPUT_MESSAGES] = json.dumps([message], ensure_ascii=False)
        span.set_attributes(ended)
        span.end()
        self._telemetry.duration.record(took, metric)

    def _used(self, usage: TokenUsage, ended: dict[str, Any]) -> None:
        """A call's reported tokens: on its span, in the histogram, and into the turn's sum."""
        ended[sc.INPUT_TOKENS] = usage.input_tokens
        ended[sc.OUTPUT_TOKENS] = usage.output_tokens
        if usage.reasoning_tokens:
            ended[sc.REASONING_TOKENS] = usage.reasoning_tokens
        record, (inputs, outputs) = self._telemetry.token_usage.record, self._token_metrics
        record(usage.input_tokens, inputs)
        record(usage.output_tokens, outputs)
        self._usage = usage if self._usage is None else self._usage + usage

    # -- the turn ---------------------------------------------------------------------------

    def raised(self, error: BaseException) -> None:
        """The turn ended with an exception: recorded on the turn span."""
        if not self._active:
            return
        self._span.record_exception(error)
        self._span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        self._span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)

    def close(self) -> None:
        """End whatever an exception left open, then the turn span with its status."""
        if not self._active:
            self._span.end()
            return
        if self._chat is not None and self._first_chunk is not None:
            self._chat.set_attribute(sc.TIME_TO_FIRST_CHUNK, self._first_chunk)
        for span in self._open_spans():
            span.set_status(Status(StatusCode.ERROR, "the turn ended first"))
            span.end()
        status = "raised" if self._status is None else self._status.value
        ended: dict[str, Any] = {sc.TURN_STATUS: status, sc.TURN_ATTEMPTS: self._attempt + 1}
        if self._usage is not None:  # every attempt's provider calls that reported it
            ended[sc.INPUT_TOKENS] = self._usage.input_tokens
            ended[sc.OUTPUT_TOKENS] = self._usage.output_tokens
        self._span.set_attributes(ended)
        if self._status in FAILED_TURNS:
            self._span.set_status(Status(StatusCode.ERROR, status))
        self._telemetry.turns.add(1, {sc.TURN_STATUS: status})
        self._span.end()

    def _open_spans(self) -> Iterator[Span]:
        if self._chat is not None:
            yield self._chat
        yield from self._tools.open_spans()

    def _scrub(self, text: str) -> str:
        return self._tools.scrub(text)


def _message(error: object) -> str:
    return error.message if isinstance(error, StreamError) else ""
