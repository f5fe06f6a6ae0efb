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


class Wait:
    """A call of a batch whose outcome is awaited in a task of its own, by `deadline`.

    `open` until its outcome is decided; what it reports after that is dropped.
    """

    __slots__ = ("deadline", "open", "scope")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.scope = anyio.CancelScope()
        self.open = True

    def end(self) -> None:
        """Its outcome is decided: cancel what still runs of it (a tool's straggler runs on)."""
        self.open = False
        self.scope.cancel()


class Started(Wait):
    """A call of a batch started beside others (`StartTool`): its own task, timer and kill.

    Decided when it settled, its timer ran out or a kill ended it.
    """

    __slots__ = ("effect", "started", "timeout_ms")

    def __init__(self, effect: fx.StartTool, started: float, timeout_ms: int) -> None:
        super().__init__(started + timeout_ms / 1000)
        self.effect, self.started, self.timeout_ms = effect, started, timeout_ms


class Asked(Wait):
    """A call of the batch waiting for approval (`AskApproval`): the host's `ask` in its task.

    Decided by a decision, the deadline or a kill.
    """

    __slots__ = ("effect",)

    def __init__(self, effect: fx.AskApproval, deadline: float) -> None:
        super().__init__(deadline)
        self.effect = effect


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
