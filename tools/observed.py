"""The CLI's turns, traced when an OpenTelemetry SDK is configured.

`opentelemetry-instrument toolloop demo` (or `simulate`) installs the SDK
before the command runs; `traced` then opens the turn's spans
(`toolloop.effects.telemetry`) with no change to the command. Without
`opentelemetry-api` or without an SDK, it adds nothing: the run is the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

import attrs

from toolloop.effects.interpreter import Observer
from toolloop.effects.observe import HostObserver
from toolloop.effects.turn import Attempt
from toolloop.engine.events import Event
from toolloop.engine.step import Step
from toolloop.states import IterationState, TurnSettings

if TYPE_CHECKING:
    from toolloop.effects.telemetry import Telemetry


@attrs.frozen
class Hooks:
    """What `run_tool_loop` and `run_generation_turn` take as `observer` and `on_event`."""

    observer: Observer | None = None
    on_event: HostObserver | None = None


@contextmanager
def traced(
    turn: TurnSettings, attempts: Sequence[Attempt] = (), observer: Observer | None = None
) -> Iterator[Hooks]:
    """`observer`, plus the turn's spans when an SDK is configured."""
    telemetry = _telemetry()
    if telemetry is None:
        yield Hooks(observer=observer)
        return
    with telemetry.turn(turn, attempts) as trace:
        yield Hooks(observer=_both(observer, trace.observer), on_event=trace.on_event)


@cache
def _telemetry() -> Telemetry | None:
    """The process's `Telemetry`, or None without the `otel` extra or a configured SDK."""
    try:
        from toolloop.effects.telemetry import Telemetry, sdk_configured
    except ModuleNotFoundError:
        return None
    return Telemetry() if sdk_configured() else None


def _both(first: Observer | None, second: Observer | None) -> Observer | None:
    if first is None or second is None:
        return first or second

    def observe(state: IterationState, event: Event, out: Step) -> None:
        first(state, event, out)
        second(state, event, out)

    return observe
