"""The interpreter: carries out the effects of `step` against the ports, and owns all timing.

`run_tool_loop` starts the pure core with `TurnStarted`, performs each step's
effects in order (type-to-performer tables) and answers the awaited one with
the next event. It makes no decision of its own beyond the timing rules of
SPEC 5 and 6: the rolling inactivity timeout that every `sink.progress()`
pushes back, the kill handle, the bounded settle of an abandoned stream, the
fresh per-tool timeout and the kill race during a tool.

Two tasks share an attempt, so the common path costs no task and no cancel
scope per call:

* the *runner* steps the loop and awaits each provider call and tool inline;
* the *supervisor* (the caller's task) sleeps until the earliest deadline of
  the call in progress, or until a kill wakes it; during a stream before the
  tool chain is active it waits for a follow-up meanwhile (SPEC 5), so no
  task watches for one. Deadlines are armed lazily:
  a later one is not set on the supervisor's scope (moving a trio scope's
  deadline costs µs); the supervisor re-arms when it wakes to find the call's
  deadline moved. Progress is one float assignment.

When a deadline passes or a kill comes, the supervisor *takes* the call:
decides its outcome (the settle, the notice), cancels the runner and
continues the loop from the same state in a fresh runner. A call that ignores
cancellation (a shield, a blocking cleanup) therefore cannot hold the loop
up; its runner straggles until the call returns, then ends without a trace,
and `run_tool_loop` waits for it only once the attempt is over, so nothing
outlives it.

Everything registered (kill handles) is deregistered on every path, outside
cancellation included, and a sink goes inert when its call is over. Written
against anyio only: it runs on trio and is simply awaited by an asyncio bot.
"""

from toolloop.effects.interpreter.attempt import Observer, Recorder, StartFrom
from toolloop.effects.interpreter.driver import run_tool_loop
from toolloop.effects.interpreter.errors import (
    RAISES,
    CoreMismatch,
    ImpersonationAborted,
    NoApprovalsPort,
)

__all__ = [
    "RAISES",
    "CoreMismatch",
    "ImpersonationAborted",
    "NoApprovalsPort",
    "Observer",
    "Recorder",
    "StartFrom",
    "run_tool_loop",
]
