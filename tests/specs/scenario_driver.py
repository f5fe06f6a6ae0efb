"""Runs a generated scenario (SCENARIOS.md format) through `step` alone.

A stand-in for `toolloop simulate` over the keys `toolloop.specs.paths` emits,
with the same semantics: one stream per provider call and one result per tool
run (the last repeats), `stop_before_tool` and `kill` are genuine stops, the
scenario has no stash (a stashed item is always missing). The calls of a batch
take their results in the order they start, and settle in that order (no
`delay_ms`). Any other key fails loudly, so a witness that outgrows this
driver is noticed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.specs.conformance import Stepped
from toolloop.engine.commands import (
    AwaitTools,
    DispatchTool,
    Effect,
    Finish,
    RaiseError,
    StartTool,
    StreamOnce,
)
from toolloop.engine.config import parse_config
from toolloop.engine.events import (
    Event,
    StashTaken,
    StopRequest,
    StreamEnded,
    ToolSettled,
    TurnStarted,
)
from toolloop.engine.step import initial_state, step
from toolloop.states import (
    ApiFamily,
    DeliberateMode,
    FunctionCall,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
)

STREAM_KEYS = {"status", "text", "error", "call", "calls", "stop_before_tool"}
RESULT_KEYS = {"success", "error", "data", "end_turn", "hang", "kill"}
TURN_KEYS = {"provider", "user_impersonation", "deliberate_mode"}


def run_scenario(scenario: dict[str, Any]) -> list[Stepped]:
    """Every step `step` takes on the scenario, until its final effect."""
    state = initial_state(parse_config(scenario["env"]).config, _turn(scenario["turn"]))
    streams = _cycle(scenario["streams"])
    (tool,) = scenario["tools"]
    results = _cycle(tool["results"])
    event: Event = TurnStarted()
    steps: list[Stepped] = []
    running: list[tuple[int, Any]] = []
    while True:
        out = step(state, event)
        steps.append((state, event, out.move, out.state))
        state = out.state
        *started, last = out.effects
        running += [(e.index, next(results)) for e in started if isinstance(e, StartTool)]
        if isinstance(last, Finish | RaiseError):
            return steps
        event = _answer(last, streams, results, running)


def _answer(
    effect: Effect, streams: Iterator[Any], results: Iterator[Any], running: list[tuple[int, Any]]
) -> Event:
    if isinstance(effect, StreamOnce):
        raw = next(streams)
        stop = StopRequest.STOP if raw.get("stop_before_tool") else StopRequest.NONE
        return StreamEnded(result=_stream(raw), stop=stop)
    if isinstance(effect, DispatchTool | AwaitTools):
        index, raw = (
            (effect.index, next(results)) if isinstance(effect, DispatchTool) else running.pop(0)
        )
        stop = StopRequest.STOP if raw.get("kill") else StopRequest.NONE
        return ToolSettled(result=_result(raw), stop=stop, index=index)
    return StashTaken(item=None)


def _call(call: dict[str, Any]) -> FunctionCall:
    return FunctionCall(
        name=call["name"],
        args=call.get("args"),
        arguments_truncated=call.get("arguments_truncated", False),
    )


def _stream(raw: dict[str, Any]) -> StreamResult:
    assert set(raw) <= STREAM_KEYS, f"unsupported stream keys {set(raw) - STREAM_KEYS}"
    call = raw.get("call")
    default = StreamStatus.FUNCTION_CALL if call is not None else StreamStatus.COMPLETED
    calls = tuple(map(_call, raw.get("calls", ())))
    if calls:
        default = StreamStatus.FUNCTION_CALL
    status = StreamStatus(raw["status"]) if "status" in raw else default
    data: FunctionCall | StreamError | None = calls[0] if calls else None
    if call is not None:
        data = _call(call)
    elif "error" in raw:
        data = StreamError(type="error", message=raw["error"])
    text = raw.get("text", "")
    return StreamResult(status=status, accumulated_text=text, data=data, calls=calls)


def _result(raw: dict[str, Any]) -> ToolResult:
    assert set(raw) <= RESULT_KEYS, f"unsupported result keys {set(raw) - RESULT_KEYS}"
    if raw.get("hang"):
        return ToolResult(success=False, error="was killed" if raw.get("kill") else "timed out")
    success = raw.get("success", "error" not in raw)
    data, error, end_turn = raw.get("data"), raw.get("error"), raw.get("end_turn", False)
    return ToolResult(success=success, data=data, error=error, end_turn=end_turn)


def _turn(raw: dict[str, Any]) -> TurnSettings:
    assert set(raw) <= TURN_KEYS, f"unsupported turn keys {set(raw) - TURN_KEYS}"
    provider = raw.get("provider", {"name": "custom", "api_family": "custom"})
    mode = raw.get("deliberate_mode", {})
    family = ApiFamily(provider["api_family"])
    return TurnSettings(
        provider=ProviderDescriptor(name=provider["name"], api_family=family),
        user_impersonation=raw.get("user_impersonation", False),
        deliberate_mode=DeliberateMode(
            active=mode.get("active", False), allowed=tuple(mode.get("allowed", ()))
        ),
    )


def _cycle(items: list[Any]) -> Iterator[Any]:
    yield from items
    while True:
        yield items[-1]
