"""OpenTelemetry for toolloop turns: spans, step events and metrics, through `opentelemetry-api`.

Install `toolloop-engine[otel]`. The SDK and its exporters are the application's
choice: without a configured SDK the API's no-op providers make every call
free, and the CLI (`toolloop.tools.observed`) makes no `Telemetry` at all
unless `sdk_configured()`.
"""

from toolloop.effects.telemetry.conventions import CAPTURE_CONTENT_VARIABLE, SEMCONV_VERSION
from toolloop.effects.telemetry.tracing import Telemetry, TurnTrace, sdk_configured

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "SEMCONV_VERSION",
    "Telemetry",
    "TurnTrace",
    "sdk_configured",
]
