"""OpenTelemetry spans and metrics of every turn (`toolloop-engine[otel]`, docs/telemetry.md)."""

from toolloop.effects.telemetry import (
    CAPTURE_CONTENT_VARIABLE,
    SEMCONV_VERSION,
    Telemetry,
    TurnTrace,
    sdk_configured,
)

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "SEMCONV_VERSION",
    "Telemetry",
    "TurnTrace",
    "sdk_configured",
]
