"""A `Telemetry` on an SDK of its own, read back through the in-memory exporter and reader."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider, sampling
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolloop.effects.telemetry import Telemetry


class Recorded:
    """A `Telemetry` on an SDK of its own, with what it exported."""

    def __init__(
        self, capture_content: bool = False, sampler: sampling.Sampler | None = None
    ) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider(sampler=sampler)
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture_content,
        )

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name.startswith(prefix)]

    def turn_span(self) -> ReadableSpan:
        (span,) = self.named("invoke_agent")
        return span

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]
