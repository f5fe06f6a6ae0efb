"""The `execute_tool {name}` spans of one turn, with the approval waits that precede a call.

A call that needs a person's approval (SPEC 6c) opens its span when it is first
asked about: the wait is part of executing it. The span carries a
`toolloop.approval.*` event per ask and per outcome; an approved call's span
stays open through its run, a denied, expired or withdrawn one ends there with
that outcome. Each wait, from its first ask to its outcome, is one point of
the `toolloop.approval.wait.duration` histogram, on the loop's clock (the one
the interpreter's approval timeout runs on, mocked clocks included).

Spans are matched to their host events by tool name and call id (a queue per
pair: a provider that gives no ids has calls of one name settle in order).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from toolloop.effects.clock import loop_clock
from toolloop.effects.observe import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalEvent,
    ApprovalExpired,
    ToolFinished,
    ToolStarted,
)
from toolloop.effects.telemetry import conventions as sc
from toolloop.states import ApprovalRequest, FunctionCall, JsonObject, ToolResult, Verdict

if TYPE_CHECKING:
    from toolloop.effects.telemetry.tracing import Telemetry

REDACTED = "[redacted]"


class _Open:
    """A tool span not ended yet: waiting for approval (since when), approved, or running."""

    __slots__ = ("running", "span", "waiting_since")

    def __init__(self, span: Span, waiting_since: float | None) -> None:
        self.span, self.waiting_since = span, waiting_since
        self.running = False


class ToolSpans:
    """The open tool spans of a turn, under its `context`, and the secrets its calls were given.

    Of a turn its sampler dropped (`recording` False) it keeps only what the
    metrics need: its spans are the API's invalid span, which records nothing.
    A secret is the raw value of an argument the registry redacts; `scrub` cuts
    every one out of a text. The values are only sought when a text is scrubbed
    (a failure, or content on opt-in): a turn whose tools succeed never walks them.
    """

    def __init__(self, telemetry: Telemetry, context: Context, *, recording: bool) -> None:
        self._telemetry, self._context, self._recording = telemetry, context, recording
        self._secrets: set[str] = set()
        self._unsought: list[tuple[JsonObject, JsonObject]] = []
        """(raw, redacted) arguments whose secrets are not in `_secrets` yet."""
        self._now: Callable[[], float] | None = None
        self._dispatched: dict[tuple[str, str], list[FunctionCall]] = {}
        self._asking: dict[tuple[str, str], JsonObject | None] = {}
        self._open: dict[tuple[str, str], list[_Open]] = {}
        """The spans not ended, by (tool name, call id); a key goes when its last span ends."""

    def dispatched(self, call: FunctionCall) -> None:
        """A call about to start (its effect): its raw arguments name the secrets to cut."""
        key = call.name, call.call_id
        queued = self._dispatched.get(key)
        if queued is None:
            self._dispatched[key] = [call]
        else:
            queued.append(call)

    # -- approval waits (SPEC 6c) ------------------------------------------------------------

    def asking(self, request: ApprovalRequest) -> None:
        """A request about to be asked (its effect): its raw arguments name the secrets to cut."""
        self._asking[request.tool, request.call_id] = request.args

    def asked(self, shown: ApprovalAsked) -> None:
        """The first ask opens the call's span and starts its wait; an ask again is an event."""
        raw = self._asking.pop((shown.name, shown.call_id), None)
        if raw is not None and shown.args is not None:
            self._unsought.append((raw, shown.args))
        waiting = self._waiting(shown.name, shown.call_id)
        attributes: dict[str, Any] = {sc.APPROVAL_TIMEOUT: shown.timeout_ms}
        if waiting is None:
            span = self._start(shown, shown.call_id)
            waiting = _Open(span, self._clock()())
            self._open.setdefault((shown.name, shown.call_id), []).append(waiting)
        waiting.span.add_event(sc.APPROVAL_ASKED_EVENT, attributes)

    def ended(self, shown: ApprovalEvent) -> None:
        """A wait's outcome: an approval keeps the span for the run, any other ends it."""
        waiting = self._waiting(shown.name, shown.call_id)
        if waiting is None or waiting.waiting_since is None:
            return
        if isinstance(shown, ApprovalAnswered):
            outcome = "approved" if shown.verdict is Verdict.APPROVE else "denied"
            attributes: dict[str, Any] = {
                sc.APPROVAL_VERDICT: shown.verdict.value,
                sc.APPROVAL_ACCEPTED: shown.accepted,
            }
            if self._recording and self._telemetry.capture_content:
                attributes[sc.APPROVAL_BY] = shown.by or ""
                attributes[sc.APPROVAL_REASON] = self.scrub(shown.reason or "")
            waiting.span.add_event(sc.APPROVAL_ANSWERED_EVENT, attributes)
            if not shown.accepted:
                return  # meant for other arguments: asked again, the wait goes on
        elif isinstance(shown, ApprovalExpired):
            outcome = "expired"
            waiting.span.add_event(sc.APPROVAL_EXPIRED_EVENT)
        else:
            outcome = "withdrawn"
            waiting.span.add_event(sc.APPROVAL_WITHDRAWN_EVENT)
        waited = self._clock()() - waiting.waiting_since
        waiting.waiting_since = None
        self._telemetry.approval_waits.record(
            waited, {sc.TOOL_NAME: shown.name, sc.APPROVAL_OUTCOME: outcome}
        )
        if outcome != "approved":
            self._close((shown.name, shown.call_id), waiting)
            self._end(waiting.span, outcome, f"approval {outcome}", {})

    def _clock(self) -> Callable[[], float]:
        if self._now is None:
            self._now = loop_clock()
        return self._now

    def _waiting(self, name: str, call_id: str) -> _Open | None:
        opened = self._open.get((name, call_id))
        return next((tool for tool in opened or () if tool.waiting_since is not None), None)

    # -- runs ---------------------------------------------------------------------------------

    def started(self, shown: ToolStarted) -> None:
        """A call runs: in the span its approval opened, else in a new one."""
        key = shown.name, shown.call_id
        queued = self._dispatched.get(key)
        call = None
        if queued is not None:
            call = queued.pop(0)
            if not queued:
                del self._dispatched[key]
        opened = self._open.get(key)
        approved = None
        if opened is not None:
            approved = next(
                (tool for tool in opened if not tool.running and tool.waiting_since is None), None
            )
        passthrough_id = call.passthrough.get("id") if call is not None else None
        call_id = shown.call_id or (passthrough_id if isinstance(passthrough_id, str) else "")
        if approved is None:
            approved = _Open(self._start(shown, call_id), None)
            self._open.setdefault(key, []).append(approved)
        elif call_id and not shown.call_id:  # its approval's span did not know the id
            approved.span.set_attribute(sc.TOOL_CALL_ID, call_id)
        approved.running = True
        if call is not None and call.args is not None and shown.args is not None:
            self._unsought.append((call.args, shown.args))

    def finished(self, shown: ToolFinished, settled: ToolResult | None) -> None:
        """A call settled: its span ends with the outcome (and the result, on opt-in)."""
        key = shown.name, shown.call_id
        for running in self._open.get(key, ()):
            if running.running:
                break
        else:
            return
        self._close(key, running)
        outcome = tool_outcome(shown)
        if not shown.success:
            self._telemetry.tool_failures.add(1, {sc.TOOL_NAME: shown.name, sc.ERROR_TYPE: outcome})
        ended: dict[str, Any] = {}
        if self._recording and self._telemetry.capture_content and settled is not None:
            result = {"success": settled.success, "data": settled.data, "error": settled.error}
            ended[sc.TOOL_RESULT] = self.scrub(json.dumps(result, ensure_ascii=False, default=str))
        self._end(running.span, outcome, shown.error or "", ended)

    def scrub(self, text: str) -> str:
        """`text` with every secret of the turn's calls so far replaced by `[redacted]`."""
        for raw, shown in self._unsought:
            self._secrets |= secret_values(raw, shown)
        self._unsought.clear()
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _close(self, key: tuple[str, str], tool: _Open) -> None:
        opened = self._open[key]
        opened.remove(tool)
        if not opened:
            del self._open[key]

    def open_spans(self) -> Iterator[Span]:
        """The spans an exception left open."""
        for opened in self._open.values():
            for tool in opened:
                yield tool.span

    def _start(self, shown: ApprovalAsked | ToolStarted, call_id: str) -> Span:
        """The call's span, every attribute known at its start given to `start_span`."""
        if not self._recording:  # a turn its sampler dropped: the metrics only
            return INVALID_SPAN
        attributes: dict[str, Any] = {
            sc.OPERATION: "execute_tool",
            sc.TOOL_NAME: shown.name,
            sc.TOOL_TYPE: "function",
            sc.ATTEMPT: shown.attempt,
            sc.ITERATION: shown.iteration,
        }
        if call_id:
            attributes[sc.TOOL_CALL_ID] = call_id
        if self._telemetry.capture_content and shown.args is not None:
            attributes[sc.TOOL_ARGUMENTS] = json.dumps(shown.args, ensure_ascii=False)
        span: Span = self._telemetry.tracer.start_span(
            f"execute_tool {shown.name}",
            self._context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        return span

    def _end(self, span: Span, outcome: str, error: str, ended: dict[str, Any]) -> None:
        if not self._recording:
            return  # the invalid span: nothing to end
        if outcome == "success" and not ended:  # the usual end: one attribute, no dict
            span.set_attribute(sc.TOOL_OUTCOME, outcome)
            span.end()
            return
        ended[sc.TOOL_OUTCOME] = outcome
        if outcome != "success":
            ended[sc.ERROR_TYPE] = outcome
            span.set_status(Status(StatusCode.ERROR, self.scrub(error)))
        span.set_attributes(ended)
        span.end()


def tool_outcome(shown: ToolFinished) -> str:
    """`success`, `killed`, `timeout` or `failure`, read off the interpreter's failure wording."""
    if shown.success:
        return "success"
    error = shown.error or ""
    if error == f"Tool {shown.name} was killed":
        return "killed"
    if error.startswith(f"Tool {shown.name} timed out after "):
        return "timeout"
    return "failure"


def secret_values(raw: Any, shown: Any) -> set[str]:
    """The string values of `raw` that the registry's redaction replaced in `shown`."""
    if shown == REDACTED and isinstance(raw, str) and raw and raw != REDACTED:
        return {raw}
    if isinstance(raw, dict) and isinstance(shown, dict):
        return {
            value
            for key in raw.keys() & shown.keys()
            for value in secret_values(raw[key], shown[key])
        }
    if isinstance(raw, list) and isinstance(shown, list):
        return {value for pair in zip(raw, shown, strict=False) for value in secret_values(*pair)}
    return set()
