"""The calls a `Telemetry` makes into its tracer and meter, logged to be made again alone.

Handed to `Telemetry` as both its tracer provider and its meter provider,
`SdkCalls` records every span started (name, parent, kind, attributes), every
call on those spans (events, attributes, status, end) and every measurement,
with their arguments as given. `replay(telemetry)` returns a function that makes
the same calls, in the same order, on that telemetry's SDK tracer and
instruments, with the turn span current as `Telemetry.turn` makes it: the SDK's
own cost of a trace, with no toolloop code around it (a tuple read and a
branch a call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context

from toolloop.effects.telemetry import Telemetry

Call = tuple[Any, ...]
START, SPAN, MEASURE = 0, 1, 2
"""A logged call: (START, span number, parent number or -1, name, kind, attributes),
(SPAN, span number, method name, args, kwargs), (MEASURE, instrument name, method name, args).
A `TurnTrace` starts every span under the turn span, its first."""
SPANS, EVENTS, POINTS = "spans", "step events", "points"
EVERYTHING = frozenset({SPANS, EVENTS, POINTS})


def part(call: Call) -> str | None:
    """What a logged call is part of: a span under the turn's (its start and every call on
    it), an event on the turn span, a measurement; None for the turn span's own calls."""
    if call[0] == MEASURE:
        return POINTS
    if call[0] == SPAN and call[1] == 0:
        return EVENTS if call[2] == "add_event" else None
    return SPANS


class LoggedSpan(trace.NonRecordingSpan):
    """A span that says it records and logs each call made on it."""

    def __init__(self, log: list[Call], number: int) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        self._log, self.number = log, number

    def is_recording(self) -> bool:
        return True

    def add_event(self, *args: Any, **kwargs: Any) -> None:
        self._log.append((SPAN, self.number, "add_event", args, kwargs))

    def set_attributes(self, *args: Any, **kwargs: Any) -> None:
        self._log.append((SPAN, self.number, "set_attributes", args, kwargs))

    def set_attribute(self, *args: Any, **kwargs: Any) -> None:
        self._log.append((SPAN, self.number, "set_attribute", args, kwargs))

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        self._log.append((SPAN, self.number, "set_status", args, kwargs))

    def end(self, *args: Any, **kwargs: Any) -> None:
        self._log.append((SPAN, self.number, "end", args, kwargs))


class LoggedTracer(trace.NoOpTracer):
    def __init__(self, log: list[Call]) -> None:
        self._log, self._spans = log, 0

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> trace.Span:
        parent = trace.get_current_span(context)
        number = parent.number if isinstance(parent, LoggedSpan) else -1
        self._log.append((START, self._spans, number, name, kind, attributes))
        self._spans += 1
        return LoggedSpan(self._log, self._spans - 1)


class LoggedInstrument:
    def __init__(self, log: list[Call], name: str) -> None:
        self._log, self._name = log, name

    def record(self, *args: Any) -> None:
        self._log.append((MEASURE, self._name, "record", args))

    def add(self, *args: Any) -> None:
        self._log.append((MEASURE, self._name, "add", args))


class LoggedMeter(metrics.NoOpMeter):
    def __init__(self, log: list[Call]) -> None:
        super().__init__("logged")
        self._log = log

    def create_histogram(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return LoggedInstrument(self._log, name)

    def create_counter(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return LoggedInstrument(self._log, name)


class SdkCalls(trace.NoOpTracerProvider, metrics.MeterProvider):
    """A tracer and meter provider that log what a `Telemetry` asks of them (one turn's worth)."""

    def __init__(self) -> None:
        self.log: list[Call] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return LoggedTracer(self.log)

    def get_meter(self, *args: Any, **kwargs: Any) -> metrics.Meter:
        return LoggedMeter(self.log)

    def count(self, what: str) -> int:
        """How many spans under the turn's, step events or measurements the turn asked for."""
        if what == SPANS:
            return sum(1 for call in self.log[1:] if call[0] == START)
        return sum(1 for call in self.log if call[0] != START and part(call) == what)

    def replay(self, telemetry: Telemetry, only: frozenset[str] = EVERYTHING) -> Callable[[], None]:
        """The logged calls made on `telemetry`'s tracer and instruments, with nothing else.

        `only` some parts: the turn span still starts and ends, the others' calls are left out.
        """
        instruments = {
            instrument.name: instrument
            for instrument in vars(telemetry).values()
            if isinstance(instrument, metrics.Histogram | metrics.Counter)
        }
        (first, *logged) = self.log
        assert first[0] == START and first[2] == -1, "the turn span comes first"
        assert all(call[2] == 0 for call in logged if call[0] == START), "all under the turn span"
        rest = [call for call in logged if part(call) is None or part(call) in only]
        tracer = telemetry.tracer

        def again() -> None:
            turn = tracer.start_span(first[3], kind=first[4], attributes=first[5])
            spans: list[trace.Span] = [turn]
            under = trace.set_span_in_context(turn)
            with trace.use_span(turn, record_exception=False, set_status_on_exception=False):
                for call in rest:
                    if call[0] == START:
                        spans.append(tracer.start_span(call[3], under, call[4], call[5]))
                    elif call[0] == SPAN:
                        getattr(spans[call[1]], call[2])(*call[3], **call[4])
                    else:
                        getattr(instruments[call[1]], call[2])(*call[3])

        return again
