"""Runs a generated scenario (SCENARIOS.md format) through `step` alone.

A stand-in for `toolloop simulate` over the keys `toolloop.specs.paths` emits,
with the same semantics: one stream per provider call and one result per tool
run (the last repeats), `stop_before_tool` and `kill` are genuine stops, a
`stall` is the loop's inactivity timeout after the stream's text, the
scenario has no stash (a stashed item is always missing). The calls of a batch
take their results in the order they start, and settle in that order (no
`delay_ms`). A call that waits for approval (SPEC 6c) takes the tool's next
decision when asked: an answer (approve, deny, approve_for) comes before any
running call settles, a timeout after them all, and a kill withdraws every wait
(in the model's order) and ends every running call. Any other key fails loudly,
so a witness that outgrows this driver is noticed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.specs.conformance import Stepped
from toolloop.engine.commands import (
    AskApproval,
    AwaitTools,
    DispatchTool,
    Effect,
    Finish,
    RaiseError,
    StartTool,
    StreamOnce,
)
from toolloop.engine.config_parsing import parse_config
from toolloop.engine.events import (
    ApprovalDecided,
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
    ApprovalDecision,
    DeliberateMode,
    FunctionCall,
    ProviderDescriptor,
    StreamError,
    StreamResult,
    StreamStatus,
    ToolResult,
    TurnSettings,
    Verdict,
    args_digest,
)

STREAM_KEYS = {"status", "text", "error", "call", "calls", "stop_before_tool", "stall"}
RESULT_KEYS = {"success", "error", "data", "end_turn", "hang", "kill"}
TURN_KEYS = {"provider", "user_impersonation", "deliberate_mode"}


class _Waits:
    """The calls running and waiting for approval, and the order their outcomes come in."""

    def __init__(self, results: Iterator[Any], decisions: Iterator[Any]) -> None:
        self.results, self.decisions = results, decisions
        self.running: list[tuple[int, Any]] = []
        self.answered: list[Event] = []
        self.asked: list[int] = []
        self.late: list[Event] = []

    def take(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, StartTool):
                self.running.append((effect.index, next(self.results)))
            elif isinstance(effect, AskApproval):
                self._ask(effect)

    def _ask(self, effect: AskApproval) -> None:
        raw, index = next(self.decisions), effect.index
        if raw == "timeout":
            self.late.append(ApprovalDecided(index=index, decision=None))
        elif raw == {"kill": True}:
            self.asked.append(index)
            self._kill()
        else:
            self.asked.append(index)
            self.answered.append(
                ApprovalDecided(index=index, decision=_decision(raw, effect.request.digest))
            )

    def _kill(self) -> None:
        """Every wait is withdrawn, in the model's order, then every running call ends."""
        waiting = sorted({*self.asked, *(e.index for e in self.late)})  # type: ignore[attr-defined]
        self.answered = [
            ApprovalDecided(index=index, decision=None, stop=StopRequest.STOP) for index in waiting
        ]
        self.late = []
        self.running = [(index, {"hang": True, "kill": True}) for index, _ in self.running]

    def next(self) -> Event:
        if self.answered:
            return self.answered.pop(0)
        if self.running:
            index, raw = self.running.pop(0)
            stop = StopRequest.STOP if raw.get("kill") else StopRequest.NONE
            return ToolSettled(result=_result(raw), stop=stop, index=index)
        return self.late.pop(0)


def _decision(raw: Any, digest: str) -> ApprovalDecision:
    if raw == "approve":
        return ApprovalDecision(verdict=Verdict.APPROVE, digest=digest)
    if "approve_for" in raw:
        return ApprovalDecision(verdict=Verdict.APPROVE, digest=args_digest(raw["approve_for"]))
    return ApprovalDecision(verdict=Verdict.DENY, digest=digest, reason=raw["deny"])


def run_scenario(scenario: dict[str, Any]) -> list[Stepped]:
    """Every step `step` takes on the scenario, until its final effect."""
    state = initial_state(parse_config(scenario["env"]).config, _turn(scenario["turn"]))
    streams = _cycle(scenario["streams"])
    (tool,) = scenario["tools"]
    results = _cycle(tool["results"])
    approval = tool.get("approval")
    waits = _Waits(results, _cycle(approval or [None]))
    event: Event = TurnStarted()
    steps: list[Stepped] = []
    while True:
        out = step(state, event)
        steps.append((state, event, out.move, out.state))
        state = out.state
        *started, last = out.effects
        waits.take(started)
        if isinstance(last, Finish | RaiseError):
            return steps
        event = _answer(last, streams, results, waits, approval is not None)


def _answer(
    effect: Effect, streams: Iterator[Any], results: Iterator[Any], waits: _Waits, asks: bool
) -> Event:
    if isinstance(effect, StreamOnce):
        raw = next(streams)
        stop = StopRequest.STOP if raw.get("stop_before_tool") else StopRequest.NONE
        if raw.get("stall"):  # silent after its text: the loop's inactivity timeout
            return StreamEnded(result=_silent(raw), stop=stop, went_silent=True)
        result = _stream(raw)
        approval = (True,) * len(result.batch) if asks and result.batch else ()
        return StreamEnded(result=result, stop=stop, approval=approval)
    if isinstance(effect, DispatchTool):
        raw = next(results)
        stop = StopRequest.STOP if raw.get("kill") else StopRequest.NONE
        return ToolSettled(result=_result(raw), stop=stop, index=effect.index)
    if isinstance(effect, AwaitTools):
        return waits.next()
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


def _silent(raw: dict[str, Any]) -> StreamResult:
    error = StreamError(type="timeout", message="no data from the provider for 120 s")
    text = raw.get("text", "")
    return StreamResult(status=StreamStatus.TIMEOUT, accumulated_text=text, data=error)


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
