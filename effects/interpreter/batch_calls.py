"""A batch's calls in flight (SPEC 6b) and its waits for approval (6c), held by one `Batch`.

An attempt makes its `Batch` at the first call it starts or asks about and
drops it once every outcome is reported: a turn of single calls holds none.
"""

from __future__ import annotations

import collections

import anyio

from toolloop.effects.interpreter.calls import failure
from toolloop.engine import commands as fx
from toolloop.states import ApprovalDecision, ToolResult


class Started:
    """A call of a batch started beside others (`StartTool`): its own task, timer and kill.

    `open` until its outcome is decided: it settled, its timer ran out or a kill
    ended it; a result that comes after that is dropped.
    """

    __slots__ = ("deadline", "effect", "open", "scope", "started", "timeout_ms")

    def __init__(self, effect: fx.StartTool, started: float, timeout_ms: int) -> None:
        self.effect, self.started, self.timeout_ms = effect, started, timeout_ms
        self.deadline = started + timeout_ms / 1000
        self.scope = anyio.CancelScope()
        self.open = True

    def end(self) -> None:
        """Its outcome is decided: cancel what still runs of it (a straggler runs on)."""
        self.open = False
        self.scope.cancel()


class Asked:
    """A call of the batch waiting for approval (`AskApproval`): its own task and deadline.

    `open` until the wait's outcome is decided: a decision, the deadline or a kill.
    """

    __slots__ = ("deadline", "effect", "open", "scope")

    def __init__(self, effect: fx.AskApproval, deadline: float) -> None:
        self.effect, self.deadline = effect, deadline
        self.scope = anyio.CancelScope()
        self.open = True

    def end(self) -> None:
        """Its outcome is decided: cancel the host's `ask` if it still runs."""
        self.open = False
        self.scope.cancel()


class Batch:
    """The started calls and the waits of a batch by their position in it, and their outcomes.

    The batch's kill handle too (`__call__`), registered while any of them is
    not reported; `deadlines` keeps each wait's first deadline, so a call asked
    again after a refused decision keeps it (and the batch is kept for it).
    """

    __slots__ = ("asked", "deadlines", "error", "registered", "settled", "started", "woken")

    def __init__(self) -> None:
        self.started: dict[int, Started] = {}
        self.asked: dict[int, Asked] = {}
        self.deadlines: dict[int, float] = {}
        self.settled: collections.deque[
            tuple[Started, ToolResult] | tuple[Asked, ApprovalDecision | None]
        ] = collections.deque()
        """Started calls and waits whose outcome is decided, in that order, not yet reported."""
        self.woken: anyio.Event | None = None
        """Set when a started call settles or is killed, for the runner waiting on the batch."""
        self.error: Exception | None = None
        """What a started call's registry or the host's prompt raised: the attempt's failure."""
        self.registered = False
        """The kill handle is registered with the turn control."""

    def __call__(self) -> None:
        """The kill: ends every wait for approval and every started call at once (6b.4, 6c)."""
        for asked in list(self.asked.values()):
            self.decided(asked, None)
        for run in list(self.started.values()):
            self.decide(run, failure(f"Tool {run.effect.call.name} was killed"))

    def decide(self, run: Started, result: ToolResult) -> None:
        """A started call's outcome: reported to the runner in the order outcomes came."""
        if not run.open:
            return
        run.end()
        del self.started[run.effect.index]
        self.settled.append((run, result))
        if self.woken is not None:
            self.woken.set()

    def decided(self, asked: Asked, decision: ApprovalDecision | None) -> None:
        """A wait's outcome: reported to the runner in the order outcomes came."""
        if not asked.open:
            return
        asked.end()
        del self.asked[asked.effect.index]
        self.settled.append((asked, decision))
        if self.woken is not None:
            self.woken.set()

    def waits(self) -> list[Started | Asked]:
        """Every started call and wait whose outcome is not decided yet."""
        return [*self.started.values(), *self.asked.values()]

    def end(self) -> None:
        """No started call runs on, no wait goes on; what was decided is not reported."""
        for run in self.waits():
            run.end()
        self.started.clear()
        self.asked.clear()
        self.settled.clear()
